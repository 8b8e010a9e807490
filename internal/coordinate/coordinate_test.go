package coordinate

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/exitcode"
	"github.com/rehearse/rehearse/internal/plan"
)

func start(t *testing.T, s *Server) string {
	t.Helper()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestBarrierReleasesEveryWorkerAtOneInstant: every worker of a wave gets
// the same release, after the last arrival, and the first wave is not
// released before StartAt.
func TestBarrierReleasesEveryWorkerAtOneInstant(t *testing.T) {
	startAt := time.Now().Add(300 * time.Millisecond)
	s := &Server{Workers: 3, Margin: 20 * time.Millisecond, Timeout: 10 * time.Second, StartAt: startAt}
	url := start(t, s)
	for wave := range 2 {
		stamps := make([]string, 3)
		errs := make([]error, 3)
		var wg sync.WaitGroup
		for i := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := &Client{URL: url, Worker: i, Count: 3, Digest: "d"}
				if err := c.Measure(context.Background(), 4); err != nil {
					errs[i] = err
					return
				}
				if c.Uncertainty < 0 {
					t.Errorf("worker %d: uncertainty %v", i, c.Uncertainty)
				}
				var rel plan.Release
				rel, errs[i] = c.Release(context.Background(), wave)
				stamps[i] = rel.Stamp
			}()
		}
		wg.Wait()
		for i := range 3 {
			if errs[i] != nil {
				t.Fatalf("wave %d, worker %d: %v", wave, i, errs[i])
			}
			if stamps[i] != stamps[0] {
				t.Errorf("wave %d: worker %d released at %s, worker 0 at %s", wave, i, stamps[i], stamps[0])
			}
		}
		at, err := time.Parse(time.RFC3339Nano, stamps[0])
		if err != nil {
			t.Fatal(err)
		}
		if wave == 0 && at.Before(startAt.Truncate(time.Nanosecond)) {
			t.Errorf("wave 0 released at %v, before StartAt %v", at, startAt)
		}
	}
	for i := range 3 {
		if err := (&Client{URL: url, Worker: i, Count: 3, Digest: "d"}).Done(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-s.Done():
	default:
		t.Error("every worker reported done, but the coordinator is not done")
	}
}

// TestBarrierRefusals: a worker of another plan, another count, or a
// segment another worker already runs is refused with a line naming why.
func TestBarrierRefusals(t *testing.T) {
	s := &Server{Workers: 2, Margin: time.Millisecond, Timeout: 5 * time.Second}
	url := start(t, s)
	first := make(chan error, 1)
	go func() {
		_, err := (&Client{URL: url, Worker: 0, Count: 2, Digest: "aaa"}).Release(context.Background(), 0)
		first <- err
	}()
	for deadline := time.Now().Add(5 * time.Second); len(s.Arrived(0)) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("worker 0 never reached the barrier")
		}
	}
	for _, tc := range []struct {
		c    Client
		want string
	}{
		{Client{Worker: 1, Count: 2, Digest: "bbb"}, "different plans"},
		{Client{Worker: 1, Count: 3, Digest: "aaa"}, "counts 3 workers"},
		{Client{Worker: 0, Count: 2, Digest: "aaa"}, "twice"},
		{Client{Worker: 5, Count: 2, Digest: "aaa"}, "workers 0 to 1"},
	} {
		c := tc.c
		c.URL = url
		_, err := c.Release(context.Background(), 0)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error saying %q", tc.c, err, tc.want)
		}
	}
	if _, err := (&Client{URL: url, Worker: 1, Count: 2, Digest: "aaa"}).Release(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
}

// TestBarrierTimesOutNamingTheMissingWorker: a worker that never comes
// (it died) makes the others' wait end, bounded, with who is missing.
func TestBarrierTimesOutNamingTheMissingWorker(t *testing.T) {
	url := start(t, &Server{Workers: 3, Timeout: 200 * time.Millisecond})
	errs := make(chan error, 2)
	for i := range 2 {
		go func() {
			_, err := (&Client{URL: url, Worker: i, Count: 3, Digest: "d"}).Release(context.Background(), 4)
			errs <- err
		}()
	}
	for range 2 {
		err := <-errs
		if err == nil || !strings.Contains(err.Error(), "missing: 2") || !strings.Contains(err.Error(), "wave 4") {
			t.Errorf("%v: want the barrier of wave 4 to time out naming worker 2", err)
		}
	}
	// The worker's own bound ends the wait too.
	_, err := (&Client{URL: url, Worker: 0, Count: 3, BarrierTimeout: 50 * time.Millisecond, Digest: "d"}).Release(context.Background(), 5)
	if err == nil || !strings.Contains(err.Error(), "did not reach it within") {
		t.Errorf("client-side bound: %v", err)
	}
}

// TestFixed: without a coordinator only the first wave has an instant.
func TestFixed(t *testing.T) {
	at := time.Now().Add(time.Hour)
	f := Fixed{At: at}
	rel, err := f.Release(context.Background(), 0)
	local, stamp := rel.At, rel.Stamp
	if err != nil || stamp != at.UTC().Format(time.RFC3339Nano) || local.Sub(at).Abs() > time.Second {
		t.Errorf("wave 0: %v %q %v", local, stamp, err)
	}
	if _, err := f.Release(context.Background(), 1); err == nil {
		t.Error("wave 1 released without a coordinator")
	}
}

// TestBarrierFailsAtOnceForAWorkerThatWillNotCome: a worker that exited
// (Gone) or reported done without reaching a barrier makes the others'
// wait end at once, naming it, long before the timeout.
func TestBarrierFailsAtOnceForAWorkerThatWillNotCome(t *testing.T) {
	for _, tc := range []struct {
		name  string
		leave func(s *Server, url string)
		want  string
	}{
		{"gone", func(s *Server, _ string) { s.Gone(1, "exit status 1") }, "worker 1 is gone (exit status 1)"},
		{"done", func(_ *Server, url string) {
			_ = (&Client{URL: url, Worker: 1, Count: 2, Digest: "d"}).Done(context.Background())
		}, "worker 1 reported done"},
		{"skipped", func(_ *Server, url string) {
			go func() {
				_, _ = (&Client{URL: url, Worker: 1, Count: 2, BarrierTimeout: 2 * time.Second, Digest: "d"}).Release(context.Background(), 3)
			}()
		}, "worker 1 skipped it (it waits at wave 3)"},
	} {
		s := &Server{Workers: 2, Timeout: time.Hour}
		url := start(t, s)
		errc := make(chan error, 1)
		go func() {
			_, err := (&Client{URL: url, Worker: 0, Count: 2, Digest: "d"}).Release(context.Background(), 0)
			errc <- err
		}()
		for deadline := time.Now().Add(5 * time.Second); len(s.Arrived(0)) == 0; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("worker 0 never reached the barrier")
			}
		}
		tc.leave(s, url)
		select {
		case err := <-errc:
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the barrier still waits", tc.name)
		}
	}
}

// TestReleaseMeasuresTheOffsetAgain: each barrier re-measures the clock
// offset, so a coordinator clock that moved between waves (here by 40 s,
// far beyond any round trip) is followed: the wave's release carries the
// new offset, and its instant on this clock is the coordinator's instant
// less it.
func TestReleaseMeasuresTheOffsetAgain(t *testing.T) {
	var shift atomic.Int64
	s := &Server{Workers: 1, Timeout: 10 * time.Second}
	s.now = func() time.Time { return time.Now().Add(time.Duration(shift.Load())) }
	c := &Client{URL: start(t, s), Worker: 0, Count: 1, Digest: "d"}
	if err := c.Measure(context.Background(), 4); err != nil {
		t.Fatal(err)
	}
	first, err := c.Release(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	shift.Store(int64(40 * time.Second))
	second, err := c.Release(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	near := func(d, want time.Duration) bool { return (d - want).Abs() < 5*time.Second }
	if !first.Measured || !second.Measured || !near(first.Offset, 0) || !near(second.Offset, 40*time.Second) {
		t.Fatalf("offsets %v then %v (measured %v, %v): want about 0 then 40 s", first.Offset, second.Offset, first.Measured, second.Measured)
	}
	if second.Uncertainty <= 0 || second.Uncertainty > 5*time.Second {
		t.Errorf("uncertainty %v", second.Uncertainty)
	}
	stamp, err := time.Parse(time.RFC3339Nano, second.Stamp)
	if err != nil {
		t.Fatal(err)
	}
	if d := stamp.Sub(second.At.Round(0)); !near(d, 40*time.Second) {
		t.Errorf("the release on this clock is %v before the coordinator's instant, want about 40 s", d)
	}
	// WaveSamples < 0 keeps the offset of the last measurement.
	c.WaveSamples = -1
	shift.Store(0)
	third, err := c.Release(context.Background(), 2)
	if err != nil {
		t.Fatal(err)
	}
	if !near(third.Offset, 40*time.Second) {
		t.Errorf("offset %v without re-measuring: want the last one, about 40 s", third.Offset)
	}
}

// TestMeasureWaiting: a worker that starts before its coordinator serves
// keeps trying until it does; a refused token ends the wait at once.
func TestMeasureWaiting(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing serves there yet
	s := &Server{Workers: 1, Token: "tok"}
	go func() {
		time.Sleep(700 * time.Millisecond)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return
		}
		_ = s.Serve(ln)
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	c := &Client{URL: "http://" + addr, Count: 1, Token: "tok"}
	if err := c.MeasureWaiting(context.Background(), 2, 20*time.Second); err != nil {
		t.Fatalf("a coordinator that serves late: %v", err)
	}
	bad := &Client{URL: "http://" + addr, Count: 1, Token: "other"}
	began := time.Now()
	if err := bad.MeasureWaiting(context.Background(), 2, 20*time.Second); !errors.Is(err, ErrUnauthorized) || time.Since(began) > 5*time.Second {
		t.Errorf("a refused token: %v after %v", err, time.Since(began))
	}
}

// lockedBuffer is a log written by Run and read by the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestRun: rehearse coordinate serves until every worker reported done,
// says so, and ends; Ctrl-C ends it with exit 130; an address it cannot
// listen on is bad usage.
func TestRun(t *testing.T) {
	var log lockedBuffer
	s := &Server{Workers: 1}
	ran := make(chan error, 1)
	go func() { ran <- s.Run(context.Background(), "127.0.0.1:0", &log) }()
	var url string
	for deadline := time.Now().Add(10 * time.Second); url == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, after, ok := strings.Cut(log.String(), "listening on "); ok {
			url = strings.TrimSpace(after)
		}
	}
	if err := (&Client{URL: url, Count: 1}).Done(context.Background()); err != nil {
		t.Fatalf("done at %q: %v", url, err)
	}
	if err := <-ran; err != nil || !strings.Contains(log.String(), "rehearse coordinate: all 1 workers are done") {
		t.Errorf("got %v, log %q", err, log.String())
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var ee *exitcode.Error
	if err := (&Server{Workers: 2}).Run(ctx, "127.0.0.1:0", io.Discard); !errors.As(err, &ee) || ee.Code != exitcode.Interrupted {
		t.Errorf("interrupted: %v", err)
	}
	if err := (&Server{Workers: 2}).Run(context.Background(), "no-such-host.invalid:x", io.Discard); !errors.As(err, &ee) || ee.Code != exitcode.Usage || !strings.HasPrefix(err.Error(), "--listen no-such-host.invalid:x: ") {
		t.Errorf("bad address: %v", err)
	}
}
