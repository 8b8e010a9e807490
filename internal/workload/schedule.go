package workload

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rehearse/rehearse/internal/contract"
)

// Arrival processes of open-loop waves.
const (
	ArrivalFixed   = "fixed"
	ArrivalPoisson = "poisson"
	ArrivalGamma   = "gamma"
	// ArrivalTrace sends request i at the i-th arrival of the prompt
	// source's trace (Set.Arrivals); it has no rate and no Schedule.
	ArrivalTrace = contract.ArrivalTrace
)

// Arrivals lists the arrival processes NewSchedule accepts.
var Arrivals = []string{ArrivalFixed, ArrivalPoisson, ArrivalGamma}

// Schedule gives the intended send time of request i (i ≥ 0) as an offset
// from the wave's release. It is a pure function of its construction
// arguments and i: the same seed gives the same offsets, in any call order.
// Offsets never decrease with i and Offset(0) is 0.
type Schedule interface {
	Offset(i int) time.Duration
}

// NewSchedule returns the schedule of an arrival process at rateRPS requests
// per second. fixed sends every 1/rate; poisson draws exponential gaps of
// mean 1/rate; gamma draws gamma gaps of shape burstiness and mean 1/rate
// (burstiness 1 is Poisson, below 1 burstier, above 1 more regular).
// burstiness applies to gamma only (0 there means 1).
func NewSchedule(arrival string, rateRPS, burstiness float64, seed int64) (Schedule, error) {
	if math.IsNaN(rateRPS) || math.IsInf(rateRPS, 0) || rateRPS <= 0 {
		return nil, fmt.Errorf("request rate %v: want a positive number of requests per second", rateRPS)
	}
	if math.IsNaN(burstiness) || math.IsInf(burstiness, 0) || burstiness < 0 {
		return nil, fmt.Errorf("burstiness %v: want a positive number", burstiness)
	}
	mean := 1 / rateRPS
	switch arrival {
	case ArrivalFixed:
		if burstiness != 0 && burstiness != 1 {
			return nil, fmt.Errorf("burstiness %v applies to gamma arrivals only, not %s", burstiness, arrival)
		}
		return fixed{gapS: mean}, nil
	case ArrivalPoisson:
		if burstiness != 0 && burstiness != 1 {
			return nil, fmt.Errorf("burstiness %v applies to gamma arrivals only, not %s (poisson is gamma with burstiness 1)", burstiness, arrival)
		}
		return newDrawn(seed, func(r *rand.Rand) float64 { return r.ExpFloat64() * mean }), nil
	case ArrivalGamma:
		k := burstiness
		if k == 0 {
			k = 1
		}
		return newDrawn(seed, func(r *rand.Rand) float64 { return gammaVariate(r, k) * mean / k }), nil
	}
	return nil, fmt.Errorf("arrival %q: want one of %s", arrival, strings.Join(Arrivals, ", "))
}

type fixed struct{ gapS float64 }

func (f fixed) Offset(i int) time.Duration { return seconds(float64(i) * f.gapS) }

// drawn is a schedule of random gaps, drawn in order from one seeded
// generator and cached, so Offset(i) does not depend on the order of calls.
type drawn struct {
	mu      sync.Mutex
	rng     *rand.Rand
	gap     func(*rand.Rand) float64
	offsetS []float64 // offsetS[i] is Offset(i) in seconds
}

func newDrawn(seed int64, gap func(*rand.Rand) float64) *drawn {
	return &drawn{
		rng:     rand.New(rand.NewPCG(uint64(seed), 0x5245484541525345)), // "REHEARSE"
		gap:     gap,
		offsetS: []float64{0},
	}
}

func (d *drawn) Offset(i int) time.Duration {
	if i < 0 {
		return 0
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for len(d.offsetS) <= i {
		d.offsetS = append(d.offsetS, d.offsetS[len(d.offsetS)-1]+d.gap(d.rng))
	}
	return seconds(d.offsetS[i])
}

func seconds(s float64) time.Duration { return time.Duration(math.Round(s * 1e9)) }

// gammaVariate draws from Gamma(shape k, scale 1) by Marsaglia and Tsang's
// squeeze method, boosting shapes below 1 with a uniform power.
func gammaVariate(r *rand.Rand, k float64) float64 {
	if k < 1 {
		u := r.Float64()
		for u == 0 {
			u = r.Float64()
		}
		return gammaVariate(r, k+1) * math.Pow(u, 1/k)
	}
	d := k - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := r.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := r.Float64()
		if u < 1-0.0331*x*x*x*x {
			return d * v
		}
		if u > 0 && math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v)) {
			return d * v
		}
	}
}

// Ramp-up strategies of an open-loop wave whose rate moves from a start to
// an end rate (vllm bench serve's --ramp-up-strategy).
const (
	RampLinear      = contract.RampLinear
	RampExponential = contract.RampExponential
)

// RampStrategies lists the ramp-up strategies NewRampSchedule accepts.
var RampStrategies = []string{RampLinear, RampExponential}

// CheckRamp says what is wrong with a ramp from startRPS to endRPS, or nil:
// the strategy is linear or exponential, the end rate is positive, the
// start rate is 0 or more (positive for exponential).
func CheckRamp(strategy string, startRPS, endRPS float64) error {
	bad := func(x float64) bool { return math.IsNaN(x) || math.IsInf(x, 0) }
	switch {
	case !slices.Contains(RampStrategies, strategy):
		return fmt.Errorf("ramp strategy %q: want one of %s", strategy, strings.Join(RampStrategies, ", "))
	case bad(startRPS) || startRPS < 0:
		return fmt.Errorf("ramp start rate %v: want 0 or more requests per second", startRPS)
	case bad(endRPS) || endRPS <= 0:
		return fmt.Errorf("ramp end rate %v: want a positive number of requests per second", endRPS)
	case strategy == RampExponential && startRPS == 0:
		return fmt.Errorf("ramp start rate 0: an exponential ramp needs a positive start rate")
	}
	return nil
}

// RampHorizon is the time over which a ramp moves from startRPS to endRPS:
// the wave's duration when it has one, else the time in which the ramp's
// expected count of arrivals, ∫rate, reaches numRequests (so a wave bounded
// by its count alone ramps over its count).
func RampHorizon(strategy string, startRPS, endRPS float64, numRequests int, duration time.Duration) time.Duration {
	if duration > 0 {
		return duration
	}
	n := float64(numRequests)
	var t float64
	switch {
	case strategy == RampExponential && startRPS != endRPS:
		t = n * math.Log(endRPS/startRPS) / (endRPS - startRPS)
	default:
		t = 2 * n / (startRPS + endRPS)
	}
	return seconds(t)
}

// NewRampSchedule returns the schedule of an arrival process whose rate
// moves from startRPS at the release to endRPS at horizon, linearly or
// exponentially, and stays at endRPS after it.
//
// With Λ(t) = ∫₀ᵗ rate the expected count of arrivals by t, request i is
// sent at Λ⁻¹(uᵢ), where uᵢ are the arrivals of the same process at unit
// rate (time-rescaling): fixed takes uᵢ = i, so exactly one request falls
// in each unit of ∫rate; poisson and gamma draw uᵢ as sums of seeded gaps
// of mean 1 (gamma of shape burstiness), so the gaps keep the process's
// shape while their mean follows the rate. Λ⁻¹ is in closed form:
// linear, rate(t) = s + (e−s)·t/T and Λ(t) = s·t + (e−s)·t²/(2T); exponential,
// rate(t) = s·(e/s)^(t/T) and Λ(t) = s·T·((e/s)^(t/T) − 1)/ln(e/s).
// Offsets are pure of call order, never decrease, and Offset(0) is 0.
func NewRampSchedule(strategy string, startRPS, endRPS float64, horizon time.Duration, arrival string, burstiness float64, seed int64) (Schedule, error) {
	if err := CheckRamp(strategy, startRPS, endRPS); err != nil {
		return nil, err
	}
	if horizon <= 0 {
		return nil, fmt.Errorf("ramp over %v: want a positive time", horizon)
	}
	unit, err := NewSchedule(arrival, 1, burstiness, seed)
	if err != nil {
		return nil, err
	}
	return ramp{unit: unit, strategy: strategy, s: startRPS, e: endRPS, t: horizon.Seconds()}, nil
}

type ramp struct {
	unit     Schedule // the arrivals at unit rate
	strategy string
	s, e, t  float64 // start and end rate, horizon in seconds
}

func (r ramp) Offset(i int) time.Duration {
	if i <= 0 {
		return 0
	}
	return seconds(r.inverse(r.unit.Offset(i).Seconds()))
}

// total is Λ(T), the expected arrivals over the ramp.
func (r ramp) total() float64 {
	if r.strategy == RampExponential && r.s != r.e {
		return r.t * (r.e - r.s) / math.Log(r.e/r.s)
	}
	return r.t * (r.s + r.e) / 2
}

// inverse is Λ⁻¹(u): the time by which u arrivals are expected.
func (r ramp) inverse(u float64) float64 {
	if total := r.total(); u > total {
		return r.t + (u-total)/r.e
	}
	switch {
	case r.s == r.e:
		return u / r.s
	case r.strategy == RampExponential:
		k := math.Log(r.e / r.s)
		return r.t / k * math.Log1p(u*k/(r.s*r.t))
	}
	// s·t + a·t² = u with a = (e−s)/(2T); the root in the form that
	// stays exact as a goes to 0 and for s = 0.
	a := (r.e - r.s) / (2 * r.t)
	return 2 * u / (r.s + math.Sqrt(max(0, r.s*r.s+4*a*u)))
}
