package contract

import (
	"math"
	"slices"
	"sort"
)

// selector finds chosen order statistics of a population of float64 values
// without holding the population: each pass over the values (the same
// values every pass, in any order) narrows every wanted rank to a range of
// bit patterns, and the last pass keeps only the values inside the ranges
// that hold a wanted rank. What it returns is exactly what sorting every
// value and indexing the sorted slice returns:
//
//   - a float64 maps to a uint64 key whose unsigned order is the numeric
//     order of the floats (orderKey), so "the value of rank q" is "the key
//     of rank q";
//   - the first pass counts the values by the top selectWidth bits of their
//     key; the wanted rank q falls in one of those buckets, and within it at
//     rank q minus the count of every bucket below;
//   - a later pass either counts the values of that bucket by their next
//     selectWidth bits (when it holds more than selectCollect values), or
//     keeps them, sorts them and indexes them; a bucket of all 64 bits
//     holds a single bit pattern, which is then the answer without keeping
//     anything.
//
// So at most ⌈64 / selectWidth⌉ + 1 passes are needed and memory is the
// counts of the buckets touched plus at most selectCollect values per
// wanted rank. Real latencies vary below a bucket's width (2^-12 of an
// octave, 0.017 %), so two passes are the rule.
//
// Negative zero counts as zero (orderKey maps both to one key; sort.Float64s
// orders the two arbitrarily, so a sorted copy would not decide between
// them either) and a NaN, which finite chunk times never produce, sorts
// first as sort.Float64s sorts it.
type selector struct {
	n     int
	ranks []int // the wanted ranks, set at the end of the first pass
	nodes []*selectNode
	found map[int]float64 // rank → value, once known
	pass  int
}

const (
	selectWidth = 24 // bits a pass counts by
	selectPage  = 12 // bits of a bucket index that pick a page
)

// selectCollect is how many values a bucket may hold and still be kept (a
// variable so that a test can force the deeper passes).
var selectCollect = 1 << 20

// selectNode is one range of keys that holds wanted ranks: the keys whose
// top plen bits are prefix.
type selectNode struct {
	prefix uint64
	plen   uint
	// offsets are the wanted ranks within the range (0: its smallest key)
	// and ranks the population ranks they are.
	offsets, ranks []int
	count          int
	collect        bool
	values         []float64
	pages          map[uint64]*[1 << selectPage]int
	lastIdx        uint64
	last           *[1 << selectPage]int
}

// orderKey maps v to a key whose unsigned order is v's numeric order.
func orderKey(v float64) uint64 {
	if v != v {
		return 0 // NaN first, as sort.Float64s puts it
	}
	if v == 0 {
		v = 0 // -0 is 0
	}
	b := math.Float64bits(v)
	if b>>63 != 0 {
		return ^b
	}
	return b | 1<<63
}

// fromKey is orderKey's inverse.
func fromKey(k uint64) float64 {
	if k>>63 != 0 {
		return math.Float64frombits(k &^ (1 << 63))
	}
	return math.Float64frombits(^k)
}

func newSelector() *selector {
	return &selector{nodes: []*selectNode{{pages: map[uint64]*[1 << selectPage]int{}}}, found: map[int]float64{}}
}

// add hands the selector one value of the current pass.
func (s *selector) add(v float64) {
	if s.pass == 0 {
		s.n++
	}
	k := orderKey(v)
	for _, nd := range s.nodes {
		if nd.plen > 0 && k>>(64-nd.plen) != nd.prefix {
			continue
		}
		if nd.collect {
			nd.values = append(nd.values, v)
			continue
		}
		w := min(selectWidth, 64-nd.plen)
		d := (k << nd.plen) >> (64 - w)
		idx := d >> selectPage
		if nd.last == nil || idx != nd.lastIdx {
			p := nd.pages[idx]
			if p == nil {
				p = new([1 << selectPage]int)
				nd.pages[idx] = p
			}
			nd.last, nd.lastIdx = p, idx
		}
		nd.last[d&(1<<selectPage-1)]++
	}
}

// next ends a pass; wanted names the ranks to find (used at the end of the
// first pass only, when the population's size is known). It reports
// whether another pass over the same values is needed.
func (s *selector) next(wanted func(n int) []int) bool {
	if s.pass == 0 {
		for _, q := range wanted(s.n) {
			if _, dup := s.found[q]; !dup && !slices.Contains(s.ranks, q) {
				s.ranks = append(s.ranks, q)
			}
		}
		sort.Ints(s.ranks)
		root := s.nodes[0]
		root.count, root.ranks = s.n, s.ranks
		root.offsets = slices.Clone(s.ranks)
		if len(s.ranks) == 0 {
			s.nodes = nil
		}
	}
	s.pass++
	var next []*selectNode
	for _, nd := range s.nodes {
		if nd.collect {
			sort.Float64s(nd.values)
			for i, o := range nd.offsets {
				s.found[nd.ranks[i]] = nd.values[o]
			}
			continue
		}
		next = append(next, nd.children(s.found)...)
	}
	s.nodes = next
	return len(s.nodes) > 0
}

// children are the ranges of the next pass: for each wanted offset, the
// bucket it falls in.
func (nd *selectNode) children(found map[int]float64) []*selectNode {
	w := min(selectWidth, 64-nd.plen)
	idxs := make([]uint64, 0, len(nd.pages))
	for i := range nd.pages {
		idxs = append(idxs, i)
	}
	slices.Sort(idxs)
	var out []*selectNode
	var cur *selectNode
	below, j := 0, 0
	for _, pi := range idxs {
		p := nd.pages[pi]
		for slot, c := range p {
			if c == 0 {
				continue
			}
			for j < len(nd.offsets) && nd.offsets[j] < below+c {
				d := pi<<selectPage | uint64(slot)
				prefix := nd.prefix<<w | d
				if cur == nil || cur.prefix != prefix {
					cur = &selectNode{prefix: prefix, plen: nd.plen + w, count: c, collect: c <= selectCollect}
					switch {
					case cur.plen >= 64:
					case cur.collect:
						cur.values = make([]float64, 0, c)
					default:
						cur.pages = map[uint64]*[1 << selectPage]int{}
					}
					out = append(out, cur)
				}
				cur.offsets = append(cur.offsets, nd.offsets[j]-below)
				cur.ranks = append(cur.ranks, nd.ranks[j])
				j++
			}
			below += c
		}
	}
	kept := out[:0]
	for _, c := range out {
		if c.plen >= 64 {
			// Every value of the range has this one bit pattern.
			for _, q := range c.ranks {
				found[q] = fromKey(c.prefix)
			}
			continue
		}
		kept = append(kept, c)
	}
	return kept
}

// typeSevenRanks are the ranks Percentile reads for ps in a population of
// n: floor((n−1)p) and the one after it.
func typeSevenRanks(ps []float64) func(n int) []int {
	return func(n int) []int {
		if n == 0 {
			return nil
		}
		var out []int
		for _, p := range ps {
			lo := int(math.Floor(float64(n-1) * p))
			if lo >= n-1 {
				out = append(out, n-1)
				continue
			}
			out = append(out, lo, lo+1)
		}
		return out
	}
}

// percentile is Percentile of the sorted population, from the selected
// ranks: the same arithmetic on the same order statistics.
func (s *selector) percentile(p float64) *float64 {
	n := s.n
	if n == 0 {
		return nil
	}
	h := float64(n-1) * p
	lo := int(math.Floor(h))
	if lo >= n-1 {
		v := s.found[n-1]
		return &v
	}
	a, b := s.found[lo], s.found[lo+1]
	v := a + (h-float64(lo))*(b-a)
	return &v
}

// summaryPs are the percentiles of a Percentiles summary.
var summaryPs = []float64{0.50, 0.90, 0.95, 0.99}

// summary is Summarize of the population.
func (s *selector) summary() Percentiles {
	return Percentiles{N: s.n, P50: s.percentile(0.50), P90: s.percentile(0.90), P95: s.percentile(0.95), P99: s.percentile(0.99)}
}
