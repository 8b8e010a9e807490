package drive

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/plan"
)

// ReservedDescriptors are the open files a rehearsal holds besides its
// connections to the server under test: standard streams, the journal, the
// servers' logs and pipes, the runtime's poller, readiness probes and
// metrics scrapes.
const ReservedDescriptors = 64

// openWarm is how many connections an uncapped open-loop wave pre-dials.
const openWarm = 32

// Need is the most connections a plan keeps open at once, and which part
// of the plan needs them.
type Need struct {
	Connections int
	// Because names the wave that needs them ("concurrency 5000",
	// "open loop at 200 req/s with a 60 s timeout").
	Because string
}

// ConnectionsNeeded is what a workload keeps open against one server at
// once: its largest closed-loop wave (the recorded ones, the warm-up at
// wl.WarmupConcurrency, 0 meaning the first concurrency, and the mechanism
// check); for an open-loop wave, max_concurrency when capped, else the
// requests in flight when each lasts the whole timeout,
// ceil(rate × timeout), plus the connections warmed ahead, and never more
// than num_requests.
func ConnectionsNeeded(wl plan.Workload) Need {
	var need Need
	take := func(n int, because string) {
		if n > need.Connections {
			need = Need{Connections: n, Because: because}
		}
	}
	for _, c := range wl.Concurrencies {
		take(c, "concurrency "+strconv.Itoa(c))
	}
	if wl.WarmupWaves > 0 && wl.WarmupConcurrency > 0 {
		take(wl.WarmupConcurrency, "warm-up concurrency "+strconv.Itoa(wl.WarmupConcurrency))
	}
	if c := wl.Capacity; c != nil {
		take(c.Max, "capacity max_concurrency "+strconv.Itoa(c.Max))
	}
	if m := wl.MechanismCheck; m != nil {
		take(m.Concurrency, "mechanism-check concurrency "+strconv.Itoa(m.Concurrency))
	}
	if o := wl.Open; o != nil {
		timeoutS := wl.Load.Timeout.Seconds()
		for _, rate := range o.RequestRatesRPS {
			n, because := openNeed(o, rate, timeoutS)
			take(n, because)
		}
		if r := o.Ramp; r != nil {
			n, because := openNeed(o, max(r.StartRPS, r.EndRPS), timeoutS)
			take(n, because)
		}
		if o.Arrival == contract.ArrivalTrace {
			take(traceNeed(o, wl.Load.Arrivals, timeoutS))
		}
	}
	return need
}

// traceNeed is a trace replay's open connections: max_concurrency when
// capped, else the most traced arrivals within one timeout of each other
// plus the connections warmed ahead, never more than the requests sent.
func traceNeed(o *plan.OpenLoop, arrivals []time.Duration, timeoutS float64) (int, string) {
	if o.MaxConcurrency > 0 {
		return o.MaxConcurrency, "max concurrency " + strconv.Itoa(o.MaxConcurrency)
	}
	a := make([]float64, len(arrivals))
	for i, at := range arrivals {
		a[i] = at.Seconds()
	}
	if o.NumRequests > 0 && o.NumRequests < len(a) {
		a = a[:o.NumRequests]
	}
	if durationS := o.Duration.Seconds(); durationS > 0 {
		n := 0
		for n < len(a) && a[n] < durationS {
			n++
		}
		a = a[:n]
	}
	peak := len(a)
	if timeoutS > 0 {
		peak = 0
		for lo, hi := 0, 0; hi < len(a); hi++ {
			for a[hi]-a[lo] >= timeoutS {
				lo++
			}
			peak = max(peak, hi-lo+1)
		}
	}
	n := min(len(a), peak+min(len(a), openWarm))
	return n, fmt.Sprintf("trace replay with %d arrivals within a %g s timeout", peak, timeoutS)
}

func openNeed(o *plan.OpenLoop, rate, timeoutS float64) (int, string) {
	if o.MaxConcurrency > 0 {
		return o.MaxConcurrency, "max concurrency " + strconv.Itoa(o.MaxConcurrency)
	}
	label := fmt.Sprintf("open loop at %g req/s", rate)
	requests := o.NumRequests
	if requests == 0 {
		requests = math.MaxInt
		if durationS := o.Duration.Seconds(); durationS > 0 {
			requests = ceilInt(rate * durationS)
		}
	}
	if timeoutS <= 0 {
		return requests, label + " with no timeout"
	}
	inFlight := ceilInt(rate*timeoutS) + min(requests, openWarm)
	if requests < inFlight {
		return requests, fmt.Sprintf("%s, %d requests", label, requests)
	}
	return inFlight, fmt.Sprintf("%s with a %g s timeout, %d warmed", label, timeoutS, min(requests, openWarm))
}

func ceilInt(x float64) int {
	if !(x < math.MaxInt32) {
		return math.MaxInt32
	}
	return int(math.Ceil(x))
}

// CheckDescriptors refuses, before any request is sent, a plan that needs
// more open files than this process may have: need's connections plus
// ReservedDescriptors against the soft RLIMIT_NOFILE. Go's runtime already
// raises the soft limit to the hard one (less one) at start on Linux
// (syscall's init, go.dev/issue/46279; TestGoRaisesTheOpenFileLimitAtStart
// checks it), so the limit read here is the most the process can have
// without the user raising the hard limit, and nothing here raises it.
func CheckDescriptors(need Need) error {
	limit, ok := openFileLimit()
	if !ok {
		return nil
	}
	return checkDescriptors(need, limit)
}

func checkDescriptors(need Need, limit uint64) error {
	total := uint64(need.Connections) + ReservedDescriptors
	if total <= limit {
		return nil
	}
	return &DescriptorError{Need: need, Total: total, Limit: limit}
}

// DescriptorError is a plan refused for needing more open files than the
// limit allows.
type DescriptorError struct {
	Need         Need
	Total, Limit uint64
}

func (e *DescriptorError) Error() string {
	return fmt.Sprintf("the plan keeps up to %d connections open (%s) and needs %d open files with the %d reserved, but the open-file limit is %d; raise it with ulimit -n",
		e.Need.Connections, e.Need.Because, e.Total, ReservedDescriptors, e.Limit)
}
