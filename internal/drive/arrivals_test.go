package drive

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/plan"
	"github.com/rehearse/rehearse/internal/workload"
)

func traceLoad() plan.Load {
	l := plan.Load{Prompts: []string{"p0", "p1", "p2", "p3", "p4"}, MaxTokens: 8, Timeout: 10 * time.Second, PromptMaxTokens: []int{3, 4, 5, 6, 7}}
	l.Arrivals = []time.Duration{0, 250 * time.Millisecond, 250 * time.Millisecond, 1500 * time.Millisecond, 4 * time.Second}
	return l
}

// TestOpenWaveReplaysTrace: request i sends prompt i, once, at release +
// Arrivals[i], through the one open-loop dispatcher.
func TestOpenWaveReplaysTrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		load := traceLoad()
		res, err := fakeDriver(100*time.Millisecond).Wave(context.Background(), tgt, load, plan.Wave{
			Kind: contract.KindRecorded, Mode: contract.ModeOpen, Repeat: 1, Open: &plan.Schedule{Arrival: workload.ArrivalTrace},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Records) != 5 || res.Wave.Arrival != workload.ArrivalTrace || res.Wave.RequestRateRPS != 0 {
			t.Fatalf("%d records, wave %+v", len(res.Records), res.Wave)
		}
		if got := contract.KeyOf(res.Wave).LoadLabel(); got != "trace replay" {
			t.Errorf("label %q", got)
		}
		for i, r := range res.Records {
			want := load.Arrivals[i].Seconds()
			if r.IntendedStartS != want || r.StartS != want || r.Prompt != i || r.MaxTokens != load.PromptMaxTokens[i] || !r.OK {
				t.Errorf("request %d: intended %v, start %v, prompt %d, max_tokens %d; want %v, prompt %d", i, r.IntendedStartS, r.StartS, r.Prompt, r.MaxTokens, want, i)
			}
		}
	})
}

func TestTraceOffsetsBounds(t *testing.T) {
	spec := OpenSpec{Load: traceLoad(), Arrival: workload.ArrivalTrace}
	for _, c := range []struct {
		n    int
		d    time.Duration
		want int
	}{{0, 0, 5}, {2, 0, 2}, {0, 1500 * time.Millisecond, 3}, {0, 1501 * time.Millisecond, 4}, {4, time.Hour, 4}, {9, 0, 5}} {
		spec.NumRequests, spec.Duration = c.n, c.d
		offs, err := spec.Offsets()
		if err != nil || len(offs) != c.want {
			t.Errorf("num_requests %d, duration %v: %d offsets (%v), want %d", c.n, c.d, len(offs), err, c.want)
		}
	}
	spec = OpenSpec{Load: testLoad(), Arrival: workload.ArrivalTrace}
	if _, err := spec.Offsets(); err == nil || !strings.Contains(err.Error(), "no traced arrivals") {
		t.Errorf("no arrivals: %v", err)
	}
	spec.Load = traceLoad()
	spec.Load.Arrivals[2] = 0
	if _, err := spec.Offsets(); err == nil || !strings.Contains(err.Error(), "traced arrival 2 at 0s is before arrival 1") {
		t.Errorf("backwards: %v", err)
	}
}

// TestTraceReplayAgainstServer: a trace replay over real HTTP: every
// record's intended_start_s is its traced offset, its prompt its line.
func TestTraceReplayAgainstServer(t *testing.T) {
	srv, n := fakeServer(t, 2, time.Millisecond)
	load := traceLoad()
	load.Arrivals = []time.Duration{0, 20 * time.Millisecond, 20 * time.Millisecond, 35 * time.Millisecond, 60 * time.Millisecond}
	res, err := New(Options{Counter: words{}}).OpenWave(context.Background(), Target{Name: "s", BaseURL: srv.URL},
		OpenSpec{Load: load, Repeat: 1, Arrival: workload.ArrivalTrace})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Records) != 5 || n.Load() != 5 {
		t.Fatalf("%d records, %d requests served", len(res.Records), n.Load())
	}
	for i, r := range res.Records {
		if r.IntendedStartS != load.Arrivals[i].Seconds() || r.Prompt != i || !r.OK || r.StartS < r.IntendedStartS-armLead.Seconds() {
			t.Errorf("record %d: intended %v, start %v, prompt %d, ok %v; want intended %v", i, r.IntendedStartS, r.StartS, r.Prompt, r.OK, load.Arrivals[i].Seconds())
		}
	}
}

// TestOpenWaveRamp: a ramp wave sends on the ramp's schedule and records
// the ramp; a fixed linear 1→20 ramp over 10 s sends ∫rate = 105.
func TestOpenWaveRamp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &contract.Ramp{Strategy: contract.RampLinear, StartRPS: 1, EndRPS: 20}
		res, err := fakeDriver(50*time.Millisecond).Wave(context.Background(), tgt, testLoad(), plan.Wave{
			Kind: contract.KindRecorded, Mode: contract.ModeOpen, Repeat: 1,
			Open: &plan.Schedule{Ramp: r, Arrival: workload.ArrivalFixed, Duration: 10*time.Second + time.Millisecond},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Records) != 106 || res.Wave.Ramp == nil || *res.Wave.Ramp != *r {
			// ∫rate over 10.001 s is about 105.02: requests 0…105.
			t.Fatalf("%d records, wave ramp %+v", len(res.Records), res.Wave.Ramp)
		}
		sched, _ := workload.NewRampSchedule(r.Strategy, r.StartRPS, r.EndRPS, 10*time.Second+time.Millisecond, workload.ArrivalFixed, 0, 0)
		for i, rec := range res.Records {
			if want := sched.Offset(i).Seconds(); rec.IntendedStartS != want {
				t.Fatalf("request %d: intended %v, ramp says %v", i, rec.IntendedStartS, want)
			}
		}
		if got := contract.KeyOf(res.Wave).LoadLabel(); got != "ramp 1→20 req/s" {
			t.Errorf("label %q", got)
		}
	})
	// Bounded by its count alone, the ramp spans the count.
	offs, err := OpenSpec{Load: testLoad(), Ramp: &contract.Ramp{Strategy: contract.RampExponential, StartRPS: 2, EndRPS: 50}, Arrival: workload.ArrivalPoisson, NumRequests: 300}.Offsets()
	if err != nil || len(offs) != 300 {
		t.Fatalf("%d offsets, %v", len(offs), err)
	}
	if _, err := (OpenSpec{Load: testLoad(), Ramp: &contract.Ramp{Strategy: "step", StartRPS: 2, EndRPS: 50}, Arrival: workload.ArrivalFixed, NumRequests: 3}).Offsets(); err == nil {
		t.Error("a step ramp was accepted")
	}
}

func TestConnectionsNeededByTraceAndRamp(t *testing.T) {
	ms := func(n ...time.Duration) []time.Duration {
		for i := range n {
			n[i] *= time.Millisecond
		}
		return n
	}
	wl := plan.Workload{Open: &plan.OpenLoop{Arrival: contract.ArrivalTrace},
		Load: plan.Load{Timeout: time.Second, Arrivals: ms(0, 100, 200, 900, 1000, 1050, 5000)}}
	// At most 5 arrivals within 1 s of each other (0.1…1.05), plus the
	// warmed connections, never more than the 7 requests.
	if got := ConnectionsNeeded(wl); got.Connections != 7 || !strings.Contains(got.Because, "5 arrivals") {
		t.Errorf("trace: %+v", got)
	}
	wl.Open.NumRequests = 3
	if got := ConnectionsNeeded(wl); got.Connections != 3 {
		t.Errorf("trace, 3 requests: %+v", got)
	}
	wl = plan.Workload{Load: plan.Load{Timeout: 10 * time.Second}, Open: &plan.OpenLoop{Arrival: workload.ArrivalFixed, Duration: 100 * time.Second,
		Ramp: &contract.Ramp{Strategy: contract.RampLinear, StartRPS: 50, EndRPS: 5}}}
	if got := ConnectionsNeeded(wl); got.Connections != 500+openWarm {
		t.Errorf("ramp: %+v, want the start rate's 500 + %d", got, openWarm)
	}
}

// TestOpenWaveBurstOfArrivals: a trace whose arrivals fall due together
// (50 at once, then 10 more) is let go ReleaseGroup at a time with a
// network poll between; every request is still sent, once, at its time,
// in order.
func TestOpenWaveBurstOfArrivals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		load := plan.Load{MaxTokens: 8, Timeout: 10 * time.Second}
		for i := range 60 {
			at := time.Duration(0)
			if i >= 50 {
				at = time.Second
			}
			load.Prompts = append(load.Prompts, fmt.Sprintf("p%d", i))
			load.Arrivals = append(load.Arrivals, at)
		}
		res, err := fakeDriver(100*time.Millisecond).Wave(context.Background(), tgt, load, plan.Wave{
			Kind: contract.KindRecorded, Mode: contract.ModeOpen, Repeat: 1, Open: &plan.Schedule{Arrival: workload.ArrivalTrace},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Records) != 60 || res.Wave.NotSent != 0 {
			t.Fatalf("%d records, wave %+v", len(res.Records), res.Wave)
		}
		for i, r := range res.Records {
			want := load.Arrivals[i].Seconds()
			if r.Client != i || r.IntendedStartS != want || r.StartS != want || !r.OK {
				t.Fatalf("request %d: client %d, intended %v, start %v, ok %v; want start %v", i, r.Client, r.IntendedStartS, r.StartS, r.OK, want)
			}
		}
	})
}
