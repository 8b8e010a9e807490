package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/exitcode"
	"github.com/rehearse/rehearse/internal/rehearsal"
	"github.com/rehearse/rehearse/internal/report"
	"github.com/rehearse/rehearse/internal/stream"
	"github.com/rehearse/rehearse/internal/tokenizer"
	"github.com/rehearse/rehearse/internal/workload"
)

// exitInterrupted is the exit code after Ctrl-C (128 + SIGINT).
const exitInterrupted = exitcode.Interrupted

type runOptions struct {
	file     string
	outDir   string
	quiet    bool
	progress string
	slo      sloOptions
	seg      segmentOptions
}

func newRunCmd(st *State) *cobra.Command {
	var o runOptions
	cmd := &cobra.Command{
		Use:   "run -f REHEARSAL.yaml [-o DIR]",
		Short: "Launch the servers of a rehearsal file, drive them, stop them, and write the bundle",
		Long: `Run a rehearsal file: for each server in order, launch it by argv in its own
process group (or reach it at base_url), wait until it is ready (alive, health
probe, /v1/models, one tiny request; a model that the /v1/models list does not
serve stops the rehearsal there, before any request to it, exit 2), run the
warm-up and recorded waves, run the mechanism check while polling its
Prometheus metric (with mechanism_check.evidence: client, or where no sample
could be read, on the client's own records of the wave: how many requests
streamed at once), and stop it (SIGTERM to the group with a marker line in its
log, SIGKILL after the grace period).
Then write the bundle: results.json, journal.jsonl, each server's complete log,
README.md with plots, SHA256SUMS; verify it; print the results table.

--segment i/N (or segment: in the file) runs worker i's share of every wave
of a plan split among N workers, against servers reached at base_url, with
--coordinator URL and --start-at as in rehearse bench; --workers N runs the N
segments here as processes and merges them (see rehearse bench --help).

A server that is not ready or dies is noted in the bundle and the run goes on
with the next server (on_server_failure: continue) or stops (stop). Ctrl-C
(or SIGTERM, SIGHUP) cancels the requests in flight, then stops the server
once their records are journaled, and writes the bundle of what finished
(exit status 130); a second Ctrl-C sends SIGKILL to the servers' groups at
once instead of waiting for their grace period. Each server runs under a
keeper (a "rehearse-keeper" process): should rehearse itself be killed, even
by SIGKILL, the keeper kills the server and everything it started, and
"rehearse report DIR" rebuilds results.json from the journal. Secrets the
rehearsal file names (secret-named variables, api_key_env, --api-key-style
flags, inside a "sh -c" string too) are scrubbed from the stored server logs,
and from what a server sends back (a record so scrubbed is marked redacted).
Exit status 1 when a server failed or the bundle does not verify, 2 for a bad
rehearsal file (every problem is listed with its field path).`,
		Example: `  rehearse run -f examples/simulated.yaml -o /tmp/sim
  rehearse run -f examples/t4-seed.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.file == "" {
				return usageError("run: -f REHEARSAL.yaml is required")
			}
			if err := checkProgress(o.progress); err != nil {
				return err
			}
			o.slo.noteChanged(cmd.Flags())
			cfg, err := config.Load(o.file)
			if err != nil {
				return &ExitError{Code: 2, Err: err}
			}
			if err := o.slo.apply(cfg); err != nil {
				return err
			}
			if err := o.seg.apply(cfg); err != nil {
				return err
			}
			dir := o.outDir
			if dir == "" {
				dir = cfg.Output.Dir
			}
			if dir == "" {
				base := strings.TrimSuffix(filepath.Base(o.file), filepath.Ext(o.file))
				dir = "rehearse-" + base + "-" + time.Now().UTC().Format("20060102T150405Z")
			}
			if o.seg.workers > 0 {
				return runWorkers(cmd.Context(), st, workersJob{seg: &o.seg, args: workerArgs(cmd), dir: dir, quietFlag: "--quiet",
					summary: func(res *bundle.Results) { report.ResultsTable(res).Text(st.Stdout) }})
			}
			command := append([]string{"rehearse", "run", "-f", o.file, "-o", dir}, o.slo.args()...)
			if o.seg.segment != "" {
				command = append(command, "--segment", o.seg.segment)
			}
			return runRehearsal(cmd.Context(), st, rehearsalJob{
				cfg: cfg, dir: dir, quiet: o.quiet, progressMode: o.progress,
				command:    command,
				simulation: rehearsal.Simulation(cfg),
				segment:    &o.seg,
			})
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.file, "file", "f", "", "the rehearsal file (YAML)")
	f.StringVarP(&o.outDir, "output", "o", "", "bundle folder (default: output.dir of the file, else rehearse-NAME-TIME)")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "no progress lines on stderr (failures are still printed)")
	sloFlags(f, &o.slo, true)
	progressFlag(f, &o.progress)
	segmentFlags(f, &o.seg)
	return cmd
}

// rehearsalJob is a rehearsal ready to run, from run, demo or bench.
type rehearsalJob struct {
	cfg     *config.Rehearsal
	dir     string
	command []string
	quiet   bool
	// progressMode is --progress: the live view of each wave (run, demo).
	progressMode string
	// simulation is demo's; the provenance builder finds the same from
	// the simulated servers of cfg.
	simulation *bundle.Simulation
	notes      []string
	// prompts are the resolved prompts, tokenizer the opened tokenizer
	// (nil: open and resolve them from cfg).
	prompts   *workload.Set
	tokenizer *rehearsal.OpenedTokenizer
	// fail turns a refusal before any work (prompts, tokenizer, a plan
	// beyond the open-file limit, a capacity prediction's profile) into the
	// command's error.
	fail func(error) error
	// progress receives the runner's steps; waveEvents each wave's.
	progress   func(rehearsal.Event)
	waveEvents func(rehearsal.WaveEvent)
	// segment is the worker's flags of a split plan (nil: none).
	segment *segmentOptions
}

// What to pass when a model's own tokenizer is not at hand, or cannot be
// counted exactly: on the command line, and in a rehearsal file.
const (
	tokenizerFixFlags = "pass --tokenizer PATH (the model's tokenizer.json, or a folder holding one), or --tokenizer usage to count the server's usage.completion_tokens"
	tokenizerFixFile  = "set tokenizer.path to the model's tokenizer.json (or a folder holding one), or tokenizer.variant to usage to count the servers' usage.completion_tokens"
	refusedFixFlags   = "pass --tokenizer usage to count the server's usage.completion_tokens"
	refusedFixFile    = "set tokenizer.variant to usage to count the servers' usage.completion_tokens"
)

// tokenizerStop is the one line (exit 2) of a rehearsal stopped before any
// request because its model's own tokenizer is not at hand or cannot be
// counted exactly, saying what to pass: the flags, or with file the
// rehearsal file's keys; 130 when it was interrupted looking. nil for any
// other error.
func tokenizerStop(err error, file string) error {
	var nf *tokenizer.NotFoundError
	var re *tokenizer.RefusedError
	var te *rehearsal.TokenizerError
	fix := ""
	switch {
	case !errors.As(err, &te):
		return nil
	case errors.Is(err, context.Canceled):
		return &ExitError{Code: exitInterrupted, Err: fmt.Errorf("interrupted while finding the tokenizer (%v)", te.Err)}
	case errors.As(err, &nf):
		fix = tokenizerFixFlags
		if file != "" {
			fix = tokenizerFixFile
		}
	case errors.As(err, &re):
		fix = refusedFixFlags
		if file != "" {
			fix = refusedFixFile
		}
	default:
		return nil
	}
	if file == "" {
		// On the command line the model's flag is the key; the message
		// names the model.
		return usageError("%v; %s", te.Err, fix)
	}
	return usageError("%s: %v; %s", file, err, fix)
}

// rehearsed is a finished rehearsal: its outcome, the bundle's verify
// problems, and the tokenizer that counted it.
type rehearsed struct {
	out      *rehearsal.Outcome
	problems []bundle.Problem
}

// rehearse opens the tokenizer and resolves the prompts, builds the provenance,
// runs the rehearsal (rehearsal.Run, the one runner), renders the report
// and verifies the bundle with the tokenizer that counted its records, so
// every output_tokens is re-counted too. run, demo and bench all go
// through it.
func rehearse(ctx context.Context, job rehearsalJob) (*rehearsed, error) {
	cfg := job.cfg
	opened, prompts, err := job.inputs(ctx)
	if err != nil {
		return nil, err
	}
	tok, tokProv, tokNote := opened.Tokenizer, opened.Provenance, opened.Note
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("cannot find the rehearse executable for {rehearse}: %w", err)
	}
	prov, notes := rehearsal.Provenance(ctx, cfg, job.command, tokProv)
	if job.simulation != nil {
		prov.Simulation = job.simulation
	}
	prov.Cost = costBasis(cfg.Cost)
	notes = append(append([]string(nil), job.notes...), notes...)
	if tokNote != "" {
		notes = append(notes, tokNote)
	}
	sync, worker, done, err := job.segment.coordination().Join(ctx, cfg, prompts)
	if err != nil {
		return nil, err
	}
	defer done()
	prov.Worker = worker
	var counter rehearsal.Counter
	verifyOpts := bundle.Options{}
	if tok != nil {
		counter = tok
		verifyOpts.Tokenizer = func(bundle.Provenance) (bundle.Counter, error) { return tok, nil }
	}
	out, err := rehearsal.Run(ctx, rehearsal.Options{
		Rehearsal: cfg, Dir: job.dir, RehearseExe: exe, Prompts: prompts, Counter: counter,
		Provenance: prov, Notes: notes, Progress: job.progress, WaveEvents: job.waveEvents, Sync: sync,
	})
	if err != nil {
		de, pe, se := (*rehearsal.DescriptorError)(nil), (*rehearsal.PredictError)(nil), (*rehearsal.SegmentError)(nil)
		if _, refused := errors.AsType[*stream.ModelNotServedError](err); refused || errors.As(err, &se) {
			return nil, usageError("%v", err)
		}
		if errors.As(err, &de) || errors.As(err, &pe) {
			return nil, job.fail(err)
		}
		return nil, err
	}
	if err := report.Write(job.dir, out.Results); err != nil {
		return nil, fmt.Errorf("%s: report: %w", job.dir, err)
	}
	rep, _ := bundle.VerifyWith(context.Background(), job.dir, verifyOpts)
	return &rehearsed{out: out, problems: rep.Problems}, nil
}

// printWarnings prints, on stderr, a finished bundle's warnings of token
// exactness (one line per server whose re-counted tokens differ from its
// usage, report.UsageWarnings) and verify's problems.
func printWarnings(w io.Writer, res *bundle.Results, problems []bundle.Problem) {
	for _, l := range report.UsageWarnings(res) {
		fmt.Fprintf(w, "rehearse: warning: %s\n", l)
	}
	for _, p := range problems {
		fmt.Fprintf(w, "verify: %s\n", p)
	}
}

// inputs opens the rehearsal's tokenizer, once, and resolves the prompts
// with it, unless the job brings them (bench and capacity do, to name
// their flags in a refusal).
func (job rehearsalJob) inputs(ctx context.Context) (rehearsal.OpenedTokenizer, workload.Set, error) {
	opened := rehearsal.OpenedTokenizer{}
	if job.tokenizer != nil {
		opened = *job.tokenizer
	} else {
		var err error
		if opened, err = rehearsal.OpenTokenizer(ctx, job.cfg); err != nil {
			return opened, workload.Set{}, job.fail(err)
		}
	}
	if job.prompts != nil {
		return opened, *job.prompts, nil
	}
	prompts, err := rehearsal.Prompts(job.cfg, opened.Tokenizer)
	if err != nil {
		return opened, prompts, job.fail(fmt.Errorf("workload.prompts: %w", err))
	}
	return opened, prompts, nil
}

// exitError is the command's error for a finished rehearsal: interrupted
// (130), a server that refused its input (2: a model it does not serve),
// a bundle that does not verify, or servers that failed (1).
func (r *rehearsed) exitError(dir string) error {
	out := r.out
	switch {
	case out.Interrupted:
		why := "the first wave was not released"
		if out.Stopped != nil {
			why = out.Stopped.Error()
		}
		return &ExitError{Code: exitInterrupted, Err: fmt.Errorf("interrupted; the bundle in %s holds what finished (%s)", dir, why)}
	case out.Refused != nil:
		// Bad input, found once the server answered: exit 2.
		return &ExitError{Code: 2, Err: fmt.Errorf("%v; no request was sent to it (the bundle in %s holds what was recorded before)", out.Refused, dir)}
	case len(r.problems) > 0:
		return &ExitError{Code: 1, Err: fmt.Errorf("%s: the bundle does not verify (%d problems)", dir, len(r.problems))}
	case out.Unsynced != nil:
		return &ExitError{Code: 1, Err: fmt.Errorf("the workers could not release a wave together, so the later waves did not run (%v); the bundle in %s holds what was recorded", out.Unsynced, dir)}
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
		return &ExitError{Code: 1, Err: fmt.Errorf("%d server(s) failed:\n  %s", len(out.Failed), strings.Join(firsts, "\n  "))}
	}
	if ok, total, byKind := out.Requests(); total > 0 && ok == 0 {
		var kinds []string
		for _, k := range contract.ErrorKinds {
			if n := byKind[k]; n > 0 {
				kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
			}
		}
		return &ExitError{Code: 1, Err: fmt.Errorf("no request succeeded: all %d recorded requests failed (%s); the bundle in %s says how", total, strings.Join(kinds, ", "), dir)}
	}
	return nil
}

func runRehearsal(ctx context.Context, st *State, job rehearsalJob) error {
	job.fail = func(err error) error {
		if de := (*rehearsal.DescriptorError)(nil); errors.As(err, &de) {
			return usageError("run: %v", err)
		}
		if stop := tokenizerStop(err, job.cfg.Path); stop != nil {
			return stop
		}
		return &ExitError{Code: 2, Err: fmt.Errorf("%s: %w", job.cfg.Path, err)}
	}
	// The bundle's folder is named once the rehearsal starts: a plan
	// refused before it gets one line, the refusal.
	var started sync.Once
	job.progress = func(ev rehearsal.Event) {
		started.Do(func() { fmt.Fprintf(st.Stderr, "rehearse: writing the bundle to %s\n", job.dir) })
		// A failure is printed even when quiet: it carries the log's tail.
		text := ev.Text
		if ev.Step == "probe" && ev.Capacity != nil {
			text = report.ProbeLine(*ev.Capacity)
		}
		if !job.quiet || ev.Step == "fail" || ev.Step == "warn" {
			fmt.Fprintf(st.Stderr, "%s  %-10s %s\n", time.Now().Format("15:04:05"), ev.Server, text)
		}
	}
	if !job.quiet {
		bar := newWaveBar(st.Stderr, job.progressMode, true)
		defer bar.close()
		job.waveEvents = bar.event
	}
	r, err := rehearse(ctx, job)
	if err != nil {
		return err
	}
	report.ResultsTable(r.out.Results).Text(st.Stdout)
	printReasoning(st.Stdout, r.out.Results)
	for _, c := range r.out.Results.Capacity {
		fmt.Fprintf(st.Stdout, "\n%s\n", report.CapacitySentence(c))
	}
	if m := r.out.Results.MechanismCheck; m != nil {
		fmt.Fprintf(st.Stdout, "\nMechanism check (separate %d-client wave, not in the table): %s.\n", m.Concurrency, m.Finding())
	}
	if sim := r.out.Results.Provenance.Simulation; sim != nil && sim.TimeScale > 0 {
		fmt.Fprintf(st.Stdout, "Simulated servers, not GPU measurements: figures are on the wall clock at time scale %s (goodput ÷ %s and latencies × %s give simulated time).\n",
			report.Number(sim.TimeScale), report.Number(sim.TimeScale), report.Number(sim.TimeScale))
	}
	printWarnings(st.Stderr, r.out.Results, r.problems)
	fmt.Fprintf(st.Stdout, "\nBundle: %s (report: %s)\n", job.dir, filepath.Join(job.dir, bundle.ReadmeFile))
	if len(r.problems) == 0 {
		fmt.Fprintf(st.Stdout, "Verified: every digest matches and every aggregate recomputes; check it again with: rehearse verify %s\n", job.dir)
	}
	return r.exitError(job.dir)
}
