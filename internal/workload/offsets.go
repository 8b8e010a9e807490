package workload

import (
	"fmt"
	"slices"
	"time"

	"github.com/rehearse/rehearse/internal/contract"
)

// OpenLoad is what the send times of an open-loop wave depend on: its
// arrival process at a constant rate or along a ramp, or a trace's
// arrivals, and its bounds.
type OpenLoad struct {
	RateRPS    float64
	Arrival    string // ArrivalFixed, ArrivalPoisson, ArrivalGamma or ArrivalTrace
	Burstiness float64
	Seed       int64
	// NumRequests and Duration bound the wave (whichever ends first); an
	// arrival at or after Duration is not sent.
	NumRequests int
	Duration    time.Duration
	// Ramp, when set, moves the rate from its start to its end rate over
	// Duration (or, without one, over the time NumRequests are expected to
	// take); RateRPS is then unused.
	Ramp *contract.Ramp
	// Arrivals are a trace's send times, aligned with the prompts (arrival
	// trace: request i sends prompt i at Arrivals[i]); Prompts is how many
	// prompts there are.
	Arrivals []time.Duration
	Prompts  int
	// MaxRequests bounds the requests of one wave, so that a duration-bound
	// schedule at an absurd rate is refused rather than allocated.
	MaxRequests int
	// Pacing is "" for rehearse's schedules (NewSchedule, NewRampSchedule)
	// or PacingVLLM for vllm bench serve's.
	Pacing string
}

// OpenOffsets returns the intended send offsets of an open-loop wave's
// requests: the schedule's (NewSchedule at a constant rate, NewRampSchedule
// along a ramp), or, arrival trace, the traced arrivals; up to NumRequests
// and strictly before Duration. The runner (package drive) and the
// simulator's predictions both take their offsets from it.
func OpenOffsets(l OpenLoad) ([]time.Duration, error) {
	if l.NumRequests < 0 || l.Duration < 0 {
		return nil, fmt.Errorf("num_requests %d, duration %v: want non-negative bounds", l.NumRequests, l.Duration)
	}
	if l.NumRequests > l.MaxRequests {
		return nil, fmt.Errorf("num_requests %d: more than %d requests in one open-loop wave", l.NumRequests, l.MaxRequests)
	}
	if l.Arrival == ArrivalTrace {
		return traced(l)
	}
	switch l.Pacing {
	case "":
	case PacingVLLM:
		return vllmOffsets(l)
	default:
		return nil, fmt.Errorf("pacing %q: want %s or none", l.Pacing, PacingVLLM)
	}
	if l.NumRequests == 0 && l.Duration == 0 {
		return nil, fmt.Errorf("open-loop wave at %v req/s is unbounded: set num_requests, duration, or both", l.RateRPS)
	}
	rate := l.RateRPS
	var (
		sched Schedule
		err   error
	)
	if r := l.Ramp; r != nil {
		rate = max(r.StartRPS, r.EndRPS)
		sched, err = NewRampSchedule(r.Strategy, r.StartRPS, r.EndRPS,
			RampHorizon(r.Strategy, r.StartRPS, r.EndRPS, l.NumRequests, l.Duration), l.Arrival, l.Burstiness, l.Seed)
	} else {
		sched, err = NewSchedule(l.Arrival, l.RateRPS, l.Burstiness, l.Seed)
	}
	if err != nil {
		return nil, err
	}
	if l.NumRequests == 0 && rate*l.Duration.Seconds() > float64(l.MaxRequests) {
		return nil, fmt.Errorf("open-loop wave of more than %d requests (%v req/s for %v): lower the rate or the duration", l.MaxRequests, l.RateRPS, l.Duration)
	}
	var out []time.Duration
	for i := 0; l.NumRequests == 0 || i < l.NumRequests; i++ {
		off := sched.Offset(i)
		if l.Duration > 0 && off >= l.Duration {
			break
		}
		if i >= l.MaxRequests {
			return nil, fmt.Errorf("open-loop wave of more than %d requests (%v req/s for %v): lower the rate or the duration", l.MaxRequests, l.RateRPS, l.Duration)
		}
		out = append(out, off)
	}
	return out, nil
}

// traced is the offsets of a trace replay: the load's arrivals, request i
// at Arrivals[i] (prompt i), up to NumRequests and strictly before
// Duration.
func traced(l OpenLoad) ([]time.Duration, error) {
	a := l.Arrivals
	if len(a) == 0 {
		return nil, fmt.Errorf("arrival trace, but the prompts carry no traced arrivals (workload.prompts source trace)")
	}
	if len(a) != l.Prompts {
		return nil, fmt.Errorf("%d traced arrivals for %d prompts", len(a), l.Prompts)
	}
	n := len(a)
	if l.NumRequests > 0 {
		n = min(n, l.NumRequests)
	}
	for i := 1; i < n; i++ {
		if a[i] < a[i-1] {
			return nil, fmt.Errorf("traced arrival %d at %v is before arrival %d at %v", i, a[i], i-1, a[i-1])
		}
	}
	if l.Duration > 0 {
		n, _ = slices.BinarySearch(a[:n], l.Duration)
	}
	return slices.Clone(a[:n]), nil
}
