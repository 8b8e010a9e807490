package workload

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/rehearse/rehearse/internal/contract"
)

// PacingVLLM paces an open-loop wave as vllm bench serve's get_request does
// (vllm/benchmarks/serve.py), instead of rehearse's own schedules:
//
//   - every request, the first included, waits a gap drawn from a gamma of
//     shape burstiness and mean 1/rate (burstiness 1: exponential, Poisson
//     arrivals; fixed arrivals: exactly 1/rate), so request 0 is not sent at
//     the release but after its own gap;
//   - at a constant rate the cumulative gaps are rescaled so that the last
//     of the N requests goes at exactly N/rate (vLLM's normalisation, which
//     fixes the run's length whatever the draws);
//   - along a ramp, request i's gap is drawn at the rate the ramp gives its
//     index, start + (end − start)·i/(N − 1) (linear) or
//     start·(end/start)^(i/(N − 1)) (exponential), and nothing is rescaled.
//
// A vLLM wave is bounded by its count alone (vLLM's --num-prompts). The draws
// come from rehearse's seeded generator, not NumPy's: the same seed gives the
// same offsets here, not the same offsets as vLLM.
const PacingVLLM = "vllm"

// vllmOffsets are the send offsets of a wave paced as vLLM paces one.
func vllmOffsets(l OpenLoad) ([]time.Duration, error) {
	n := l.NumRequests
	switch {
	case n < 1:
		return nil, fmt.Errorf("pacing %s: num_requests %d: want at least 1 (vLLM's --num-prompts bounds the wave)", PacingVLLM, n)
	case l.Duration > 0:
		return nil, fmt.Errorf("pacing %s: duration %v: a vLLM wave is bounded by num_requests alone", PacingVLLM, l.Duration)
	}
	shape, err := vllmShape(l.Arrival, l.Burstiness)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(uint64(l.Seed), 0x564c4c4d)) // "VLLM"
	acc, cum := 0.0, make([]float64, n)
	for i := range n {
		rate, err := vllmRate(l, i)
		if err != nil {
			return nil, err
		}
		if math.IsInf(shape, 1) {
			acc += 1 / rate
		} else {
			acc += gammaVariate(rng, shape) / (rate * shape)
		}
		cum[i] = acc
	}
	if l.Ramp == nil && cum[n-1] > 0 {
		f := float64(n) / l.RateRPS / cum[n-1]
		for i := range cum {
			cum[i] *= f
		}
	}
	out := make([]time.Duration, n)
	for i, s := range cum {
		out[i] = seconds(s)
	}
	return out, nil
}

// vllmShape is the gamma shape of an arrival process as vLLM draws it:
// poisson 1, gamma its burstiness (0 means 1), fixed +Inf (vLLM's
// --burstiness inf: every gap exactly 1/rate).
func vllmShape(arrival string, burstiness float64) (float64, error) {
	if math.IsNaN(burstiness) || burstiness < 0 {
		return 0, fmt.Errorf("burstiness %v: want a positive number", burstiness)
	}
	switch arrival {
	case ArrivalFixed:
		return math.Inf(1), nil
	case ArrivalPoisson:
		return 1, nil
	case ArrivalGamma:
		if burstiness == 0 {
			return 1, nil
		}
		return burstiness, nil
	}
	return 0, fmt.Errorf("pacing %s: arrival %q: want fixed, poisson or gamma", PacingVLLM, arrival)
}

// vllmRate is the rate request i of l is drawn at: the constant rate, or
// the ramp's at the index's share of the wave.
func vllmRate(l OpenLoad, i int) (float64, error) {
	r := l.Ramp
	if r == nil {
		if math.IsNaN(l.RateRPS) || math.IsInf(l.RateRPS, 0) || l.RateRPS <= 0 {
			return 0, fmt.Errorf("request rate %v: want a positive number of requests per second", l.RateRPS)
		}
		return l.RateRPS, nil
	}
	p := float64(i) / float64(max(l.NumRequests-1, 1))
	rate := r.StartRPS + (r.EndRPS-r.StartRPS)*p
	if r.Strategy == contract.RampExponential {
		rate = r.StartRPS * math.Pow(r.EndRPS/r.StartRPS, p)
	}
	if !(rate > 0) || math.IsInf(rate, 0) {
		return 0, fmt.Errorf("ramp rate %v req/s at request %d: vLLM's ramp draws each request's gap at its rate, which must be positive (a start rate above 0)", rate, i)
	}
	return rate, nil
}
