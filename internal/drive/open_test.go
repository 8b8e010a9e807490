package drive

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/stream"
	"github.com/rehearse/rehearse/internal/workload"
)

// fakeSender answers every request after latency on the (fake) clock with
// one content chunk per 10 ms of latency.
type fakeSender struct{ latency time.Duration }

func (fakeSender) Warm(context.Context, string, int) error { return nil }
func (fakeSender) Drop()                                   {}
func (f fakeSender) Send(ctx context.Context, p *stream.Prepared) stream.Result {
	res := stream.Result{Start: time.Now()}
	select {
	case <-time.After(f.latency):
	case <-ctx.Done():
		res.End = time.Now()
		res.ErrorKind, res.Error = contract.ErrCanceled, "canceled"
		return res
	}
	res.End = time.Now()
	res.FirstContent = res.Start.Add(f.latency / 2)
	res.ChunkTimes = []time.Time{res.FirstContent, res.End}
	res.Text, res.FinishReason, res.OK = "a b", "stop", true
	return res
}

func (f fakeSender) SendAt(ctx context.Context, p *stream.Prepared, release <-chan struct{}, armed func()) stream.Result {
	if armed != nil {
		armed()
	}
	select {
	case <-release:
	case <-ctx.Done():
	}
	return f.Send(ctx, p)
}

func fakeDriver(latency time.Duration) *Driver {
	d := New(Options{Counter: words{}})
	d.client = fakeSender{latency: latency}
	return d
}

var tgt = Target{Name: "s", BaseURL: "http://fake"}

func TestOpenWaveFollowsScheduleExactly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		spec := OpenSpec{Load: testLoad(), Repeat: 1, RequestRateRPS: 50, Arrival: workload.ArrivalPoisson, Seed: 3, NumRequests: 40}
		sched, _ := workload.NewSchedule(spec.Arrival, spec.RequestRateRPS, 0, spec.Seed)
		res, err := fakeDriver(300*time.Millisecond).OpenWave(context.Background(), tgt, spec)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Records) != 40 || res.Wave.Mode != contract.ModeOpen || res.Wave.Waited != 0 || res.Wave.NotSent != 0 {
			t.Fatalf("%d records, wave %+v", len(res.Records), res.Wave)
		}
		for i, r := range res.Records {
			want := sched.Offset(i).Seconds()
			if r.IntendedStartS != want || r.StartS != want || r.Client != i || r.Prompt != i%3 {
				t.Fatalf("request %d: intended %v start %v, schedule says %v", i, r.IntendedStartS, r.StartS, want)
			}
			if math.Abs(r.EndS-(want+0.3)) > 1e-9 || !r.OK || r.OutputTokens != 2 {
				t.Fatalf("request %d: %+v", i, r)
			}
		}
		if last := res.Records[39]; res.Wave.WallS != last.EndS {
			t.Fatalf("wall %v, last end %v", res.Wave.WallS, last.EndS)
		}
	})
}

func TestOpenWaveDurationBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		spec := OpenSpec{Load: testLoad(), Repeat: 1, RequestRateRPS: 10, Arrival: workload.ArrivalFixed, Duration: 2 * time.Second, NumRequests: 100}
		start := time.Now()
		res, err := fakeDriver(50*time.Millisecond).OpenWave(context.Background(), tgt, spec)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Records) != 20 || res.Records[19].IntendedStartS != 1.9 {
			t.Fatalf("%d records, last intended %v", len(res.Records), res.Records[len(res.Records)-1].IntendedStartS)
		}
		if took := time.Since(start); took != 1950*time.Millisecond {
			t.Fatalf("wave took %v on the fake clock, want 1.95 s", took)
		}
	})
}

func TestOpenWaveConcurrencyCapCountsWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// 10 req/s, each taking 250 ms, at most 2 in flight: every third
		// request finds both slots taken.
		spec := OpenSpec{Load: testLoad(), Repeat: 1, RequestRateRPS: 10, Arrival: workload.ArrivalFixed, NumRequests: 6, MaxConcurrency: 2}
		res, err := fakeDriver(250*time.Millisecond).OpenWave(context.Background(), tgt, spec)
		if err != nil {
			t.Fatal(err)
		}
		var late []float64
		for _, r := range res.Records {
			late = append(late, r.StartS-r.IntendedStartS)
		}
		// Slots free at 0.25, 0.35, 0.50+… : request 2 (due 0.2) starts 0.25.
		if res.Wave.Waited == 0 || res.Wave.MaxConcurrency != 2 || res.Wave.Concurrency != 2 {
			t.Fatalf("wave %+v", res.Wave)
		}
		if late[0] != 0 || late[1] != 0 || late[2] < 0.049 {
			t.Fatalf("lateness %v: the cap's wait must show as lateness", late)
		}
		inFlight := 0
		for _, r := range res.Records {
			n := 0
			for _, o := range res.Records {
				if o.StartS <= r.StartS && o.EndS > r.StartS {
					n++
				}
			}
			inFlight = max(inFlight, n)
		}
		if inFlight > 2 {
			t.Fatalf("%d requests in flight under a cap of 2", inFlight)
		}
	})
}

func TestOpenWaveCanceledCountsNotSent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		spec := OpenSpec{Load: testLoad(), Repeat: 1, RequestRateRPS: 10, Arrival: workload.ArrivalFixed, NumRequests: 50}
		ctx, cancel := context.WithCancelCause(context.Background())
		time.AfterFunc(1050*time.Millisecond, func() { cancel(errors.New("interrupt")) })
		res, err := fakeDriver(500*time.Millisecond).OpenWave(ctx, tgt, spec)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("error %v", err)
		}
		// Sent at 0.0 … 1.0 s: 11; those sent after 0.55 s were in flight.
		if len(res.Records) != 11 || res.Wave.NotSent != 39 || res.Wave.Stopped != "canceled: interrupt" {
			t.Fatalf("%d records, wave %+v", len(res.Records), res.Wave)
		}
		canceled := 0
		for _, r := range res.Records {
			if r.ErrorKind == contract.ErrCanceled {
				canceled++
			}
		}
		if canceled != 5 {
			t.Fatalf("%d canceled in flight, want 5 (sent at 0.6 … 1.0 s)", canceled)
		}
	})
}

func TestOpenSpecErrors(t *testing.T) {
	d := fakeDriver(0)
	cases := []struct {
		spec OpenSpec
		want string
	}{
		{OpenSpec{Load: testLoad(), RequestRateRPS: 1, Arrival: "fixed"}, "unbounded"},
		{OpenSpec{Load: testLoad(), RequestRateRPS: 0, Arrival: "fixed", NumRequests: 1}, "request rate 0"},
		{OpenSpec{Load: testLoad(), RequestRateRPS: 1, Arrival: "burst", NumRequests: 1}, `arrival "burst"`},
		{OpenSpec{Load: testLoad(), RequestRateRPS: 1, Arrival: "fixed", NumRequests: 1, MaxConcurrency: -1}, "max_concurrency -1"},
		{OpenSpec{Load: testLoad(), RequestRateRPS: 1e9, Arrival: "fixed", Duration: time.Hour}, "more than"},
		{OpenSpec{Load: testLoad(), RequestRateRPS: 1e9, Arrival: "fixed", NumRequests: MaxOpenRequests + 1}, "num_requests 10000001: more than 10000000"},
	}
	for _, c := range cases {
		if _, err := d.OpenWave(context.Background(), tgt, c.spec); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.spec, err, c.want)
		}
	}
}
