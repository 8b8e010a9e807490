// Package fleet runs a split plan's workers on one machine (rehearse run
// or bench --workers N, SPEC §10): N worker processes of this binary,
// worker i running its share of every wave with --segment i/N against a
// coordinator served in this process (package coordinate) that releases
// each wave on all of them together; then the N segment bundles are
// merged into one bundle of the whole plan, its report written and the
// bundle verified. (A server's replicas, which the runner launches as one
// server, are package rehearsal's.)
package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/coordinate"
	"github.com/rehearse/rehearse/internal/exitcode"
	"github.com/rehearse/rehearse/internal/rehearsal"
	"github.com/rehearse/rehearse/internal/report"
)

// Job is rehearse bench (or run) --workers N: the N segments of the plan
// as worker processes of this binary on this machine.
type Job struct {
	// Workers is N, at least 2.
	Workers int
	// Args is a worker's command line (the subcommand and its flags, as
	// given), less the flags Run sets per worker: --segment,
	// --coordinator, --output, --barrier-timeout, --start-at and QuietFlag.
	Args []string
	// Dir is the merged bundle's folder; the segments are written to
	// Dir.workers/worker-i, each worker's output to worker-i.log beside it.
	Dir string
	// QuietFlag is how the subcommand is told to print no progress.
	QuietFlag string
	// StartAt is --start-at as given ("": none), Start the instant it
	// names: the first wave is not released before it.
	StartAt string
	Start   time.Time
	// Margin is how long after the last worker reached a wave's barrier
	// the wave is released; BarrierTimeout how long a worker waits there.
	Margin, BarrierTimeout time.Duration
	// Stdout takes the merged bundle's summary, Stderr the workers'
	// failures, warnings and verify's problems.
	Stdout, Stderr io.Writer
	// Summary prints the merged bundle's results on Stdout (nil: none).
	Summary func(w io.Writer, res *bundle.Results)
	// After, when set, runs once the merged bundle verified (bench's
	// --save-result files); its error is the command's.
	After func(res *bundle.Results) error
}

// Run starts an in-process coordinator, runs the N workers as child
// processes (os.Executable) with --segment i/N --coordinator URL, then
// merges the segments into job.Dir and verifies it. Ctrl-C (ctx)
// interrupts every worker (each writes the bundle of what it recorded)
// and merges what they wrote (exit 130). Its error is the command's: a
// folder that is not empty (exit 2), a merged bundle that does not verify
// or a worker that failed (exit 1).
func Run(ctx context.Context, job Job) error {
	n := job.Workers
	if ne := (*bundle.NotEmptyError)(nil); errors.As(bundle.CheckEmptyDir(job.Dir), &ne) {
		return exitcode.Usagef("%v", ne)
	}
	segDir := strings.TrimRight(job.Dir, string(filepath.Separator)) + ".workers"
	if err := bundle.MakeEmptyDir(segDir); err != nil {
		return exitcode.Usagef("--workers: %v", err)
	}
	// A token of its own: another local user cannot reach these workers'
	// coordinator either.
	token := coordinate.NewToken()
	coord := &coordinate.Server{Workers: n, StartAt: job.Start, Margin: job.Margin, Timeout: job.BarrierTimeout, Token: token}
	addr, err := coord.Listen("127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("--workers: the coordinator cannot listen: %w", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = coord.Shutdown(sctx)
	}()
	url := "http://" + addr.String()
	fmt.Fprintf(job.Stderr, "rehearse: %d workers, coordinator at %s, segments in %s\n", n, url, segDir)

	parts := make([]string, n)
	for i := range n {
		parts[i] = filepath.Join(segDir, "worker-"+strconv.Itoa(i))
	}
	procs, closeLogs, err := job.start(url, token, parts)
	if err != nil {
		return err
	}
	defer closeLogs()
	failed := wait(ctx, coord, procs, parts)
	for _, f := range failed {
		fmt.Fprintf(job.Stderr, "rehearse: %s\n", f)
	}
	merged, probs, err := merge(ctx, job.Stderr, job.Dir, parts, failed)
	if err != nil {
		return err
	}
	return job.end(ctx, segDir, merged, probs, failed)
}

// end prints the merged bundle, and returns the command's error.
func (job Job) end(ctx context.Context, segDir string, merged *bundle.Results, probs []bundle.Problem, failed []string) error {
	if job.Summary != nil {
		job.Summary(job.Stdout, merged)
	}
	printWorkers(job.Stdout, merged)
	rehearsal.PrintWarnings(job.Stderr, merged, probs)
	fmt.Fprintf(job.Stdout, "\nbundle: %s, merged from %d worker segments in %s (check it with: rehearse verify %s)\n", job.Dir, len(merged.Provenance.Workers), segDir, job.Dir)
	switch {
	case ctx.Err() != nil:
		return &exitcode.Error{Code: exitcode.Interrupted, Err: fmt.Errorf("interrupted; the bundle in %s holds what the workers recorded", job.Dir)}
	case len(probs) > 0:
		return &exitcode.Error{Code: 1, Err: fmt.Errorf("%s: the merged bundle does not verify (%d problems)", job.Dir, len(probs))}
	case len(failed) > 0:
		return &exitcode.Error{Code: 1, Err: fmt.Errorf("%d of %d workers failed: %s", len(failed), job.Workers, strings.Join(failed, "; "))}
	}
	if job.After != nil {
		return job.After(merged)
	}
	return nil
}

// start starts worker i writing its segment to parts[i], its output to
// parts[i].log; on an error none is left running.
func (job Job) start(url, token string, parts []string) ([]*exec.Cmd, func(), error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, fmt.Errorf("--workers: cannot find the rehearse executable: %w", err)
	}
	n := len(parts)
	var (
		procs []*exec.Cmd
		logs  []*os.File
	)
	closeLogs := func() {
		for _, f := range logs {
			f.Close()
		}
	}
	abort := func(err error) ([]*exec.Cmd, func(), error) {
		for _, p := range procs {
			_ = p.Process.Kill()
			_ = p.Wait()
		}
		closeLogs()
		return nil, nil, err
	}
	for i, part := range parts {
		args := append([]string(nil), job.Args...)
		args = append(args, "--segment="+strconv.Itoa(i)+"/"+strconv.Itoa(n), "--coordinator="+url, "--output="+part,
			"--barrier-timeout="+job.BarrierTimeout.String(), job.QuietFlag)
		if job.StartAt != "" {
			args = append(args, "--start-at="+job.StartAt)
		}
		logf, err := os.Create(part + ".log")
		if err != nil {
			return abort(err)
		}
		logs = append(logs, logf)
		c := exec.Command(exe, args...)
		c.Stdout, c.Stderr = logf, logf
		c.Env = append(os.Environ(), coordinate.TokenEnv+"="+token)
		if err := c.Start(); err != nil {
			return abort(fmt.Errorf("worker %d did not start: %w", i, err))
		}
		procs = append(procs, c)
	}
	return procs, closeLogs, nil
}

// wait waits for every worker; Ctrl-C (ctx) is passed on to each as
// SIGINT, and a worker that fails is reported gone to the coordinator so
// the others' barriers fail at once. It returns a line per failed worker.
func wait(ctx context.Context, coord *coordinate.Server, procs []*exec.Cmd, parts []string) []string {
	stopWatch := make(chan struct{})
	defer close(stopWatch)
	go func() {
		select {
		case <-ctx.Done():
			for _, p := range procs {
				_ = p.Process.Signal(os.Interrupt)
			}
		case <-stopWatch:
		}
	}()
	var wg sync.WaitGroup
	errs := make([]error, len(procs))
	for i, p := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = p.Wait()
			if errs[i] != nil {
				coord.Gone(i, errs[i].Error())
			}
		}()
	}
	wg.Wait()
	var failed []string
	for i, err := range errs {
		if err != nil {
			failed = append(failed, fmt.Sprintf("worker %d: %v (its output: %s.log)", i, err, parts[i]))
		}
	}
	return failed
}

// merge merges the segments the workers wrote into dir (to its end even
// after Ctrl-C: the segments are on disk), writes its report and
// verifies it. A segment that does not verify has its problems printed
// on stderr, each line naming it.
func merge(ctx context.Context, stderr io.Writer, dir string, parts, failed []string) (*bundle.Results, []bundle.Problem, error) {
	mctx := context.WithoutCancel(ctx)
	var have []string
	for _, p := range parts {
		if _, err := os.Stat(filepath.Join(p, bundle.JournalFile)); err == nil {
			have = append(have, p)
		}
	}
	if len(have) == 0 {
		return nil, nil, &exitcode.Error{Code: 1, Err: fmt.Errorf("no worker wrote a segment (%s)", strings.Join(failed, "; "))}
	}
	// As rehearse merge merges: the segments' records are streamed, one
	// merged wave's held at a time (bundle.PartSet.Merge).
	set, err := bundle.ReadPartSet(mctx, have)
	if err != nil {
		if ue := (*bundle.UnverifiedError)(nil); errors.As(err, &ue) {
			for _, p := range ue.Problems {
				fmt.Fprintf(stderr, "%s: %s\n", ue.Dir, p)
			}
		}
		return nil, nil, &exitcode.Error{Code: 1, Err: err}
	}
	m, err := set.Merge(mctx, have, bundle.MergeOptions{MaxOffsetUncertaintyS: config.DefaultMaxOffsetUncertainty})
	if err != nil {
		return nil, nil, &exitcode.Error{Code: 1, Err: fmt.Errorf("merging the workers' segments: %w", err)}
	}
	if err := bundle.MakeEmptyDir(dir); err != nil {
		return nil, nil, &exitcode.Error{Code: exitcode.Usage, Err: err}
	}
	if err := m.Write(mctx, dir); err != nil {
		return nil, nil, err
	}
	merged := m.Results
	if !m.Held {
		if merged, err = bundle.ReadResultsContext(mctx, dir); err != nil {
			return nil, nil, err
		}
	}
	if err := report.Write(dir, merged); err != nil {
		return nil, nil, err
	}
	probs, err := bundle.VerifyContext(mctx, dir)
	return merged, probs, err
}

// printWorkers prints the workers' clock offsets and the largest
// cross-worker release spread of a merged bundle's waves (nothing for a
// bundle that is not merged from segments).
func printWorkers(w io.Writer, res *bundle.Results) {
	ws := res.Provenance.Workers
	if len(ws) == 0 {
		return
	}
	fmt.Fprintf(w, "\nWorkers: %d", len(ws))
	worstUnc := 0.0
	for _, x := range ws {
		worstUnc = max(worstUnc, x.OffsetUncertaintyS)
	}
	spread := 0.0
	for _, wv := range res.Waves {
		if s := wv.WorkerReleaseSpreadS; s != nil {
			spread = max(spread, *s)
		}
		// A merged wave's uncertainty is its workers' largest, measured at
		// its barrier.
		if u := wv.OffsetUncertaintyS; u != nil {
			worstUnc = max(worstUnc, *u)
		}
	}
	fmt.Fprintf(w, "; largest cross-worker release spread %.3f ms (clock offset uncertainty up to %.3f ms)\n", spread*1000, worstUnc*1000)
}
