package bundle

import (
	"fmt"
	"slices"

	"github.com/rehearse/rehearse/internal/contract"
)

// planCheck checks each wave's records against what the wave planned
// (SPEC §1, package drive), as the records go past once, in any order:
//
//   - a closed wave (recorded, warm-up or mechanism check alike) sends one
//     request per client 0 … concurrency−1: each client has exactly one
//     record (of a session, one first turn; its later turns are
//     sessionRuns');
//   - an open wave's request i is record client i (an arrival; of a
//     session, its first turn): the indices are distinct, with no gap up
//     to the last one sent;
//   - a sustained wave's client is one of its concurrency, and its
//     records are the count its plan bounds it by, where a count alone
//     does (workload.sustained: num_requests, warmup_requests for its
//     warm-up wave; not a capacity probe, which stops when resolved).
//
// A worker's segment of a split plan (provenance.worker) plans its share
// of each wave: the units k with k mod count = index (plan.Share).
// A wave that stopped early (its stopped field: interrupted, or cut where
// the journal ends) may lack the records past its cut, but never holds a
// request twice. Its memory is a bit per planned index, bounded by the
// records seen (planBits); an index beyond that bound is kept in a map.
type planCheck struct {
	waves map[int]*wavePlan
	wl    *Workload
	// last is the wave of the record before (records of a wave mostly
	// come together).
	last *wavePlan
	// segIndex of segCount is the bundle's segment of a split plan (0 of
	// 1: the whole plan).
	segIndex, segCount int
	// words is the bitset words held; records the records seen.
	words, records int
	probs          []Problem
}

// wavePlan is one wave's tally.
type wavePlan struct {
	w     contract.Wave
	index int // in results.json's waves
	// n counts the wave's records, distinct its distinct units (clients
	// of a closed wave, requests of an open one; renumbered, unit).
	n, distinct int
	max         int // the largest unit, -1 for none
	// placed counts a sustained wave's records that carry their place in
	// its send order (addSustained).
	placed int
	// segIndex of segCount is the wave's segment: the bundle's, or the
	// whole wave (0 of 1) for a mechanism check, which worker 0 runs
	// whole, alone.
	segIndex, segCount int
	seen               []uint64
	far                map[int]bool // indices at or past len(seen)·64
}

// planBits is the bitset bits planCheck may hold beyond one per record
// seen: enough for any wave whose records come in any order.
const planBits = 1 << 20

// newPlanCheck checks the records of waves; worker, where not nil, is the
// segment of a split plan the bundle holds (SPEC §10): its units are
// those k with k mod count = index, renumbered k div count.
func newPlanCheck(waves []contract.Wave, wl *Workload, worker *Worker) *planCheck {
	p := &planCheck{waves: make(map[int]*wavePlan, len(waves)), wl: wl, segCount: 1}
	if worker != nil && worker.Count > 1 && worker.Index >= 0 && worker.Index < worker.Count {
		p.segIndex, p.segCount = worker.Index, worker.Count
	}
	for i, w := range waves {
		if _, dup := p.waves[w.ID]; !dup {
			wp := &wavePlan{w: w, index: i, max: -1, segIndex: p.segIndex, segCount: p.segCount}
			if w.Kind == contract.KindMechanismCheck {
				wp.segIndex, wp.segCount = 0, 1
			}
			p.waves[w.ID] = wp
		}
	}
	return p
}

// share is how many of units 0 … n−1 are the wave's in this bundle.
func (wp *wavePlan) share(n int) int {
	return max(0, (n-wp.segIndex+wp.segCount-1)/wp.segCount)
}

// unit is the index k of the wave's units in this bundle renumbered (k
// itself for a whole wave), false where k is another worker's.
func (wp *wavePlan) unit(k int) (int, bool) {
	return k / wp.segCount, k%wp.segCount == wp.segIndex
}

// global is unit u of the wave's units in the whole plan's numbering.
func (wp *wavePlan) global(u int) int { return u*wp.segCount + wp.segIndex }

// add takes the i-th record.
func (p *planCheck) add(i int, rec *contract.Record) {
	p.records++
	wp := p.last
	if wp == nil || wp.w.ID != rec.Wave {
		if wp = p.waves[rec.Wave]; wp == nil {
			return // checkRecord reports a record of no wave
		}
		p.last = wp
	}
	wp.n++
	if wp.w.Mode == contract.ModeSustained {
		p.addSustained(wp, i, rec) // every turn of a session takes a place
	}
	if rec.Turn > 1 || rec.Client < 0 {
		return // a session's later turn; a negative client is checkRecord's
	}
	w := &wp.w
	bad := func(format string, args ...any) {
		p.probs = append(p.probs, Problem{File: ResultsFile, Server: rec.Server, Load: waveLabel(*w),
			Field: fmt.Sprintf("records[%d].client", i), Msg: fmt.Sprintf(format, args...)})
	}
	if w.Mode != contract.ModeOpen && rec.Client >= w.Concurrency {
		bad("%d is not one of the wave's %d clients", rec.Client, w.Concurrency)
		return
	}
	u, mine := wp.unit(rec.Client)
	if !mine {
		bad("%d is not worker %d's (of %d workers, its units are those k with k mod %d = %d)", rec.Client, wp.segIndex, wp.segCount, wp.segCount, wp.segIndex)
		return
	}
	if w.Mode == contract.ModeSustained {
		return // its requests are addSustained's
	}
	if !p.mark(wp, u) {
		if contract.IsClosed(w.Mode) {
			bad("%d sent a second request in a closed wave (one per client)", rec.Client)
		} else {
			bad("request %d of the wave is recorded twice", rec.Client)
		}
		return
	}
	wp.distinct++
	wp.max = max(wp.max, u)
}

// addSustained takes the i-th record, of sustained wave wp: its clients
// send many requests each, so the count is checked (missing) and, where
// the records carry their place in the wave's send order (request) and the
// bundle is one process's whole plan, each place is recorded once.
func (p *planCheck) addSustained(wp *wavePlan, i int, rec *contract.Record) {
	if rec.Request == nil || rec.Worker != nil || wp.segCount != 1 || *rec.Request < 0 {
		return
	}
	wp.placed++
	if !p.mark(wp, *rec.Request) {
		p.probs = append(p.probs, Problem{File: ResultsFile, Server: rec.Server, Load: waveLabel(wp.w),
			Field: fmt.Sprintf("records[%d].request", i), Msg: fmt.Sprintf("request %d of the wave is recorded twice", *rec.Request)})
		return
	}
	wp.distinct++
	wp.max = max(wp.max, *rec.Request)
}

// mark sets index k of wp and reports whether it was unset. An index
// past the bitset goes to the map where growing the bitset would pass
// planBits (coverage only grows, so an index is in one place or the
// other, the map consulted first).
func (p *planCheck) mark(wp *wavePlan, k int) bool {
	if wp.far != nil && wp.far[k] {
		return false
	}
	if word := k / 64; word >= len(wp.seen) {
		grow := max(word+1, 2*len(wp.seen)) - len(wp.seen)
		limit := (planBits + p.records) / 64
		if p.words+grow > limit {
			grow = word + 1 - len(wp.seen)
		}
		if p.words+grow > limit {
			if wp.far == nil {
				wp.far = map[int]bool{}
			}
			wp.far[k] = true
			return true
		}
		p.words += grow
		wp.seen = append(wp.seen, make([]uint64, grow)...)
	}
	bit := uint64(1) << (k % 64)
	if wp.seen[k/64]&bit != 0 {
		return false
	}
	wp.seen[k/64] |= bit
	return true
}

// problems ends the check: the records' problems, then each wave's that
// lacks a record it planned, in the order of the waves.
func (p *planCheck) problems() []Problem {
	ws := make([]*wavePlan, 0, len(p.waves))
	for _, wp := range p.waves {
		ws = append(ws, wp)
	}
	slices.SortFunc(ws, func(a, b *wavePlan) int { return a.index - b.index })
	probs := p.probs
	for _, wp := range ws {
		if msg := p.missing(wp); msg != "" {
			w := wp.w
			probs = append(probs, Problem{File: ResultsFile, Server: w.Server, Load: waveLabel(w),
				Field: fmt.Sprintf("waves[%d]", wp.index), Msg: msg})
		}
	}
	return probs
}

// missing says which planned records wp lacks ("" where none, or where
// its wave stopped early).
func (p *planCheck) missing(wp *wavePlan) string {
	w := &wp.w
	if w.Stopped != "" {
		return ""
	}
	switch w.Mode {
	case contract.ModeSustained:
		want := p.sustainedCount(wp)
		if want > 0 && wp.n != want {
			return fmt.Sprintf("%d records, but the wave was to send %d requests and was not stopped", wp.n, want)
		}
		if wp.placed > 0 && wp.distinct != wp.max+1 {
			return fmt.Sprintf("requests 0 to %d sent, but request %d has no record (%d missing) and the wave was not stopped",
				wp.max, wp.firstUnset(), wp.max+1-wp.distinct)
		}
	case contract.ModeOpen:
		if wp.distinct != wp.max+1 {
			return fmt.Sprintf("requests %d to %d sent, but request %d has no record (%d missing) and the wave was not stopped",
				wp.global(0), wp.global(wp.max), wp.global(wp.firstUnset()), wp.max+1-wp.distinct)
		}
	default:
		if want := wp.share(w.Concurrency); wp.distinct != want {
			return fmt.Sprintf("%d of its %d clients have a record (client %d has none) and the wave was not stopped",
				wp.distinct, want, wp.global(wp.firstUnset()))
		}
	}
	return ""
}

// sustainedCount is the records a sustained wave plans when a count alone
// bounds it, 0 where none does.
func (p *planCheck) sustainedCount(wp *wavePlan) int {
	w, s := &wp.w, p.wl.Sustained
	if s == nil || p.wl.Capacity != nil || w.Probe != "" || s.DurationS > 0 {
		return 0
	}
	if w.Kind == contract.KindWarmup {
		return wp.share(s.WarmupRequests)
	}
	return wp.share(s.WarmupRequests+s.NumRequests) - wp.share(s.WarmupRequests)
}

// firstUnset is the smallest index wp has no record of.
func (wp *wavePlan) firstUnset() int {
	for k := 0; ; k++ {
		if !wp.far[k] && (k/64 >= len(wp.seen) || wp.seen[k/64]&(1<<(k%64)) == 0) {
			return k
		}
	}
}
