package contract

import (
	"cmp"
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
// octave, 0.017 %), so two passes would be the rule.
//
// The second pass is mostly saved by windows chosen in the first: its
// first selectSample values are kept whole; the buckets where the
// summary's percentiles fall among them, selectMargin of the ranks either
// side, become windows, and from then on every value of the first pass in
// a window is kept too (the windows narrow as the count grows: choose). At the end of the first pass a wanted rank whose
// bucket lies in a window has every value of that bucket at hand (the
// window kept them all from the first value on; the counts say how many
// there are and which rank within them is wanted), so it is found without
// another pass; only a rank whose bucket lies outside every window (the
// population drifted from its first values, or the windows outgrew
// selectWindowMax) takes the passes above. A population of at most
// selectSample values is sorted whole. Either way the values found are
// those of the sorted population.
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

	// sample holds the first pass's values until the windows are chosen
	// (sampled); kept counts the values the windows hold.
	sample  []float64
	sampled bool
	windows []selectWindow
	kept    int
	// sampledAt is the count at which the windows were chosen, narrowAt
	// the count at which they are narrowed next.
	sampledAt, narrowAt int
	// budget, where not nil, is how many more values the sample and the
	// windows of every selector sharing it may hold; a selector that
	// would take it below zero gives its up (giveUp).
	budget *int
}

// selectWindow is a range of buckets of the first pass (the top
// selectWidth bits of a key, lo to hi inclusive) whose values are all kept.
type selectWindow struct {
	lo, hi uint64
	values []float64
}

// selectSample is how many values of the first pass are kept whole before
// the windows are chosen from them (0: no windows; a variable so that a
// test can choose), selectMargin the fraction of the ranks a window takes
// either side of a percentile, and selectWindowMax how many values the
// windows of one selector may keep before they are given up.
// selectBudget is how many values the selections of one Aggregator may
// hold together in their samples and windows (128 MB): a bundle of many
// populations of up to selectSample gaps would otherwise hold them all.
var (
	selectSample    = 1 << 20
	selectMargin    = 0.03
	selectWindowMax = 1 << 22
	selectBudget    = 1 << 24
)

// spend takes one value held from the budget.
func (s *selector) spend() {
	if s.budget != nil {
		if *s.budget--; *s.budget < 0 {
			s.giveUp()
		}
	}
}

// refund gives n values held back to the budget.
func (s *selector) refund(n int) {
	if s.budget != nil {
		*s.budget += n
	}
}

// giveUp drops the sample and the windows: the ranks are then found by
// the further passes.
func (s *selector) giveUp() {
	s.refund(len(s.sample) + s.kept)
	s.sample, s.windows, s.kept, s.sampled = nil, nil, 0, true
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
	return &selector{nodes: []*selectNode{{pages: map[uint64]*[1 << selectPage]int{}}}, found: map[int]float64{}, sampled: selectSample <= 0}
}

// add hands the selector one value of the current pass.
func (s *selector) add(v float64) {
	k := orderKey(v)
	if s.pass == 0 {
		s.n++
		switch {
		case !s.sampled:
			if s.sample == nil {
				s.sample = make([]float64, 0, min(selectSample, 1<<16))
			}
			s.sample = append(s.sample, v)
			s.spend()
		case len(s.windows) > 0:
			s.keep(v, k>>(64-selectWidth))
		}
		// The first pass counts by the root's buckets alone.
		s.nodes[0].countRoot(k >> (64 - selectWidth))
		if !s.sampled && len(s.sample) >= selectSample || len(s.windows) > 0 && s.n >= s.narrowAt {
			s.choose()
		}
		return
	}
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

// countRoot counts bucket d (a key's top selectWidth bits) in the root's
// pages, the last page used at hand.
func (nd *selectNode) countRoot(d uint64) {
	if idx := d >> selectPage; nd.last == nil || idx != nd.lastIdx {
		p := nd.pages[idx]
		if p == nil {
			p = new([1 << selectPage]int)
			nd.pages[idx] = p
		}
		nd.last, nd.lastIdx = p, idx
	}
	nd.last[d&(1<<selectPage-1)]++
}

// addGaps hands the selector the gaps between consecutive values of t, as
// add does each: the first pass once the windows are chosen counts them
// in one loop, with the root's page at hand.
func (s *selector) addGaps(t []float64) {
	if s.pass != 0 || !s.sampled {
		for i := 1; i < len(t); i++ {
			s.add(t[i] - t[i-1])
		}
		return
	}
	root := s.nodes[0]
	for i := 1; i < len(t); i++ {
		v := t[i] - t[i-1]
		d := orderKey(v) >> (64 - selectWidth)
		s.n++
		if len(s.windows) > 0 {
			s.keep(v, d)
		}
		root.countRoot(d)
		if len(s.windows) > 0 && s.n >= s.narrowAt {
			s.choose()
		}
	}
}

// choose sets the windows from the sample (the first pass's values so
// far, all counted in the root's buckets), and narrows them as the pass
// goes on (each time the values counted double): for each percentile of
// the summary, the buckets from the one holding the rank margin below it
// among the values counted so far to the one holding the rank margin
// above, joined where they meet, and, after the first time, only where
// they were windows before (a bucket added later would lack the values
// before it). The margin is selectMargin at the sample and shrinks as
// the square root of the values counted. The values kept that fall
// outside the new windows are dropped, and so is the sample.
func (s *selector) choose() {
	first := !s.sampled
	s.sampled = true
	if first {
		s.sampledAt = s.n
	}
	s.narrowAt = 2 * s.n
	margin := selectMargin * math.Sqrt(float64(s.sampledAt)/float64(s.n))
	var ranks []int
	for _, p := range summaryPs {
		ranks = append(ranks, int(math.Floor(float64(s.n-1)*max(0, p-margin))), int(math.Ceil(float64(s.n-1)*min(1, p+margin))))
	}
	b := bucketsOfRanks(s.nodes[0], ranks)
	var spans [][2]uint64
	for i := 0; i < len(b); i += 2 {
		spans = append(spans, [2]uint64{b[i], b[i+1]})
	}
	slices.SortFunc(spans, func(a, b [2]uint64) int { return cmp.Compare(a[0], b[0]) })
	var windows []selectWindow
	add := func(lo, hi uint64) {
		if n := len(windows); n > 0 && lo <= windows[n-1].hi+1 {
			windows[n-1].hi = max(windows[n-1].hi, hi)
			return
		}
		windows = append(windows, selectWindow{lo: lo, hi: hi})
	}
	for _, sp := range spans {
		if first {
			add(sp[0], sp[1])
			continue
		}
		for _, w := range s.windows { // in order, apart
			if lo, hi := max(sp[0], w.lo), min(sp[1], w.hi); lo <= hi {
				add(lo, hi)
			}
		}
	}
	if first {
		sample := s.sample
		s.refund(len(sample)) // kept again below, those in a window
		s.sample, s.windows, s.kept = nil, windows, 0
		for _, v := range sample {
			s.keep(v, orderKey(v)>>(64-selectWidth))
		}
		return
	}
	// Each new window lies inside one old one (old windows are apart):
	// the first new window inside an old one takes its values in place,
	// after the others have copied theirs.
	old := s.windows
	s.refund(s.kept) // less what the new windows keep, below
	s.windows, s.kept = windows, 0
	for i := len(windows) - 1; i >= 0; i-- {
		nw := &windows[i]
		j := 0
		for old[j].hi < nw.lo {
			j++
		}
		src := old[j].values
		var dst []float64
		if i == 0 || windows[i-1].hi < old[j].lo {
			dst = src[:0] // the first new window of old[j]: the others are done
			old[j].values = nil
		}
		for _, v := range src {
			if b := orderKey(v) >> (64 - selectWidth); b >= nw.lo && b <= nw.hi {
				dst = append(dst, v)
			}
		}
		nw.values = dst
		s.kept += len(dst)
	}
	s.refund(-s.kept)
}

// keep keeps v, of bucket b, in the window that holds b, if one does.
func (s *selector) keep(v float64, b uint64) {
	for i := range s.windows {
		if w := &s.windows[i]; b >= w.lo && b <= w.hi {
			w.values = append(w.values, v)
			if s.kept++; s.kept > selectWindowMax {
				s.giveUp() // too many: the passes find them
				return
			}
			s.spend()
			return
		}
	}
}

// bucketsOfRanks are the buckets of the root's first-pass counts that
// hold the values of ranks qs (0: the smallest) among those counted.
func bucketsOfRanks(root *selectNode, qs []int) []uint64 {
	idxs := make([]uint64, 0, len(root.pages))
	for i := range root.pages {
		idxs = append(idxs, i)
	}
	slices.Sort(idxs)
	out := make([]uint64, len(qs))
	for i, q := range qs {
		below := 0
		last := uint64(0)
	walk:
		for _, pi := range idxs {
			for slot, c := range root.pages[pi] {
				if c == 0 {
					continue
				}
				last = pi<<selectPage | uint64(slot)
				if q < below+c {
					break walk
				}
				below += c
			}
		}
		out[i] = last
	}
	return out
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
		if !s.sampled {
			// Every value is in the sample: sort it and index it.
			sort.Float64s(s.sample)
			for _, q := range s.ranks {
				s.found[q] = s.sample[q]
			}
			s.refund(len(s.sample))
			s.sample, s.sampled, s.nodes = nil, true, nil
		}
	}
	first := s.pass == 0
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
		for _, c := range nd.children(s.found) {
			if !first || !s.fromWindow(c) {
				next = append(next, c)
			}
		}
	}
	if first {
		s.refund(s.kept)
		s.windows, s.kept = nil, 0
	}
	s.nodes = next
	return len(s.nodes) > 0
}

// fromWindow finds the ranks of c, a bucket of the first pass, where a
// window kept every value of it: false where none did.
func (s *selector) fromWindow(c *selectNode) bool {
	for i := range s.windows {
		w := &s.windows[i]
		if c.prefix < w.lo || c.prefix > w.hi {
			continue
		}
		var vals []float64
		for _, v := range w.values {
			if orderKey(v)>>(64-selectWidth) == c.prefix {
				vals = append(vals, v)
			}
		}
		if len(vals) != c.count {
			return false // cannot be: the window saw every value
		}
		sort.Float64s(vals)
		for i, o := range c.offsets {
			s.found[c.ranks[i]] = vals[o]
		}
		return true
	}
	return false
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

// summaryRanks are the ranks a Percentiles summary of a population of n
// reads: its percentiles' (typeSevenRanks) and its tail bounds'
// (boundRanks). A bound's rank lies about 1.645·√(nq(1−q)) above its
// percentile's, inside the window choose sets around the percentile (its
// margin, in ranks, is over 80 times wider at every n with the default
// selectSample), so the bounds cost the selection no pass of their own.
func summaryRanks(n int) []int {
	return append(typeSevenRanks(summaryPs)(n), boundRanks(n)...)
}

// summary is Summarize of the population, once next has found
// summaryRanks.
func (s *selector) summary() Percentiles {
	p := Percentiles{N: s.n, P50: s.percentile(0.50), P90: s.percentile(0.90), P95: s.percentile(0.95), P99: s.percentile(0.99)}
	p.setBounds(func(rank int) float64 { return s.found[rank] })
	return p
}
