package drive

import (
	"context"
	"sync"

	"github.com/rehearse/rehearse/internal/plan"
	"github.com/rehearse/rehearse/internal/stream"
)

// Balancing modes of Target.Balance (config's).
const (
	BalanceRoundRobin       = "round-robin"
	BalanceLeastOutstanding = "least-outstanding"
)

// replicaSet is what a wave sends to a target: the prepared requests of
// its prompts, one copy per replica when the client balances over the
// target's replicas (SPEC §10), and the choice of replica per request.
//
// Round-robin numbers the target's requests in the plan's order, across its
// waves (within a wave: client i of a closed wave, arrival i of an open
// one, request i of a sustained run), and sends request k to replica k mod
// N: each of N replicas serves ⌊n/N⌋ or ⌈n/N⌉ of any n consecutive
// requests, of a wave or of the whole rehearsal, whatever the timing.
// Least-outstanding sends each request to the replica with the fewest
// requests in flight (the lowest index on a tie).
type replicaSet struct {
	// prepared[r][p] is prompt p's request to replica r.
	prepared [][]*stream.Prepared
	balance  string
	// base is the number of the wave's first request among the target's.
	base int

	mu          sync.Mutex
	outstanding []int
	// picks is one more than the largest request index picked.
	picks int
	// planned is the wave's requests over every worker of a split plan
	// (0: not known ahead, a sustained run bound by duration): the next
	// wave is numbered on from it, so every worker numbers it alike even
	// though each picked only its share.
	planned int
}

// prepareReplicas builds the requests of a wave of requests: prepare's,
// once per replica of a balanced target, numbered on from the target's
// earlier waves.
func (d *Driver) prepareReplicas(t Target, l plan.Load, requests int) (*replicaSet, error) {
	rs, err := prepareReplicas(t, l, requests)
	if err != nil || !rs.balanced() {
		return rs, err
	}
	d.mu.Lock()
	rs.base = d.rrNext[t.Name]
	d.mu.Unlock()
	rs.planned = requests
	return rs, nil
}

// advance numbers the target's next wave on from this one's requests.
func (d *Driver) advance(t Target, rs *replicaSet) {
	if rs == nil || !rs.balanced() {
		return
	}
	rs.mu.Lock()
	n := max(rs.picks, rs.planned)
	rs.mu.Unlock()
	d.mu.Lock()
	if d.rrNext == nil {
		d.rrNext = map[string]int{}
	}
	d.rrNext[t.Name] = rs.base + n
	d.mu.Unlock()
}

func prepareReplicas(t Target, l plan.Load, requests int) (*replicaSet, error) {
	urls := t.Replicas
	if len(urls) < 2 {
		p, err := prepare(t, l, requests)
		if err != nil {
			return nil, err
		}
		return &replicaSet{prepared: [][]*stream.Prepared{p}}, nil
	}
	rs := &replicaSet{prepared: make([][]*stream.Prepared, len(urls)), balance: t.Balance, outstanding: make([]int, len(urls))}
	for i, u := range urls {
		rt := t
		rt.BaseURL = u
		p, err := prepare(rt, l, requests)
		if err != nil {
			return nil, err
		}
		rs.prepared[i] = p
	}
	return rs, nil
}

// prompts is the number of prompts prepared (PromptIndex's modulus).
func (rs *replicaSet) prompts() int { return len(rs.prepared[0]) }

// balanced reports whether requests are spread over several replicas.
func (rs *replicaSet) balanced() bool { return len(rs.prepared) > 1 }

// pick chooses the replica of request i and counts it in flight until
// done; -1 for a target of one address.
func (rs *replicaSet) pick(i int) int {
	if !rs.balanced() {
		return -1
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.picks = max(rs.picks, i+1)
	r := (rs.base + i) % len(rs.prepared)
	if rs.balance == BalanceLeastOutstanding {
		r = leastLoaded(rs.outstanding)
	}
	rs.outstanding[r]++
	return r
}

// done ends request of replica r's time in flight.
func (rs *replicaSet) done(r int) {
	if r < 0 {
		return
	}
	rs.mu.Lock()
	rs.outstanding[r]--
	rs.mu.Unlock()
}

// get is prompt p's request to replica r (-1: the one address).
func (rs *replicaSet) get(r, p int) *stream.Prepared { return rs.prepared[max(r, 0)][p] }

// tag is the record's replica field for replica r: nil for -1.
func replicaTag(r int) *int {
	if r < 0 {
		return nil
	}
	return &r
}

// warm pre-dials n connections for a wave against t: to its one address,
// or spread over its replicas (⌈n/N⌉ each) when the client balances.
func (d *Driver) warm(ctx context.Context, t Target, n int) {
	if len(t.Replicas) < 2 {
		_ = d.client.Warm(ctx, t.BaseURL, n)
		return
	}
	if w, ok := d.client.(interface {
		WarmEach(ctx context.Context, baseURLs []string, n int) error
	}); ok {
		_ = w.WarmEach(ctx, t.Replicas, (n+len(t.Replicas)-1)/len(t.Replicas))
		return
	}
	_ = d.client.Warm(ctx, t.Replicas[0], (n+len(t.Replicas)-1)/len(t.Replicas))
}

// leastLoaded is the replica with the fewest of counts (requests in flight,
// or sessions under way), the lowest index among equals.
func leastLoaded(counts []int) int {
	r := 0
	for j, n := range counts {
		if n < counts[r] {
			r = j
		}
	}
	return r
}
