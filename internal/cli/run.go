package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/drive"
	"github.com/rehearse/rehearse/internal/provenance"
	"github.com/rehearse/rehearse/internal/rehearsal"
	"github.com/rehearse/rehearse/internal/report"
	"github.com/rehearse/rehearse/internal/workload"
)

// exitInterrupted is the exit code after Ctrl-C (128 + SIGINT).
const exitInterrupted = 130

type runOptions struct {
	file   string
	outDir string
	quiet  bool
}

func newRunCmd(st *State) *cobra.Command {
	var o runOptions
	cmd := &cobra.Command{
		Use:   "run -f REHEARSAL.yaml [-o DIR]",
		Short: "Launch the servers of a rehearsal file, drive them, stop them, and write the bundle",
		Long: `Run a rehearsal file: for each server in order, launch it by argv in its own
process group (or reach it at base_url), wait until it is ready (alive, health
probe, /v1/models, one tiny request), run the warm-up and recorded waves, run
the mechanism check while polling its Prometheus metric, and stop it (SIGTERM
to the group with a marker line in its log, SIGKILL after the grace period).
Then write the bundle: results.json, journal.jsonl, each server's complete log,
README.md with plots, SHA256SUMS; verify it; print the results table.

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
flags) are scrubbed from the stored server logs.
Exit status 1 when a server failed or the bundle does not verify, 2 for a bad
rehearsal file (every problem is listed with its field path).`,
		Example: `  rehearse run -f examples/simulated.yaml -o /tmp/sim
  rehearse run -f examples/t4-seed.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.file == "" {
				return usageError("run: -f REHEARSAL.yaml is required")
			}
			cfg, err := config.Load(o.file)
			if err != nil {
				return &ExitError{Code: 2, Err: err}
			}
			dir := o.outDir
			if dir == "" {
				dir = cfg.Output.Dir
			}
			if dir == "" {
				base := strings.TrimSuffix(filepath.Base(o.file), filepath.Ext(o.file))
				dir = "rehearse-" + base + "-" + time.Now().UTC().Format("20060102T150405Z")
			}
			return runRehearsal(cmd.Context(), st, rehearsalJob{
				cfg: cfg, dir: dir, quiet: o.quiet,
				command:    []string{"rehearse", "run", "-f", o.file, "-o", dir},
				simulation: rehearsal.Simulation(cfg),
			})
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.file, "file", "f", "", "the rehearsal file (YAML)")
	f.StringVarP(&o.outDir, "output", "o", "", "bundle folder (default: output.dir of the file, else rehearse-NAME-TIME)")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "no progress lines on stderr (failures are still printed)")
	return cmd
}

// rehearsalJob is a rehearsal ready to run, from run or demo.
type rehearsalJob struct {
	cfg        *config.Rehearsal
	dir        string
	command    []string
	quiet      bool
	simulation *bundle.Simulation
	notes      []string
}

func runRehearsal(ctx context.Context, st *State, job rehearsalJob) error {
	cfg := job.cfg
	prompts, err := resolvePrompts(cfg)
	if err != nil {
		return &ExitError{Code: 2, Err: err}
	}
	tok, tokProv, tokNote, err := rehearsal.OpenTokenizer(cfg)
	if err != nil {
		return &ExitError{Code: 2, Err: fmt.Errorf("%s: %w", cfg.Path, err)}
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("cannot find the rehearse executable for {rehearse}: %w", err)
	}
	notes := append([]string(nil), job.notes...)
	gpus, gpuErr := provenance.GPUs(ctx)
	if gpuErr != nil {
		notes = append(notes, "nvidia-smi failed, so no GPU is described: "+gpuErr.Error())
	}
	if tokNote != "" {
		notes = append(notes, tokNote)
	}
	prov := bundle.Provenance{
		Tool:       provenance.Tool(),
		Command:    job.command,
		Host:       provenance.Host(),
		GPUs:       gpus,
		Tokenizer:  tokProv,
		Simulation: job.simulation,
	}
	// The bundle's folder is named once the rehearsal starts: a plan
	// refused before it gets one line, the refusal.
	var started sync.Once
	progress := func(ev rehearsal.Event) {
		started.Do(func() { fmt.Fprintf(st.Stderr, "rehearse: writing the bundle to %s\n", job.dir) })
		// A failure is printed even when quiet: it carries the log's tail.
		if !job.quiet || ev.Step == "fail" {
			fmt.Fprintf(st.Stderr, "%s  %-10s %s\n", time.Now().Format("15:04:05"), ev.Server, ev.Text)
		}
	}
	out, err := rehearsal.Run(ctx, rehearsal.Options{
		Rehearsal: cfg, Dir: job.dir, RehearseExe: exe, Prompts: prompts, Counter: tok,
		Provenance: prov, Notes: notes, Progress: progress,
	})
	if err != nil {
		if de := (*drive.DescriptorError)(nil); errors.As(err, &de) {
			return usageError("run: %v", err)
		}
		return err
	}
	if err := report.Write(job.dir, out.Results); err != nil {
		return fmt.Errorf("%s: report: %w", job.dir, err)
	}
	report.ResultsTable(out.Results).Text(st.Stdout)
	if m := out.Results.MechanismCheck; m != nil {
		max := "no sample"
		if m.Max != nil {
			max = report.Number(*m.Max)
		}
		fmt.Fprintf(st.Stdout, "\nMechanism check (separate %d-client wave, not in the table): %s of %s peaked at %s over %d samples.\n",
			m.Concurrency, m.Metric, m.Server, max, len(m.Series))
	}
	if sim := out.Results.Provenance.Simulation; sim != nil && sim.TimeScale > 0 {
		fmt.Fprintf(st.Stdout, "Simulated servers, not GPU measurements: figures are on the wall clock at time scale %s (goodput ÷ %s and latencies × %s give simulated time).\n",
			report.Number(sim.TimeScale), report.Number(sim.TimeScale), report.Number(sim.TimeScale))
	}
	// The bundle is verified with the tokenizer that counted its records,
	// so every output_tokens is re-counted too.
	rep, _ := bundle.VerifyWith(context.Background(), job.dir, bundle.Options{Tokenizer: func(bundle.Provenance) (bundle.Counter, error) { return tok, nil }})
	probs := rep.Problems
	for _, p := range probs {
		fmt.Fprintf(st.Stderr, "verify: %s\n", p)
	}
	fmt.Fprintf(st.Stdout, "\nBundle: %s (report: %s)\n", job.dir, filepath.Join(job.dir, bundle.ReadmeFile))
	if len(probs) == 0 {
		fmt.Fprintf(st.Stdout, "Verified: every digest matches and every aggregate recomputes; check it again with: rehearse verify %s\n", job.dir)
	}
	switch {
	case out.Interrupted:
		return &ExitError{Code: exitInterrupted, Err: fmt.Errorf("interrupted; the bundle in %s holds what finished", job.dir)}
	case len(probs) > 0:
		return &ExitError{Code: 1, Err: fmt.Errorf("%s: the bundle does not verify (%d problems)", job.dir, len(probs))}
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
	return nil
}

func resolvePrompts(cfg *config.Rehearsal) ([]string, error) {
	p := cfg.Workload.Prompts
	switch {
	case p.File != "":
		ps, err := workload.LoadPrompts(p.File)
		if err != nil {
			return nil, fmt.Errorf("%s: workload.prompts: %w", cfg.Path, err)
		}
		return ps, nil
	case len(p.Inline) > 0:
		return append([]string(nil), p.Inline...), nil
	}
	return workload.BuiltinPrompts(), nil
}
