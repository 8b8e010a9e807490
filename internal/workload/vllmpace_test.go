package workload

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/contract"
)

// At a constant rate vLLM's pacing sends the last of N requests at exactly
// N/rate, the first after a gap of its own, and the gaps keep their shape.
func TestVLLMPacingNormalised(t *testing.T) {
	for _, arrival := range []string{ArrivalPoisson, ArrivalGamma, ArrivalFixed} {
		offs, err := OpenOffsets(OpenLoad{RateRPS: 4, Arrival: arrival, Burstiness: 0.5, Seed: 3, NumRequests: 200, MaxRequests: 1000, Pacing: PacingVLLM})
		if err != nil {
			t.Fatal(err)
		}
		if len(offs) != 200 || offs[199] != 50*time.Second || offs[0] <= 0 {
			t.Fatalf("%s: %d offsets, first %v, last %v: want 200, the first after a gap, the last at 200/4 = 50 s", arrival, len(offs), offs[0], offs[199])
		}
		if !slices.IsSorted(offs) {
			t.Errorf("%s: offsets decrease", arrival)
		}
		if arrival == ArrivalFixed && (offs[0] != 250*time.Millisecond || offs[1] != 500*time.Millisecond) {
			t.Errorf("fixed: %v %v, want every 250 ms from the first gap", offs[0], offs[1])
		}
	}
	a, _ := OpenOffsets(OpenLoad{RateRPS: 4, Arrival: ArrivalPoisson, Seed: 3, NumRequests: 50, MaxRequests: 1000, Pacing: PacingVLLM})
	b, _ := OpenOffsets(OpenLoad{RateRPS: 4, Arrival: ArrivalPoisson, Seed: 3, NumRequests: 50, MaxRequests: 1000, Pacing: PacingVLLM})
	c, _ := OpenOffsets(OpenLoad{RateRPS: 4, Arrival: ArrivalPoisson, Seed: 4, NumRequests: 50, MaxRequests: 1000, Pacing: PacingVLLM})
	if !slices.Equal(a, b) || slices.Equal(a, c) {
		t.Error("the same seed must give the same offsets, another seed others")
	}
}

// Along a ramp, request i is drawn at the rate of its index and nothing is
// rescaled: a fixed linear ramp from 1 to 3 over 3 requests sends at 1 s,
// 1 + 1/2 s and 1 + 1/2 + 1/3 s.
func TestVLLMPacingRamp(t *testing.T) {
	ramp := &contract.Ramp{Strategy: RampLinear, StartRPS: 1, EndRPS: 3}
	offs, err := OpenOffsets(OpenLoad{Arrival: ArrivalFixed, NumRequests: 3, Ramp: ramp, MaxRequests: 10, Pacing: PacingVLLM})
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{1, 1.5, 1.5 + 1.0/3}
	for i, w := range want {
		if math.Abs(offs[i].Seconds()-w) > 1e-9 {
			t.Errorf("offset %d = %v, want %v s", i, offs[i], w)
		}
	}
	exp := &contract.Ramp{Strategy: RampExponential, StartRPS: 1, EndRPS: 4}
	offs, _ = OpenOffsets(OpenLoad{Arrival: ArrivalFixed, NumRequests: 3, Ramp: exp, MaxRequests: 10, Pacing: PacingVLLM})
	if math.Abs(offs[2].Seconds()-(1+0.5+0.25)) > 1e-9 {
		t.Errorf("exponential ramp 1 → 4: offsets %v, want 1, 1.5, 1.75 s", offs)
	}
}

func TestVLLMPacingRefusals(t *testing.T) {
	for _, c := range []struct {
		l    OpenLoad
		want string
	}{
		{OpenLoad{RateRPS: 1, Arrival: ArrivalPoisson, MaxRequests: 10, Pacing: PacingVLLM}, "num_requests 0"},
		{OpenLoad{RateRPS: 1, Arrival: ArrivalPoisson, NumRequests: 2, Duration: time.Second, MaxRequests: 10, Pacing: PacingVLLM}, "bounded by num_requests alone"},
		{OpenLoad{Arrival: ArrivalPoisson, NumRequests: 2, Ramp: &contract.Ramp{Strategy: RampLinear, EndRPS: 2}, MaxRequests: 10, Pacing: PacingVLLM}, "a start rate above 0"},
		{OpenLoad{RateRPS: 1, Arrival: ArrivalPoisson, NumRequests: 2, MaxRequests: 10, Pacing: "k6"}, `pacing "k6"`},
	} {
		if _, err := OpenOffsets(c.l); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.l, err, c.want)
		}
	}
}
