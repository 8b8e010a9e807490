package workload

import (
	"math"
	"strings"
	"testing"
	"time"
)

// rampIntegral is ∫₀ᵈ rate of a ramp over horizon, by the midpoint rule
// (independent of the closed form the schedule inverts).
func rampIntegral(strategy string, s, e, horizon, d float64) float64 {
	rate := func(t float64) float64 {
		if t >= horizon {
			return e
		}
		if strategy == RampExponential {
			return s * math.Pow(e/s, t/horizon)
		}
		return s + (e-s)*t/horizon
	}
	const n = 200000
	h := d / n
	sum := 0.0
	for i := range n {
		sum += rate((float64(i) + 0.5) * h)
	}
	return sum * h
}

func countBefore(s Schedule, d time.Duration) int {
	n := 0
	for s.Offset(n) < d {
		n++
	}
	return n
}

// TestRampFixedCountIsTheRateIntegral: a fixed ramp sends exactly one
// request per unit of ∫rate, so the count before d is ⌈∫₀ᵈ rate⌉.
func TestRampFixedCountIsTheRateIntegral(t *testing.T) {
	for _, c := range []struct {
		strategy string
		s, e     float64
		horizon  time.Duration
	}{
		{RampLinear, 1, 20, 10 * time.Second},
		{RampLinear, 0, 7.5, 4 * time.Second},
		{RampLinear, 30, 2, 6 * time.Second},
		{RampLinear, 5, 5, 3 * time.Second},
		{RampExponential, 1, 20, 10 * time.Second},
		{RampExponential, 16, 0.5, 8 * time.Second},
	} {
		sched, err := NewRampSchedule(c.strategy, c.s, c.e, c.horizon, ArrivalFixed, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range []time.Duration{c.horizon / 3, c.horizon, c.horizon + 1500*time.Millisecond} {
			want := rampIntegral(c.strategy, c.s, c.e, c.horizon.Seconds(), d.Seconds())
			got := countBefore(sched, d)
			// Exactly ⌈∫⌉; where ∫ is a whole number, rounding may put
			// the request at d itself on either side.
			if lo, hi := int(math.Ceil(want-1e-6)), int(math.Ceil(want+1e-6)); got < lo || got > hi {
				t.Errorf("%s %v→%v over %v: %d arrivals before %v, ∫rate = %.4f (want ⌈∫⌉ = %v)", c.strategy, c.s, c.e, c.horizon, got, d, want, math.Ceil(want))
			}
		}
	}
}

// TestRampDrawnCountFollowsTheRate: poisson and gamma ramps, over many
// seeds, average ∫rate arrivals within a few standard errors, and the
// first half of an increasing linear ramp gets about a third of them.
func TestRampDrawnCountFollowsTheRate(t *testing.T) {
	const horizon = 10 * time.Second
	want := rampIntegral(RampLinear, 2, 20, 10, 10) // 110
	for _, arrival := range []string{ArrivalPoisson, ArrivalGamma} {
		var total, first float64
		const seeds = 200
		for seed := range int64(seeds) {
			sched, err := NewRampSchedule(RampLinear, 2, 20, horizon, arrival, 2, seed)
			if arrival == ArrivalPoisson {
				sched, err = NewRampSchedule(RampLinear, 2, 20, horizon, arrival, 0, seed)
			}
			if err != nil {
				t.Fatal(err)
			}
			total += float64(countBefore(sched, horizon))
			first += float64(countBefore(sched, horizon/2))
		}
		mean := total / seeds
		// Poisson: sd √110 ≈ 10.5 per wave, 0.74 over 200 waves; 4 units
		// is over 5 standard errors.
		if math.Abs(mean-want) > 4 {
			t.Errorf("%s: mean %v arrivals over the ramp, ∫rate = %v", arrival, mean, want)
		}
		if r := first / total; math.Abs(r-0.3) > 0.03 { // ∫₀⁵ / ∫₀¹⁰ = 32.5/110 ≈ 0.295
			t.Errorf("%s: %.3f of the arrivals in the first half, want about 0.295", arrival, r)
		}
	}
}

func TestRampSchedulePureAndMonotone(t *testing.T) {
	for _, strategy := range RampStrategies {
		for _, arrival := range Arrivals {
			mk := func() Schedule {
				s, err := NewRampSchedule(strategy, 1, 40, 5*time.Second, arrival, 0, 11)
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			a, b := mk(), mk()
			if a.Offset(0) != 0 {
				t.Errorf("%s %s: Offset(0) = %v", strategy, arrival, a.Offset(0))
			}
			// b is asked backwards; a forwards.
			back := make([]time.Duration, 300)
			for i := len(back) - 1; i >= 0; i-- {
				back[i] = b.Offset(i)
			}
			for i := range back {
				if got := a.Offset(i); got != back[i] {
					t.Fatalf("%s %s: Offset(%d) = %v forwards, %v backwards", strategy, arrival, i, got, back[i])
				}
				if i > 0 && back[i] < back[i-1] {
					t.Fatalf("%s %s: Offset(%d) = %v < Offset(%d) = %v", strategy, arrival, i, back[i], i-1, back[i-1])
				}
			}
		}
	}
}

func TestRampHorizon(t *testing.T) {
	if got := RampHorizon(RampLinear, 1, 20, 999, 30*time.Second); got != 30*time.Second {
		t.Errorf("duration given: horizon %v", got)
	}
	// 105 requests of a linear 1→20 ramp: ∫ = T·21/2 = 105 at T = 10 s.
	if got := RampHorizon(RampLinear, 1, 20, 105, 0); got != 10*time.Second {
		t.Errorf("linear: horizon %v, want 10s", got)
	}
	h := RampHorizon(RampExponential, 1, 20, 100, 0)
	if got := rampIntegral(RampExponential, 1, 20, h.Seconds(), h.Seconds()); math.Abs(got-100) > 1e-3 {
		t.Errorf("exponential: ∫rate over the horizon %v = %v, want 100", h, got)
	}
	// A fixed ramp bounded by its count alone sends its last request
	// within the horizon.
	s, _ := NewRampSchedule(RampLinear, 1, 20, RampHorizon(RampLinear, 1, 20, 105, 0), ArrivalFixed, 0, 0)
	if last := s.Offset(104); last > 10*time.Second {
		t.Errorf("request 104 at %v, after the 10 s horizon", last)
	}
}

func TestRampRefusals(t *testing.T) {
	for _, c := range []struct {
		strategy string
		s, e     float64
		horizon  time.Duration
		want     string
	}{
		{"step", 1, 2, time.Second, `ramp strategy "step"`},
		{RampLinear, -1, 2, time.Second, "start rate -1"},
		{RampLinear, 1, 0, time.Second, "end rate 0"},
		{RampExponential, 0, 5, time.Second, "exponential ramp needs a positive start"},
		{RampLinear, 1, math.Inf(1), time.Second, "end rate +Inf"},
		{RampLinear, 1, 2, 0, "ramp over 0s"},
	} {
		_, err := NewRampSchedule(c.strategy, c.s, c.e, c.horizon, ArrivalFixed, 0, 0)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c, err, c.want)
		}
	}
}
