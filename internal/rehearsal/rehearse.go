package rehearsal

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/exitcode"
	"github.com/rehearse/rehearse/internal/report"
	"github.com/rehearse/rehearse/internal/stream"
	"github.com/rehearse/rehearse/internal/tokenizer"
	"github.com/rehearse/rehearse/internal/workload"
)

// Job is a rehearsal ready to run, from run, demo, bench, capacity or sim
// validate: Rehearse runs it to a verified bundle.
type Job struct {
	// Rehearsal is the rehearsal to run, loaded and checked.
	Rehearsal *config.Rehearsal
	// Dir is the bundle's folder.
	Dir string
	// Command is the command line the bundle records.
	Command []string
	// Notes are the command's own notes, before the provenance's.
	Notes []string
	// Prompts are the resolved prompts, Tokenizer the opened tokenizer
	// (nil: open and resolve them from Rehearsal; bench and capacity
	// bring them, to name their flags in a refusal).
	Prompts   *workload.Set
	Tokenizer *OpenedTokenizer
	// Fail turns a refusal before any work (prompts, tokenizer, a plan
	// beyond the open-file limit, a capacity prediction's profile) into the
	// command's error; nil: FileRefusal, the refusal of a rehearsal file.
	Fail func(error) error
	// Progress receives the runner's steps, WaveEvents each wave's (nil:
	// none).
	Progress   func(Event)
	WaveEvents func(WaveEvent)
	// WavesDone, when set, is called as Rehearse returns, before anything
	// is printed of the rehearsal (a progress bar ends there).
	WavesDone func()
	// Coordination is how a worker of a split plan joins the others (nil:
	// not a worker's command line).
	Coordination *Coordination
}

// Rehearsed is a finished rehearsal: its outcome and the bundle's verify
// problems.
type Rehearsed struct {
	Outcome  *Outcome
	Problems []bundle.Problem
}

// Rehearse opens the tokenizer and resolves the prompts, builds the
// provenance, runs the rehearsal (Run, the one runner), renders the report
// and verifies the bundle with the tokenizer that counted its records, so
// every output_tokens is re-counted too. run, demo, bench, capacity and sim
// validate all go through it. Its error is the command's: a refusal
// before any work (exit 2, Job.Fail), a coordinator that cannot be
// reached, a bundle that could not be written; how the rehearsal itself
// ended is Rehearsed.Err.
func Rehearse(ctx context.Context, job Job) (*Rehearsed, error) {
	if job.Fail == nil {
		job.Fail = FileRefusal(job.Rehearsal)
	}
	if job.WavesDone != nil {
		defer job.WavesDone()
	}
	r, err := job.run(ctx)
	if err != nil {
		return nil, err
	}
	if err := report.Write(job.Dir, r.Outcome.Results); err != nil {
		return nil, fmt.Errorf("%s: report: %w", job.Dir, err)
	}
	verifyOpts := bundle.Options{}
	if tok := job.Tokenizer.Tokenizer; tok != nil {
		verifyOpts.Tokenizer = func(bundle.Provenance) (bundle.Counter, error) { return tok, nil }
	}
	rep, _ := bundle.VerifyWith(context.Background(), job.Dir, verifyOpts)
	r.Problems = rep.Problems
	return r, nil
}

// run resolves the job's inputs (job.Tokenizer is set on return) and runs
// the rehearsal.
func (job *Job) run(ctx context.Context) (*Rehearsed, error) {
	cfg := job.Rehearsal
	prompts, err := job.inputs(ctx)
	if err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("cannot find the rehearse executable for {rehearse}: %w", err)
	}
	prov, notes := Provenance(ctx, cfg, job.Command, job.Tokenizer.Provenance)
	notes = append(append([]string(nil), job.Notes...), notes...)
	if n := job.Tokenizer.Note; n != "" {
		notes = append(notes, n)
	}
	sync, worker, done, err := job.Coordination.Join(ctx, cfg, prompts)
	if err != nil {
		return nil, err
	}
	defer done()
	prov.Worker = worker
	var counter Counter
	if tok := job.Tokenizer.Tokenizer; tok != nil {
		counter = tok
	}
	out, err := Run(ctx, Options{
		Rehearsal: cfg, Dir: job.Dir, RehearseExe: exe, Prompts: prompts, Counter: counter,
		Provenance: prov, Notes: notes, Progress: job.Progress, WaveEvents: job.WaveEvents, Sync: sync,
	})
	if err != nil {
		de, pe, se := (*DescriptorError)(nil), (*PredictError)(nil), (*SegmentError)(nil)
		if _, refused := errors.AsType[*stream.ModelNotServedError](err); refused || errors.As(err, &se) {
			return nil, exitcode.Usagef("%v", err)
		}
		if errors.As(err, &de) || errors.As(err, &pe) {
			return nil, job.Fail(err)
		}
		return nil, err
	}
	return &Rehearsed{Outcome: out}, nil
}

// inputs opens the rehearsal's tokenizer, once, unless the job brings it
// (job.Tokenizer is set on return), and resolves the prompts with it,
// unless the job brings them.
func (job *Job) inputs(ctx context.Context) (workload.Set, error) {
	if job.Tokenizer == nil {
		opened, err := OpenTokenizer(ctx, job.Rehearsal)
		if err != nil {
			return workload.Set{}, job.Fail(err)
		}
		job.Tokenizer = &opened
	}
	if job.Prompts != nil {
		return *job.Prompts, nil
	}
	prompts, err := Prompts(job.Rehearsal, job.Tokenizer.Tokenizer)
	if err != nil {
		return prompts, job.Fail(fmt.Errorf("workload.prompts: %w", err))
	}
	return prompts, nil
}

// FileRefusal is the refusal, before any work, of the rehearsal in cfg's
// file (run, demo): one line naming the file (exit 2), a tokenizer's
// saying what to set in it (TokenizerStop).
func FileRefusal(cfg *config.Rehearsal) func(error) error {
	return func(err error) error {
		if de := (*DescriptorError)(nil); errors.As(err, &de) {
			return exitcode.Usagef("run: %v", err)
		}
		if stop := TokenizerStop(err, cfg.Path); stop != nil {
			return stop
		}
		return &exitcode.Error{Code: exitcode.Usage, Err: fmt.Errorf("%s: %w", cfg.Path, err)}
	}
}

// What to pass when a model's own tokenizer is not at hand, or cannot be
// counted exactly: on the command line, and in a rehearsal file.
const (
	tokenizerFixFlags = "pass --tokenizer PATH (the model's tokenizer.json, or a folder holding one), or --tokenizer usage to count the server's usage.completion_tokens"
	tokenizerFixFile  = "set tokenizer.path to the model's tokenizer.json (or a folder holding one), or tokenizer.variant to usage to count the servers' usage.completion_tokens"
	refusedFixFlags   = "pass --tokenizer usage to count the server's usage.completion_tokens"
	refusedFixFile    = "set tokenizer.variant to usage to count the servers' usage.completion_tokens"
)

// TokenizerStop is the one line (exit 2) of a rehearsal stopped before any
// request because its model's own tokenizer is not at hand or cannot be
// counted exactly (a *TokenizerError), saying what to pass: the flags, or
// with file the rehearsal file's keys; exit 130 when it was interrupted
// looking. nil for any other error.
func TokenizerStop(err error, file string) error {
	var nf *tokenizer.NotFoundError
	var re *tokenizer.RefusedError
	var te *TokenizerError
	fix := ""
	switch {
	case !errors.As(err, &te):
		return nil
	case errors.Is(err, context.Canceled):
		return &exitcode.Error{Code: exitcode.Interrupted, Err: fmt.Errorf("interrupted while finding the tokenizer (%v)", te.Err)}
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
		return exitcode.Usagef("%v; %s", te.Err, fix)
	}
	return exitcode.Usagef("%s: %v; %s", file, err, fix)
}
