package predict

import (
	"reflect"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/sim/engine"
	"github.com/rehearse/rehearse/internal/workload"
)

// TestPredictOpen: an open-loop prediction sends request i at the
// schedule's i-th offset, one wave of mode open at the rate, the same
// records for the same seed and others for another.
func TestPredictOpen(t *testing.T) {
	truth, w := validateTruth(t)
	ow := OpenWorkload{Prompts: w.Prompts, MaxTokens: w.MaxTokens, TimeoutS: w.TimeoutS, IgnoreEOS: true,
		RateRPS: 4, Arrival: workload.ArrivalPoisson, Seed: 3, NumRequests: 12}
	pr, err := Open(truth, ow, Options{Server: "s"})
	if err != nil {
		t.Fatal(err)
	}
	sched, err := workload.NewSchedule(ow.Arrival, ow.RateRPS, 0, ow.Seed)
	if err != nil {
		t.Fatal(err)
	}
	if len(pr.Waves) != 1 || pr.Waves[0].Mode != contract.ModeOpen || pr.Waves[0].RequestRateRPS != 4 || len(pr.Records) != 12 {
		t.Fatalf("waves %+v, %d records", pr.Waves, len(pr.Records))
	}
	for i, r := range pr.Records {
		if off := sched.Offset(i).Seconds(); r.IntendedStartS != off || r.StartS != off || !r.OK || r.Prompt != workload.PromptIndex(i, len(w.Prompts)) {
			t.Errorf("record %d: intended %g, start %g, ok %v, prompt %d; want %g", i, r.IntendedStartS, r.StartS, r.OK, r.Prompt, off)
		}
	}
	if len(pr.Aggregates) != 1 || pr.Aggregates[0].Key().LoadLabel() != "4 req/s" || pr.Aggregates[0].Goodput.Median == nil {
		t.Errorf("aggregates %+v", pr.Aggregates)
	}
	again, err := Open(truth, ow, Options{Server: "s"})
	if err != nil || !reflect.DeepEqual(again.Records, pr.Records) {
		t.Errorf("a second prediction differs (%v)", err)
	}
	ow.Seed = 4
	other, err := Open(truth, ow, Options{Server: "s"})
	if err != nil || reflect.DeepEqual(other.Records, pr.Records) {
		t.Errorf("another seed gave the same records (%v)", err)
	}
	// A duration bound: no arrival at or after it.
	ow.NumRequests, ow.DurationS = 0, 1
	bounded, err := Open(truth, ow, Options{Server: "s"})
	if err != nil || len(bounded.Records) == 0 {
		t.Fatalf("duration-bounded: %v", err)
	}
	for _, r := range bounded.Records {
		if r.IntendedStartS >= 1 {
			t.Errorf("an arrival at %g s, after the 1 s duration", r.IntendedStartS)
		}
	}
	ow.DurationS = 0
	if _, err := Open(truth, ow, Options{}); err == nil || !strings.Contains(err.Error(), "num_requests or duration") {
		t.Errorf("an unbounded open loop: %v", err)
	}
	ow.DurationS, ow.Arrival = 1, "ramp"
	if _, err := Open(truth, ow, Options{}); err == nil {
		t.Error("an unknown arrival process was accepted")
	}
}

// TestPredictSustainedDuration: a duration bounds the measured part: no
// measured request is sent at or after its release + duration.
func TestPredictSustainedDuration(t *testing.T) {
	truth, w := validateTruth(t)
	sw := SustainedWorkload{Prompts: w.Prompts, MaxTokens: w.MaxTokens, TimeoutS: w.TimeoutS, IgnoreEOS: true, Requests: 1000, WarmupRequests: 2}
	sw.DurationS = 2
	pr, err := Sustained(truth, sw, 2, Options{})
	if err != nil {
		t.Fatal(err)
	}
	measured := pr.Records[2:]
	if len(measured) == 0 || len(measured) >= 1000 {
		t.Fatalf("%d measured requests in 2 s", len(measured))
	}
	for _, r := range measured {
		if r.StartS >= sw.DurationS {
			t.Errorf("a measured request sent at %g s, after the 2 s duration", r.StartS)
		}
	}
	if pr.Waves[len(pr.Waves)-1].Mode != contract.ModeSustained {
		t.Errorf("waves %+v", pr.Waves)
	}
}

// validateTruth is a batching profile whose fit recovers it, and a closed-loop workload.
func validateTruth(t *testing.T) (*engine.Profile, ClosedWorkload) {
	t.Helper()
	truth, err := engine.BuiltinProfile("t4-qwen2.5-1.5b-batching")
	if err != nil {
		t.Fatal(err)
	}
	truth.PrefillBaseS, truth.PrefillPerTokenS, truth.FrontendSPerRequest, truth.RequestOverheadS = 0, 0, 0.0005, 0.004
	truth.MaxNumSeqs = 64
	truth.DecodeStepS = [][2]float64{{1, 0.02}, {64, 0.05}} // linear: the fit's points interpolate it exactly
	return truth, ClosedWorkload{Concurrencies: []int{1, 4, 8, 16}, Repeats: 2, Prompts: fitPrompts, MaxTokens: 32, TimeoutS: 60, IgnoreEOS: true}
}

// fitPrompts are the eight prompts rehearse demo sends.
var fitPrompts = workload.BuiltinPrompts()
