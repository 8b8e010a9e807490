package rehearsal

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/exitcode"
	"github.com/rehearse/rehearse/internal/report"
	"github.com/rehearse/rehearse/internal/search"
)

// Ending is how a command ends a rehearsal on the terminal: what End
// prints, and what it checks beyond how the rehearsal ended.
type Ending struct {
	// Stdout takes the summary and where the bundle is, Stderr the
	// warnings and verify's problems.
	Stdout, Stderr io.Writer
	// Summary prints the results on Stdout: PrintResults (run, demo),
	// PrintCapacity (capacity), bench's summary; nil prints none.
	Summary func(w io.Writer, res *bundle.Results)
	// Report names the bundle's README.md and says that it verified (run,
	// demo); without it one line names the bundle and how to check it
	// (bench, capacity).
	Report bool
	// Verified, when set, runs once the bundle verified, before the exit
	// status is decided (bench's --save-result files); its error is the
	// command's.
	Verified func(res *bundle.Results) error
	// Faults makes a capacity search whose probe failed for the server's
	// sake (search.Fault) exit 1, once the rehearsal otherwise ended well.
	Faults bool
}

// Perform runs job (Rehearse) and ends it (Rehearsed.End): run, demo,
// bench and capacity all end through it.
func Perform(ctx context.Context, job Job, e Ending) error {
	r, err := Rehearse(ctx, job)
	if err != nil {
		return err
	}
	return r.End(job.Dir, e)
}

// End prints the finished rehearsal whose bundle is in dir: its summary,
// the warnings of token exactness and verify's problems (on Stderr), where
// the bundle is; and returns the command's error (Err, and what e adds).
func (r *Rehearsed) End(dir string, e Ending) error {
	res := r.Outcome.Results
	if e.Summary != nil {
		e.Summary(e.Stdout, res)
	}
	PrintWarnings(e.Stderr, res, r.Problems)
	if e.Report {
		fmt.Fprintf(e.Stdout, "\nBundle: %s (report: %s)\n", dir, filepath.Join(dir, bundle.ReadmeFile))
		if len(r.Problems) == 0 {
			fmt.Fprintf(e.Stdout, "Verified: every digest matches and every aggregate recomputes; check it again with: rehearse verify %s\n", dir)
		}
	} else {
		fmt.Fprintf(e.Stdout, "\nbundle: %s (check it with: rehearse verify %s)\n", dir, dir)
	}
	if e.Verified != nil && len(r.Problems) == 0 {
		if err := e.Verified(res); err != nil {
			return err
		}
	}
	if err := r.Err(dir); err != nil || !e.Faults {
		return err
	}
	for _, c := range res.Capacity {
		if f := search.Fault(c, res.Records); f != "" {
			return &exitcode.Error{Code: 1, Err: fmt.Errorf("%s; the bundle in %s says how", f, dir)}
		}
	}
	return nil
}

// Err is the command's error for a finished rehearsal whose bundle is in
// dir: interrupted (130), a server that refused its input (2: a model it
// does not serve), a bundle that does not verify, workers that could not
// release a wave together, servers that failed, or no request that
// succeeded (1); nil when it ended well.
func (r *Rehearsed) Err(dir string) error {
	out := r.Outcome
	switch {
	case out.Interrupted:
		why := "the first wave was not released"
		if out.Stopped != nil {
			why = out.Stopped.Error()
		}
		return &exitcode.Error{Code: exitcode.Interrupted, Err: fmt.Errorf("interrupted; the bundle in %s holds what finished (%s)", dir, why)}
	case out.Refused != nil:
		// Bad input, found once the server answered: exit 2.
		return &exitcode.Error{Code: exitcode.Usage, Err: fmt.Errorf("%v; no request was sent to it (the bundle in %s holds what was recorded before)", out.Refused, dir)}
	case len(r.Problems) > 0:
		return &exitcode.Error{Code: 1, Err: fmt.Errorf("%s: the bundle does not verify (%d problems)", dir, len(r.Problems))}
	case out.Unsynced != nil:
		return &exitcode.Error{Code: 1, Err: fmt.Errorf("the workers could not release a wave together, so the later waves did not run (%v); the bundle in %s holds what was recorded", out.Unsynced, dir)}
	case len(out.Failed) > 0:
		// The full reasons, with log tails, were printed as they happened
		// and are in the bundle's notes.
		firsts := make([]string, len(out.Failed))
		for i, f := range out.Failed {
			first, _, more := strings.Cut(f, "\n")
			if more {
				first = strings.TrimSuffix(first, ":") + " (shown above)"
			}
			firsts[i] = first
		}
		return &exitcode.Error{Code: 1, Err: fmt.Errorf("%d server(s) failed:\n  %s", len(out.Failed), strings.Join(firsts, "\n  "))}
	}
	if ok, total, byKind := out.Requests(); total > 0 && ok == 0 {
		var kinds []string
		for _, k := range contract.ErrorKinds {
			if n := byKind[k]; n > 0 {
				kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
			}
		}
		return &exitcode.Error{Code: 1, Err: fmt.Errorf("no request succeeded: all %d recorded requests failed (%s); the bundle in %s says how", total, strings.Join(kinds, ", "), dir)}
	}
	return nil
}

// PrintWarnings prints a finished bundle's warnings of token exactness
// (one line per server whose re-counted tokens differ from its usage,
// report.UsageWarnings) and verify's problems.
func PrintWarnings(w io.Writer, res *bundle.Results, problems []bundle.Problem) {
	for _, l := range report.UsageWarnings(res) {
		fmt.Fprintf(w, "rehearse: warning: %s\n", l)
	}
	for _, p := range problems {
		fmt.Fprintf(w, "verify: %s\n", p)
	}
}

// PrintResults is the summary of run and demo: the results table, the
// reasoning table, each capacity search's answer, the mechanism check's
// finding, and what the figures of simulated servers mean.
func PrintResults(w io.Writer, res *bundle.Results) {
	report.ResultsTable(res).Text(w)
	PrintReasoning(w, res)
	for _, c := range res.Capacity {
		fmt.Fprintf(w, "\n%s\n", report.CapacitySentence(c))
	}
	if m := res.MechanismCheck; m != nil {
		fmt.Fprintf(w, "\nMechanism check (separate %d-client wave, not in the table): %s.\n", m.Concurrency, m.Finding())
	}
	if sim := res.Provenance.Simulation; sim != nil && sim.TimeScale > 0 {
		fmt.Fprintf(w, "Simulated servers, not GPU measurements: figures are on the wall clock at time scale %s (goodput ÷ %s and latencies × %s give simulated time).\n",
			report.Number(sim.TimeScale), report.Number(sim.TimeScale), report.Number(sim.TimeScale))
	}
}

// PrintBench is the summary of bench: report's summary table, a row per
// aggregate, the cost table where priced, the reasoning table, then every
// warning as a note.
func PrintBench(w io.Writer, res *bundle.Results) {
	if len(res.Aggregates) == 0 {
		fmt.Fprintln(w, "No recorded waves finished: there is no summary.")
		return
	}
	report.SummaryTable(res).Text(w)
	if res.Cost != nil && res.Provenance.Cost != nil {
		fmt.Fprintf(w, "\nCost per million output tokens at %s (median goodput):\n", report.CostBasisText(*res.Provenance.Cost))
		report.CostTable(res).Text(w)
	}
	PrintReasoning(w, res)
	for _, t := range []struct {
		title string
		sec   report.Section
	}{{"Per LoRA adapter:", report.ModelsTable(res)}, {"Side probes (beside the load, not in its figures):", report.SideProbesTable(res)}} {
		if len(t.sec.Rows) > 0 {
			fmt.Fprintf(w, "\n%s\n", t.title)
			t.sec.Text(w)
		}
	}
	for _, l := range report.Warnings(res) {
		fmt.Fprintf(w, "note: %s\n", l)
	}
}

// PrintReasoning prints the reasoning table of a bundle whose servers
// streamed reasoning or tool calls, and nothing otherwise.
func PrintReasoning(w io.Writer, res *bundle.Results) {
	if sec := report.ReasoningTable(res); len(sec.Rows) > 0 {
		fmt.Fprintln(w, "\nReasoning (goodput and TTFT are content only; TTFT any is the first token of any channel):")
		sec.Text(w)
	}
}

// PrintCapacity is the summary of capacity: each search's answer, its
// cost, and its probes.
func PrintCapacity(w io.Writer, res *bundle.Results) {
	if res == nil {
		return
	}
	for _, c := range res.Capacity {
		fmt.Fprintln(w, report.CapacitySentence(c))
		if cs := report.CapacityCostSentence(res, c.Server); cs != "" {
			fmt.Fprintln(w, cs)
		}
		fmt.Fprintln(w)
		_ = report.CapacityTable(c).Text(w)
		fmt.Fprintln(w)
	}
}

// StepLines prints the runner's steps as run and demo show them: once the
// rehearsal starts, the folder its bundle is written to (a plan refused
// before it gets one line, the refusal); then a timed line per step
// (quiet: only failures, which carry the log's tail, and warnings).
func StepLines(w io.Writer, dir string, quiet bool) func(Event) {
	var started sync.Once
	return func(ev Event) {
		started.Do(func() { fmt.Fprintf(w, "rehearse: writing the bundle to %s\n", dir) })
		text := ev.Text
		if ev.Step == "probe" && ev.Capacity != nil {
			text = report.ProbeLine(*ev.Capacity)
		}
		if !quiet || ev.Step == "fail" || ev.Step == "warn" {
			fmt.Fprintf(w, "%s  %-10s %s\n", time.Now().Format("15:04:05"), ev.Server, text)
		}
	}
}

// ProbeLines prints a line per finished probe (report.ProbeLine), unless
// the progress mode is never, and every warning (WarnLines).
func ProbeLines(w io.Writer, mode string) func(Event) {
	warn := WarnLines(w)
	return func(ev Event) {
		if mode != config.ProgressNever && ev.Step == "probe" && ev.Capacity != nil {
			fmt.Fprintln(w, report.ProbeLine(*ev.Capacity))
		}
		warn(ev)
	}
}

// WarnLines prints the runner's warnings, one line each, whatever the
// progress mode.
func WarnLines(w io.Writer) func(Event) {
	return func(ev Event) {
		if ev.Step == "warn" {
			fmt.Fprintf(w, "rehearse: warning: %s: %s\n", ev.Server, ev.Text)
		}
	}
}
