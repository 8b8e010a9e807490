package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/coordinate"
	"github.com/rehearse/rehearse/internal/report"
)

// workerFlags are the flags a worker process is not handed as given:
// --workers itself, and those runWorkers sets per worker.
var workerFlags = map[string]bool{
	"workers": true, "segment": true, "coordinator": true, "output": true, "progress": true, "quiet": true,
	"start-at": true, "barrier-timeout": true, "release-margin": true,
	// bench's vLLM result files are written once, of the merged bundle.
	"save-result": true, "result-dir": true, "result-filename": true, "save-detailed": true,
}

// workerArgs is the command line of one worker of cmd's invocation: the
// subcommand and every flag that was set (values as given, never
// redacted: the worker needs them), less workerFlags.
func workerArgs(cmd *cobra.Command) []string {
	out := strings.Fields(cmd.CommandPath())[1:] // bench, or bench serve
	cmd.Flags().Visit(func(f *pflag.Flag) {
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

// workersJob is rehearse bench (or run) --workers N: the N segments of the
// plan as worker processes of this binary on this machine.
type workersJob struct {
	seg  *segmentOptions
	args []string // a worker's command line, less its own flags
	dir  string   // the merged bundle
	// quietFlag is how the subcommand is told to print no progress.
	quietFlag string
	// summary prints the merged bundle's table.
	summary func(res *bundle.Results)
	// after, when set, runs once the merged bundle verified (bench's
	// --save-result files).
	after func(res *bundle.Results) error
}

// runWorkers starts an in-process coordinator, runs the N workers as
// child processes (os.Executable) with --segment i/N --coordinator URL,
// each writing its segment bundle to DIR.workers/worker-i (its output in
// worker-i.log beside it), then merges the segments into DIR and verifies
// it. Ctrl-C interrupts every worker (each writes the bundle of what it
// recorded) and merges what they wrote.
func runWorkers(ctx context.Context, st *State, job workersJob) error {
	n := job.seg.workers
	if ne := (*bundle.NotEmptyError)(nil); errors.As(bundle.CheckEmptyDir(job.dir), &ne) {
		return usageError("%v", ne)
	}
	segDir := strings.TrimRight(job.dir, string(filepath.Separator)) + ".workers"
	if err := bundle.MakeEmptyDir(segDir); err != nil {
		return usageError("--workers: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("--workers: the coordinator cannot listen: %w", err)
	}
	// A token of its own: another local user cannot reach these workers'
	// coordinator either.
	token := coordinate.NewToken()
	coord := &coordinate.Server{Workers: n, StartAt: job.seg.start, Margin: job.seg.releaseMargin, Timeout: job.seg.barrierTimeout, Token: token}
	go func() { _ = coord.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = coord.Shutdown(sctx)
	}()
	url := "http://" + ln.Addr().String()
	fmt.Fprintf(st.Stderr, "rehearse: %d workers, coordinator at %s, segments in %s\n", n, url, segDir)

	parts := make([]string, n)
	for i := range n {
		parts[i] = filepath.Join(segDir, "worker-"+strconv.Itoa(i))
	}
	procs, closeLogs, err := startWorkers(job, url, token, parts)
	if err != nil {
		return err
	}
	defer closeLogs()
	failed := waitWorkers(ctx, coord, procs, parts)
	for _, f := range failed {
		fmt.Fprintf(st.Stderr, "rehearse: %s\n", f)
	}
	merged, probs, err := mergeWorkers(ctx, st, job.dir, parts, failed)
	if err != nil {
		return err
	}
	if job.summary != nil {
		job.summary(merged)
	}
	printWorkers(st.Stdout, merged)
	printWarnings(st.Stderr, merged, probs)
	fmt.Fprintf(st.Stdout, "\nbundle: %s, merged from %d worker segments in %s (check it with: rehearse verify %s)\n", job.dir, len(merged.Provenance.Workers), segDir, job.dir)
	switch {
	case ctx.Err() != nil:
		return &ExitError{Code: exitInterrupted, Err: fmt.Errorf("interrupted; the bundle in %s holds what the workers recorded", job.dir)}
	case len(probs) > 0:
		return &ExitError{Code: 1, Err: fmt.Errorf("%s: the merged bundle does not verify (%d problems)", job.dir, len(probs))}
	case len(failed) > 0:
		return &ExitError{Code: 1, Err: fmt.Errorf("%d of %d workers failed: %s", len(failed), n, strings.Join(failed, "; "))}
	}
	if job.after != nil {
		return job.after(merged)
	}
	return nil
}

// startWorkers starts worker i writing its segment to parts[i], its output
// to parts[i].log; on an error none is left running.
func startWorkers(job workersJob, url, token string, parts []string) ([]*exec.Cmd, func(), error) {
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
		args := append([]string(nil), job.args...)
		args = append(args, "--segment="+strconv.Itoa(i)+"/"+strconv.Itoa(n), "--coordinator="+url, "--output="+part,
			"--barrier-timeout="+job.seg.barrierTimeout.String(), job.quietFlag)
		if job.seg.startAt != "" {
			args = append(args, "--start-at="+job.seg.startAt)
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

// waitWorkers waits for every worker; Ctrl-C (ctx) is passed on to each as
// SIGINT, and a worker that fails is reported gone to the coordinator so
// the others' barriers fail at once. It returns a line per failed worker.
func waitWorkers(ctx context.Context, coord *coordinate.Server, procs []*exec.Cmd, parts []string) []string {
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

// mergeWorkers merges the segments the workers wrote into dir (to its end
// even after Ctrl-C: the segments are on disk), writes its report and
// verifies it.
func mergeWorkers(ctx context.Context, st *State, dir string, parts, failed []string) (*bundle.Results, []bundle.Problem, error) {
	mctx := context.WithoutCancel(ctx)
	var have []string
	for _, p := range parts {
		if _, err := os.Stat(filepath.Join(p, bundle.JournalFile)); err == nil {
			have = append(have, p)
		}
	}
	if len(have) == 0 {
		return nil, nil, &ExitError{Code: 1, Err: fmt.Errorf("no worker wrote a segment (%s)", strings.Join(failed, "; "))}
	}
	// As rehearse merge merges (runMerge): the segments' records are
	// streamed, one merged wave's held at a time (bundle.PartSet.Merge).
	set, err := bundle.ReadPartSet(mctx, have)
	if err != nil {
		if uerr := unverifiedInput(st, err); uerr != nil {
			return nil, nil, uerr
		}
		return nil, nil, &ExitError{Code: 1, Err: err}
	}
	m, err := set.Merge(mctx, have, bundle.MergeOptions{MaxOffsetUncertaintyS: config.DefaultMaxOffsetUncertainty})
	if err != nil {
		return nil, nil, &ExitError{Code: 1, Err: fmt.Errorf("merging the workers' segments: %w", err)}
	}
	if err := bundle.MakeEmptyDir(dir); err != nil {
		return nil, nil, &ExitError{Code: 2, Err: err}
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
// cross-worker release spread of the merged bundle's waves.
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

// serveCoordinator serves s on listen until every worker is done or ctx
// ends (exit 130).
func serveCoordinator(ctx context.Context, st *State, s *coordinate.Server, listen string) error {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return usageError("--listen %s: %v", listen, err)
	}
	go func() { _ = s.Serve(ln) }()
	fmt.Fprintf(st.Stderr, "rehearse coordinate: %d workers, listening on http://%s\n", s.Workers, ln.Addr())
	var err2 error
	select {
	case <-s.Done():
		fmt.Fprintf(st.Stderr, "rehearse coordinate: all %d workers are done\n", s.Workers)
	case <-ctx.Done():
		err2 = &ExitError{Code: exitInterrupted, Err: fmt.Errorf("coordinate: interrupted (%v)", context.Cause(ctx))}
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return err2
}

func newCoordinateCmd(st *State) *cobra.Command {
	var (
		workers        int
		listen         string
		startAt        string
		margin         time.Duration
		barrierTimeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "coordinate --workers N --listen HOST:PORT",
		Short: "Serve the coordinator of a split plan's workers: clock offsets and one release per wave",
		Long: `Serve the coordinator of the N workers of a split plan (rehearse run or bench
with --segment i/N --coordinator URL, SPEC §10). Each worker measures its clock
offset against GET /v1/time (the sample of least round trip, NTP-style, with
half that round trip as its uncertainty), then, before each wave, posts that it
is ready and waits at the wave's barrier; once all N are there the coordinator
answers every worker with one release instant (the last arrival plus
--margin; the first wave not before --start-at, or a worker's own --start-at),
which each worker turns into its own clock with its offset. A worker that does
not come within --barrier-timeout makes the others stop with an error naming
it; what they recorded stays in their bundles. The workers must run the same
plan: one with another plan digest, another count, or a segment another
worker already runs is refused; a worker whose wait at a barrier ends (it
died, its connection closed) no longer counts there, and its restart is
accepted. Every request must carry the shared token in $REHEARSE_COORDINATOR_TOKEN
(the coordinator's and each worker's environment); without one the
coordinator listens on loopback only. Connections are bounded (64 plus two
per worker at once; 10 s for a header or a body, 60 s idle). The coordinator
exits once all N workers reported done, or on Ctrl-C.`,
		Example: `  export REHEARSE_COORDINATOR_TOKEN=$(openssl rand -hex 32)   # the same for every worker
  rehearse coordinate --workers 4 --listen 0.0.0.0:7070
  rehearse bench --base-url http://10.0.0.5:8000 --concurrency 64 --segment 0/4 --coordinator http://10.0.0.2:7070`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if workers < 1 {
				return usageError("--workers %d: want the number of workers, at least 1", workers)
			}
			if listen == "" {
				return usageError("--listen HOST:PORT is required")
			}
			token := os.Getenv(coordinate.TokenEnv)
			if token == "" && coordinate.NeedsToken(listen) {
				return usageError("--listen %s can be reached from other machines: set %s to a shared secret (the workers need the same), or listen on 127.0.0.1", listen, coordinate.TokenEnv)
			}
			s := &coordinate.Server{Workers: workers, Margin: margin, Timeout: barrierTimeout, Token: token}
			if startAt != "" {
				t, err := time.Parse(time.RFC3339Nano, startAt)
				if err != nil {
					return usageError("--start-at %q: want an RFC 3339 instant", startAt)
				}
				s.StartAt = t
			}
			return serveCoordinator(cmd.Context(), st, s, listen)
		},
	}
	f := cmd.Flags()
	f.IntVar(&workers, "workers", 0, "how many workers take part (the N of their --segment i/N)")
	f.StringVar(&listen, "listen", "", "address to serve on, HOST:PORT (e.g. 0.0.0.0:7070; port 0 picks a free one)")
	f.StringVar(&startAt, "start-at", "", "RFC 3339 instant before which the first wave is not released")
	f.DurationVar(&margin, "margin", time.Duration(config.DefaultReleaseMargin*float64(time.Second)), "how long after the last worker reached a barrier its wave is released")
	f.DurationVar(&barrierTimeout, "barrier-timeout", time.Duration(config.DefaultBarrierTimeout)*time.Second, "how long a worker waits at a barrier for the others")
	return cmd
}
