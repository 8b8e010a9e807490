package drive

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/plan"
	"github.com/rehearse/rehearse/internal/workload"
)

// inFlightServer counts its concurrent handlers (a request is in flight
// from its arrival until its answer starts). A handler answers only once c
// requests have been in flight together since it arrived, or the last of
// the total requests has arrived (the drain: clients with nothing left to
// send are idle), so a client that kept fewer than c in flight while
// requests remained would leave it waiting (it answers 500 after a long
// wait).
type inFlightServer struct {
	c, total int

	mu       sync.Mutex
	cond     *sync.Cond
	inFlight int
	max      int
	gen      int // how many times inFlight has reached c
	arrivals int
}

func newInFlightServer(t *testing.T, c, total int) (*httptest.Server, *inFlightServer) {
	s := &inFlightServer{c: c, total: total}
	s.cond = sync.NewCond(&s.mu)
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		s.mu.Lock()
		s.arrivals++
		s.inFlight++
		s.max = max(s.max, s.inFlight)
		if s.inFlight == s.c || s.arrivals == s.total {
			s.gen++
			s.cond.Broadcast()
		}
		ok := true
		if s.inFlight < s.c && s.arrivals < s.total {
			gen := s.gen
			deadline := time.AfterFunc(20*time.Second, func() { s.mu.Lock(); s.gen = -1 << 30; s.cond.Broadcast(); s.mu.Unlock() })
			for s.gen == gen {
				s.cond.Wait()
			}
			deadline.Stop()
			ok = s.gen >= 0
		}
		// Out of flight before the answer leaves: the client sends its next
		// request only once it has read this one's end.
		s.inFlight--
		s.mu.Unlock()
		if !ok {
			http.Error(rw, "fewer than c in flight", http.StatusInternalServerError)
			return
		}
		rw.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(rw, `data: {"choices":[{"delta":{"content":"w w "},"finish_reason":"length"}]}`+"\n\n")
		io.WriteString(rw, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv, s
}

func TestSustainedWaveKeepsCInFlight(t *testing.T) {
	const c, warmN, n = 4, 3, 21
	srv, s := newInFlightServer(t, c, warmN+n)
	j, path := journal(t)
	var released []int
	d := New(Options{Sink: j, Counter: words{}, Progress: func(e Event) {
		if e.Kind == WaveReleased {
			released = append(released, e.Wave.ID)
		}
	}})
	res, err := d.Wave(context.Background(), Target{Name: "s", BaseURL: srv.URL, Model: "m"}, testLoad(),
		plan.Wave{Kind: contract.KindRecorded, Mode: contract.ModeSustained, Concurrency: c, Repeat: 1,
			Sustained: &plan.Bounds{NumRequests: n, WarmupRequests: warmN}})
	if err != nil {
		t.Fatal(err)
	}
	if s.max != c || s.arrivals != warmN+n {
		t.Errorf("server saw at most %d in flight over %d requests, want %d over %d", s.max, s.arrivals, c, warmN+n)
	}
	if res.Warmup == nil || len(res.Warmup.Records) != warmN || len(res.Records) != n {
		t.Fatalf("warm-up %v, %d measured records: want %d and %d", res.Warmup, len(res.Records), warmN, n)
	}
	if w := res.Warmup.Wave; w.Kind != contract.KindWarmup || w.Mode != contract.ModeSustained || w.Concurrency != c {
		t.Errorf("warm-up wave %+v", w)
	}
	if w := res.Wave; w.Kind != contract.KindRecorded || w.Mode != contract.ModeSustained || w.Stopped != "" || w.ReleaseSpreadS != 0 {
		t.Errorf("measured wave %+v", w)
	}
	if len(released) != 1 || released[0] != res.Wave.ID {
		t.Errorf("progress released waves %v: want only the measured one, %d", released, res.Wave.ID)
	}
	for k, r := range res.Records {
		if !r.OK || r.Client < 0 || r.Client >= c || r.Wave != res.Wave.ID || r.StartS < 0 {
			t.Errorf("record %d: %+v", k, r)
		}
		if want := workload.PromptIndex(warmN+k, 3); r.Prompt != want {
			t.Errorf("record %d sent prompt %d, want %d (round-robin over the run)", k, r.Prompt, want)
		}
	}
	j.Close()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	back, err := bundle.DecodeJournal(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Waves) != 2 || len(back.Records) != warmN+n || back.Waves[0].Stopped != "" || back.Waves[1].Stopped != "" {
		t.Fatalf("journal: %d waves %+v, %d records", len(back.Waves), back.Waves, len(back.Records))
	}
	if probs := bundle.VerifyResults(back); len(probs) != 0 {
		t.Errorf("the journaled sustained wave does not verify: %v", probs)
	}
	if a := back.Aggregates; len(a) != 1 || a[0].Mode != contract.ModeSustained || a[0].Failures.Total != n {
		t.Errorf("aggregates %+v", a)
	}
}

func TestSustainedWaveByDuration(t *testing.T) {
	srv, _ := fakeServer(t, 1, time.Millisecond)
	d := New(Options{Counter: words{}})
	res, err := d.SustainedWave(context.Background(), Target{Name: "s", BaseURL: srv.URL, Model: "m"},
		SustainedSpec{Load: testLoad(), Concurrency: 2, Repeat: 1, Duration: 30 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Records) == 0 || res.Warmup != nil || res.Wave.NotSent != 0 {
		t.Errorf("%d records, warm-up %v, not sent %d", len(res.Records), res.Warmup, res.Wave.NotSent)
	}
	// The records show the bound was reached: one ended past it.
	last := 0.0
	for _, r := range res.Records {
		last = max(last, r.EndS)
	}
	if res.Wave.EndedBy != contract.EndedDuration || last < (30*time.Millisecond).Seconds() {
		t.Errorf("ended by %q, last end at %v s: want the duration, a record ending at or after 0.03 s", res.Wave.EndedBy, last)
	}
	if _, err := d.SustainedWave(context.Background(), Target{Name: "s", BaseURL: srv.URL, Model: "m"},
		SustainedSpec{Load: testLoad(), Concurrency: 2}); err == nil {
		t.Error("an unbounded sustained wave was run")
	}
}

func TestSustainedWaveCanceled(t *testing.T) {
	srv, hits := fakeServer(t, 1000, 5*time.Millisecond)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	go func() {
		for hits.Load() < 3 {
			time.Sleep(time.Millisecond)
		}
		cancel(errors.New("interrupt"))
	}()
	j, path := journal(t)
	d := New(Options{Sink: j, Counter: words{}})
	load := testLoad()
	load.MaxTokens = 1000 // what the server streams: fewer would be an overrun the client cuts
	res, err := d.SustainedWave(ctx, Target{Name: "s", BaseURL: srv.URL, Model: "m"},
		SustainedSpec{Load: load, Concurrency: 3, Repeat: 1, NumRequests: 100, WarmupRequests: 1})
	if err == nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v: want canceled", err)
	}
	if res.Warmup == nil {
		t.Fatal("no warm-up wave")
	}
	all := append(append([]contract.Record(nil), res.Warmup.Records...), res.Records...)
	if len(all) != 3 {
		t.Fatalf("%d records, want the 3 in flight", len(all))
	}
	for _, r := range all {
		if r.OK || r.ErrorKind != contract.ErrCanceled {
			t.Errorf("record %+v: want canceled", r)
		}
	}
	if res.Wave.Stopped != "canceled: interrupt" || res.Warmup.Wave.Stopped == "" || res.Wave.NotSent != 100-len(res.Records) || res.Wave.EndedBy != contract.EndedCanceled {
		t.Errorf("waves %+v / %+v: want both stopped, %d not sent", res.Wave, res.Warmup.Wave, 100-len(res.Records))
	}
	j.Close()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	back, err := bundle.DecodeJournal(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Waves) != 2 || len(back.Records) != 3 {
		t.Fatalf("journal: %d waves, %d records", len(back.Waves), len(back.Records))
	}
	for _, w := range back.Waves {
		if bundle.IsCut(w) {
			t.Errorf("wave %d was never journaled at its end", w.ID)
		}
	}
}

func TestSustainedWaveUntil(t *testing.T) {
	srv, hits := fakeServer(t, 1, time.Millisecond)
	d := New(Options{Counter: words{}})
	const c, warmN, n, every = 3, 2, 1000, 5
	var (
		mu      sync.Mutex
		calls   []int
		overlap bool
		busy    bool
		foreign bool
		order   bool
	)
	res, err := d.SustainedWave(context.Background(), Target{Name: "s", BaseURL: srv.URL, Model: "m"},
		SustainedSpec{Load: testLoad(), Concurrency: c, Repeat: 1, NumRequests: n, WarmupRequests: warmN,
			UntilEvery: every, Until: func(recs []contract.Record) bool {
				mu.Lock()
				overlap = overlap || busy
				busy = true
				calls = append(calls, len(recs))
				mu.Unlock()
				for j, r := range recs {
					if r.Kind != contract.KindRecorded {
						foreign = true
					}
					if r.Request == nil || *r.Request != j {
						order = true
					}
				}
				mu.Lock()
				busy = false
				mu.Unlock()
				return len(recs) >= 10
			}})
	if err != nil {
		t.Fatal(err)
	}
	if overlap || foreign || order {
		t.Errorf("Until was called concurrently (%v), saw warm-up records (%v) or records out of send order (%v)", overlap, foreign, order)
	}
	if len(calls) != 2 || calls[0] != every || calls[1] != 2*every {
		t.Errorf("Until was called with %v records: want %d then %d", calls, every, 2*every)
	}
	if !res.UntilMet || len(res.Records) < 10 || len(res.Records) >= n || res.Wave.NotSent != 0 || res.Wave.Stopped != "" {
		t.Errorf("until met %v, %d records, not sent %d, stopped %q: want the wave ended by Until after 10 records",
			res.UntilMet, len(res.Records), res.Wave.NotSent, res.Wave.Stopped)
	}
	if got := hits.Load(); got != int64(warmN+len(res.Records)) {
		t.Errorf("server saw %d requests, want %d", got, warmN+len(res.Records))
	}
	if w := res.Wave; w.EndedBy != contract.EndedUntil || w.Look == nil || w.Look.Sent != len(res.Records) || w.Look.Prefix != 10 || w.Look.Ended < 10 {
		t.Errorf("ended by %q at look %+v: want until, at the first 10 sent, with every record sent before it", w.EndedBy, w.Look)
	}
	for j, r := range res.Records {
		if r.Request == nil || *r.Request != j {
			t.Fatalf("record %d of the wave has request %v: want the records in send order, each with its place", j, r.Request)
		}
	}

	// Never satisfied, the predicate (here through the plan's bounds)
	// leaves the wave to its bounds: its cap.
	res, err = d.Wave(context.Background(), Target{Name: "s", BaseURL: srv.URL, Model: "m"}, testLoad(),
		plan.Wave{Kind: contract.KindRecorded, Mode: contract.ModeSustained, Concurrency: c, Repeat: 1,
			Sustained: &plan.Bounds{NumRequests: 20, UntilEvery: 4, Until: func([]contract.Record) bool { return false }}})
	if err != nil {
		t.Fatal(err)
	}
	if res.UntilMet || len(res.Records) != 20 || res.Wave.EndedBy != contract.EndedNumRequests || res.Wave.Look != nil {
		t.Errorf("until met %v, %d records, ended by %q, look %v: want the cap of 20", res.UntilMet, len(res.Records), res.Wave.EndedBy, res.Wave.Look)
	}
}

// TestSustainedClientsDoNotWaitForBookkeeping holds the first measured
// request's bookkeeping (its progress event, like a slow journal write)
// until the server has seen every request of the run arrive: a client that
// made its record in its own loop before sending its next request would
// leave its slot empty, and the server, which answers only with c in
// flight, would never see the rest.
func TestSustainedClientsDoNotWaitForBookkeeping(t *testing.T) {
	const c, warmN, n = 4, 2, 16
	srv, s := newInFlightServer(t, c, warmN+n)
	arrived := func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.arrivals == warmN+n
	}
	held := false
	d := New(Options{Counter: words{}, Progress: func(e Event) {
		if e.Kind != RequestEnded || held {
			return
		}
		held = true
		deadline := time.Now().Add(15 * time.Second)
		for !arrived() && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}})
	res, err := d.SustainedWave(context.Background(), Target{Name: "s", BaseURL: srv.URL, Model: "m"},
		SustainedSpec{Load: testLoad(), Concurrency: c, Repeat: 1, NumRequests: n, WarmupRequests: warmN})
	if err != nil {
		t.Fatal(err)
	}
	if !arrived() {
		t.Fatalf("server saw %d of %d requests while one record's bookkeeping was held", s.arrivals, warmN+n)
	}
	for k, r := range res.Records {
		if !r.OK {
			t.Errorf("record %d failed: %s %s", k, r.ErrorKind, r.Error)
		}
	}
}
