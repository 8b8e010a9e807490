package cli

import (
	"context"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rehearse/rehearse/internal/benchcmd"
	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/exitcode"
	"github.com/rehearse/rehearse/internal/rehearsal"
	"github.com/rehearse/rehearse/internal/report"
)

// exitInterrupted is the exit code after Ctrl-C (128 + SIGINT).
const exitInterrupted = exitcode.Interrupted

type runOptions struct {
	file     string
	outDir   string
	quiet    bool
	progress string
	slo      benchcmd.SLO
	seg      benchcmd.Segment
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
		RunE: func(cmd *cobra.Command, _ []string) error { return runRun(cmd, st, &o) },
	}
	f := cmd.Flags()
	f.StringVarP(&o.file, "file", "f", "", "the rehearsal file (YAML)")
	f.StringVarP(&o.outDir, "output", "o", "", "bundle folder (default: output.dir of the file, else rehearse-NAME-TIME)")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "no progress lines on stderr (failures are still printed)")
	o.slo.Flags(f, true)
	benchcmd.ProgressFlag(f, &o.progress)
	o.seg.Flags(f)
	return cmd
}

// runRun checks run's flags, loads the rehearsal file and hands it to the
// runner: here, or as --workers processes of this binary.
func runRun(cmd *cobra.Command, st *State, o *runOptions) error {
	if o.file == "" {
		return usageError("run: -f REHEARSAL.yaml is required")
	}
	if err := benchcmd.CheckProgress(o.progress); err != nil {
		return err
	}
	o.slo.NoteChanged(cmd.Flags())
	cfg, err := config.Load(o.file)
	if err != nil {
		return &ExitError{Code: 2, Err: err}
	}
	if err := o.slo.Apply(cfg); err != nil {
		return err
	}
	if err := o.seg.Apply(cfg); err != nil {
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
	if o.seg.Workers() > 0 {
		return benchcmd.RunWorkers(cmd.Context(), st.env(), benchcmd.WorkersJob{Seg: &o.seg, Args: benchcmd.WorkerArgs(cmd.CommandPath(), cmd.Flags()), Dir: dir, QuietFlag: "--quiet",
			Summary: func(res *bundle.Results) { report.ResultsTable(res).Text(st.Stdout) }})
	}
	command := append([]string{"rehearse", "run", "-f", o.file, "-o", dir}, o.slo.Args()...)
	if o.seg.Spec() != "" {
		command = append(command, "--segment", o.seg.Spec())
	}
	job := rehearsal.Job{Rehearsal: cfg, Dir: dir, Command: command, Coordination: o.seg.Coordination()}
	return runRehearsal(cmd.Context(), st, job, o.quiet, o.progress)
}

// runRehearsal runs a rehearsal file's job (run's, demo's) and ends it as
// they do: a line per step, a bar per wave unless quiet, the results
// table and the bundle's README (rehearsal.Perform).
func runRehearsal(ctx context.Context, st *State, job rehearsal.Job, quiet bool, progress string) error {
	job.Progress = rehearsal.StepLines(st.Stderr, job.Dir, quiet)
	if !quiet {
		bar := benchcmd.NewWaveBar(st.Stderr, progress, true)
		defer bar.Close()
		job.WaveEvents = bar.Event
	}
	return rehearsal.Perform(ctx, job, rehearsal.Ending{Stdout: st.Stdout, Stderr: st.Stderr, Summary: rehearsal.PrintResults, Report: true})
}
