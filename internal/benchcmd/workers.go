package benchcmd

import (
	"context"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/fleet"
)

// workerFlags are the flags a worker process is not handed as given:
// --workers itself, and those RunWorkers sets per worker.
var workerFlags = map[string]bool{
	"workers": true, "segment": true, "coordinator": true, "output": true, "progress": true, "quiet": true,
	"start-at": true, "barrier-timeout": true, "release-margin": true,
	// bench's vLLM result files are written once, of the merged bundle.
	"save-result": true, "result-dir": true, "result-filename": true, "save-detailed": true,
}

// WorkerArgs is the command line of one worker of an invocation (path
// is its cobra CommandPath, f its parsed flags): the subcommand and every
// flag that was set (values as given, never
// redacted: the worker needs them), less workerFlags.
func WorkerArgs(path string, f *pflag.FlagSet) []string {
	out := strings.Fields(path)[1:] // bench, or bench serve
	f.Visit(func(f *pflag.Flag) {
		if workerFlags[f.Name] {
			return
		}
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			for _, v := range sv.GetSlice() {
				out = append(out, "--"+f.Name+"="+v)
			}
			return
		}
		out = append(out, "--"+f.Name+"="+f.Value.String())
	})
	return out
}

// WorkersJob is rehearse bench (or run) --workers N: the N segments of the
// plan as worker processes of this binary on this machine.
type WorkersJob struct {
	Seg  *Segment
	Args []string // a worker's command line, less its own flags
	Dir  string   // the merged bundle
	// QuietFlag is how the subcommand is told to print no progress.
	QuietFlag string
	// Summary prints the merged bundle's table.
	Summary func(res *bundle.Results)
	// After, when set, runs once the merged bundle verified (bench's
	// --save-result files).
	After func(res *bundle.Results) error
}

// RunWorkers runs job's N segments here as worker processes and merges
// them (fleet.Run).
func RunWorkers(ctx context.Context, env Env, job WorkersJob) error {
	fj := fleet.Job{
		Workers: job.Seg.workers, Args: job.Args, Dir: job.Dir, QuietFlag: job.QuietFlag,
		StartAt: job.Seg.startAt, Start: job.Seg.start, Margin: job.Seg.releaseMargin, BarrierTimeout: job.Seg.barrierTimeout,
		Stdout: env.Stdout, Stderr: env.Stderr, After: job.After,
	}
	if job.Summary != nil {
		fj.Summary = func(_ io.Writer, res *bundle.Results) { job.Summary(res) }
	}
	return fleet.Run(ctx, fj)
}
