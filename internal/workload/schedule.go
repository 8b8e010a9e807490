package workload

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"time"
)

// Arrival processes of open-loop waves.
const (
	ArrivalFixed   = "fixed"
	ArrivalPoisson = "poisson"
	ArrivalGamma   = "gamma"
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
