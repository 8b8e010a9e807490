package cli

import (
	"context"
	"io"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/rehearsal"
	"github.com/rehearse/rehearse/internal/workload"
)

// This file keeps the names bench*.go and sim_validate.go call while the
// runner's tail moves to package rehearsal (issue 31): each is one call
// there. Once they build a rehearsal.Job and end through
// rehearsal.Perform themselves, it goes.

// rehearsalJob is a rehearsal.Job by its old field names.
type rehearsalJob struct {
	cfg        *config.Rehearsal
	dir        string
	command    []string
	quiet      bool               // unused: only run and demo print steps
	simulation *bundle.Simulation // unused: the provenance finds the same
	notes      []string
	prompts    *workload.Set
	tokenizer  *rehearsal.OpenedTokenizer
	fail       func(error) error
	progress   func(rehearsal.Event)
	waveEvents func(rehearsal.WaveEvent)
	segment    *segmentOptions
}

// rehearsed is a rehearsal.Rehearsed by its old field names.
type rehearsed struct {
	out      *rehearsal.Outcome
	problems []bundle.Problem
	r        *rehearsal.Rehearsed
}

// rehearse is rehearsal.Rehearse.
func rehearse(ctx context.Context, job rehearsalJob) (*rehearsed, error) {
	r, err := rehearsal.Rehearse(ctx, rehearsal.Job{
		Rehearsal: job.cfg, Dir: job.dir, Command: job.command, Notes: job.notes, Prompts: job.prompts,
		Tokenizer: job.tokenizer, Fail: job.fail, Progress: job.progress, WaveEvents: job.waveEvents,
		Coordination: job.segment.coordination(),
	})
	if err != nil {
		return nil, err
	}
	return &rehearsed{out: r.Outcome, problems: r.Problems, r: r}, nil
}

// exitError is rehearsal.Rehearsed.Err.
func (r *rehearsed) exitError(dir string) error { return r.r.Err(dir) }

// printWarnings is rehearsal.PrintWarnings.
func printWarnings(w io.Writer, res *bundle.Results, problems []bundle.Problem) {
	rehearsal.PrintWarnings(w, res, problems)
}

// tokenizerStop is rehearsal.TokenizerStop.
func tokenizerStop(err error, file string) error { return rehearsal.TokenizerStop(err, file) }

// warnLines is rehearsal.WarnLines.
func warnLines(w io.Writer) func(rehearsal.Event) { return rehearsal.WarnLines(w) }

// scaleSimulated is rehearsal.ScaleSimulated.
func scaleSimulated(cfg *config.Rehearsal, k float64) error { return rehearsal.ScaleSimulated(cfg, k) }
