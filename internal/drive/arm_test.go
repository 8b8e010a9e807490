package drive

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/plan"
	"github.com/rehearse/rehearse/internal/stream"
)

// orderSender wraps a sender and logs, in order, the connections warmed,
// the requests armed (buffered on their connection) and sent; Agree logs
// itself in the same log.
type orderSender struct {
	inner sender
	mu    sync.Mutex
	log   []string
}

func (o *orderSender) add(s string) {
	o.mu.Lock()
	o.log = append(o.log, s)
	o.mu.Unlock()
}

func (o *orderSender) Warm(ctx context.Context, u string, n int) error {
	o.add("warm")
	return o.inner.Warm(ctx, u, n)
}
func (o *orderSender) Drop() { o.inner.Drop() }
func (o *orderSender) Send(ctx context.Context, p *stream.Prepared) stream.Result {
	o.add("send")
	return o.inner.Send(ctx, p)
}
func (o *orderSender) SendAt(ctx context.Context, p *stream.Prepared, gate <-chan struct{}, armed func()) stream.Result {
	return o.inner.SendAt(ctx, p, gate, func() {
		o.add("armed")
		if armed != nil {
			armed()
		}
	})
}

func (o *orderSender) agree(at time.Duration, err error) func(context.Context) (plan.Release, error) {
	return func(context.Context) (plan.Release, error) {
		o.add("agree")
		if err != nil {
			return plan.Release{}, err
		}
		t := time.Now().Add(at)
		return plan.Release{At: t, Stamp: t.UTC().Format(time.RFC3339Nano), Measured: true, Offset: 3 * time.Millisecond, Uncertainty: time.Millisecond}, nil
	}
}

// TestWavesAgreeOnTheReleaseOnceArmed: a split plan's wave asks for its
// release instant only after it dialed its connections and, closed, after
// every client's first request is buffered on its connection, so the
// coordinator's barrier is taken when the worker is ready to fire.
func TestWavesAgreeOnTheReleaseOnceArmed(t *testing.T) {
	srv, _ := fakeServer(t, 2, 0)
	tg := Target{Name: "s", BaseURL: srv.URL, Model: "m"}
	seg := plan.Segment{Index: 1, Count: 2}
	for _, mode := range []string{contract.ModeClosed, contract.ModeOpen, contract.ModeSustained} {
		t.Run(mode, func(t *testing.T) {
			d := New(Options{})
			o := &orderSender{inner: d.client}
			d.client = o
			w := plan.Wave{Kind: contract.KindRecorded, Mode: mode, Concurrency: 6, Repeat: 1, Segment: seg, Agree: o.agree(5*time.Millisecond, nil)}
			switch mode {
			case contract.ModeOpen:
				w.Open = &plan.Schedule{RequestRateRPS: 200, Arrival: "fixed", NumRequests: 6}
			case contract.ModeSustained:
				w.Sustained = &plan.Bounds{NumRequests: 6}
			}
			res, err := d.Wave(context.Background(), tg, testLoad(), w)
			if err != nil {
				t.Fatal(err)
			}
			if res.Wave.ReleaseAt == "" || res.Wave.ReleaseLateS == nil {
				t.Errorf("release_at %q, release_late_s %v: want the agreed release recorded", res.Wave.ReleaseAt, res.Wave.ReleaseLateS)
			}
			if o, u := res.Wave.ClockOffsetS, res.Wave.OffsetUncertaintyS; o == nil || u == nil || *o != 0.003 || *u != 0.001 {
				t.Errorf("clock_offset_s %v, offset_uncertainty_s %v: want the offset measured at the barrier, 0.003 and 0.001", o, u)
			}
			k := slices.Index(o.log, "agree")
			before, after := o.log[:max(k, 0)], o.log[k+1:]
			if k < 0 || !slices.Contains(before, "warm") || slices.Contains(after, "warm") {
				t.Fatalf("log %v: want the connections warmed before the release is agreed", o.log)
			}
			if mode == contract.ModeClosed {
				// Clients 1, 3, 5 of 6: each armed before the agreement.
				if n := strings.Count(strings.Join(before, " "), "armed"); n != 3 || slices.Contains(after, "armed") {
					t.Errorf("log %v: want this worker's 3 clients armed before the release is agreed", o.log)
				}
			}
			if len(res.Records) != 3 {
				t.Errorf("%d records, want this worker's 3", len(res.Records))
			}
		})
	}
}

// TestWaveNotAgreedSendsNothing: a wave whose workers do not agree on a
// release (the barrier failed) ends with a NotReleasedError, sends no
// request (the buffered ones are dropped unsent) and records nothing.
func TestWaveNotAgreedSendsNothing(t *testing.T) {
	srv, hits := fakeServer(t, 2, 0)
	tg := Target{Name: "s", BaseURL: srv.URL, Model: "m"}
	jr, path := journal(t)
	for _, mode := range []string{contract.ModeClosed, contract.ModeOpen, contract.ModeSustained} {
		d := New(Options{Sink: jr})
		o := &orderSender{inner: d.client}
		d.client = o
		w := plan.Wave{Kind: contract.KindRecorded, Mode: mode, Concurrency: 4, Repeat: 1, Segment: plan.Segment{Index: 0, Count: 2},
			Agree: o.agree(0, errors.New("worker 1 is gone"))}
		switch mode {
		case contract.ModeOpen:
			w.Open = &plan.Schedule{RequestRateRPS: 100, Arrival: "fixed", NumRequests: 4}
		case contract.ModeSustained:
			w.Sustained = &plan.Bounds{NumRequests: 4}
		}
		res, err := d.Wave(context.Background(), tg, testLoad(), w)
		var nr *NotReleasedError
		if !errors.As(err, &nr) || !strings.Contains(err.Error(), "worker 1 is gone") {
			t.Errorf("%s: error %v, want a NotReleasedError naming why", mode, err)
		}
		if len(res.Records) != 0 || res.Wave.ID != 0 {
			t.Errorf("%s: %d records, wave %d: want nothing of an unreleased wave", mode, len(res.Records), res.Wave.ID)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the server got %d requests of waves never released", n)
	}
	if err := jr.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(string(data)), "\n"); len(lines) != 1 {
		t.Errorf("journal has %d lines after its header: want no wave or record of waves never released", len(lines)-1)
	}
}
