package fit

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/sim/engine"
)

// Cold repeats: a repeat of a load whose median TTFT exceeds the warmest
// repeat's by both coldRepeatRatio and coldRepeatAbsS ran cold (a server
// that captures a CUDA graph, or allocates, the first time it meets a batch
// shape pays it in that repeat's first tokens); its records are left out of
// the fit.
const (
	coldRepeatRatio = 1.5
	coldRepeatAbsS  = 0.020
)

// warmRepeats returns the records of the load's warm repeats and, when it
// dropped any, a line saying which and why. It keeps every repeat of a
// load that ran once, and at least the warmest repeat. The warmest is the
// smallest per-repeat median TTFT: a warm-up cost only adds to a first
// token, so the smallest median is the one least bent by it. With two
// repeats a median across them cannot outvote a cold one (it is their
// mean), which is why this is a threshold against the warmest and not a
// median of the per-repeat medians.
func warmRepeats(label string, recs []contract.Record) ([]contract.Record, string) {
	byWave := map[int][]float64{}
	var waves []int
	for _, r := range recs {
		if !r.OK || r.FirstContentS == nil {
			continue
		}
		if _, ok := byWave[r.Wave]; !ok {
			waves = append(waves, r.Wave)
		}
		byWave[r.Wave] = append(byWave[r.Wave], *r.FirstContentS-r.StartS)
	}
	if len(waves) < 2 {
		return recs, ""
	}
	slices.Sort(waves)
	med := map[int]float64{}
	warmest := math.Inf(1)
	for _, w := range waves {
		med[w] = *contract.Median(slices.Clone(byWave[w]))
		warmest = min(warmest, med[w])
	}
	cold := map[int]bool{}
	var parts []string
	repeatOf := map[int]int{}
	for _, r := range recs {
		repeatOf[r.Wave] = r.Repeat
	}
	for _, w := range waves {
		if m := med[w]; m > coldRepeatRatio*warmest && m > warmest+coldRepeatAbsS {
			cold[w] = true
			parts = append(parts, fmt.Sprintf("repeat %d (median TTFT %.3f s)", repeatOf[w], m))
		}
	}
	if len(cold) == 0 {
		return recs, ""
	}
	var kept []contract.Record
	for _, r := range recs {
		if !cold[r.Wave] {
			kept = append(kept, r)
		}
	}
	return kept, fmt.Sprintf("cold repeats left out at %s: %s, against the warmest repeat's %.3f s (more than %.1f× it and %.0f ms above it: a first meeting with a batch shape, e.g. lazy CUDA-graph capture)",
		label, strings.Join(parts, ", "), warmest, coldRepeatRatio, 1000*coldRepeatAbsS)
}

// Occupancy curve: the decode step read from every inter-token gap of the
// fitted records, binned by how many of its wave's requests were streaming
// at the gap's midpoint.
const (
	// minGapsPerBin is the fewest gaps an occupancy needs to give a point.
	minGapsPerBin = 100
	// occupancyMiss is how far (relative) the per-load curve must miss an
	// occupancy's measured step for the fit to use the occupancy curve.
	occupancyMiss = 0.15
	// occupancyKeep: an interior point of the occupancy curve is kept only
	// where its neighbours' line misses it by more than this (relative).
	occupancyKeep = 0.03
)

// occupancySteps bins the inter-token gaps of the successful records (those
// with at least one chunk for nine tenths of their tokens: detokenizers
// that hold back a partial character send the odd chunk of two, whose gap
// the median outvotes) by the number of the wave's requests streaming (first
// content to end) at the gap's midpoint, capped at maxSeqs, and returns
// [occupancy, median gap] for every occupancy with minGapsPerBin gaps, made
// non-decreasing (pooled adjacent violators, weighted by gaps), with the
// gap counts.
func occupancySteps(recs []contract.Record, maxSeqs int) ([][2]float64, []int) {
	byWave := map[int][]contract.Record{}
	for _, r := range recs {
		if r.OK && r.FirstContentS != nil && r.EndS > *r.FirstContentS {
			byWave[r.Wave] = append(byWave[r.Wave], r)
		}
	}
	bins := map[int][]float64{}
	for _, rs := range byWave {
		type ev struct {
			t float64
			d int
		}
		evs := make([]ev, 0, 2*len(rs))
		for _, r := range rs {
			evs = append(evs, ev{*r.FirstContentS, 1}, ev{r.EndS, -1})
		}
		slices.SortFunc(evs, func(a, b ev) int { return cmp.Or(cmp.Compare(a.t, b.t), cmp.Compare(a.d, b.d)) })
		times := make([]float64, len(evs))
		count := make([]int, len(evs))
		c := 0
		for i, e := range evs {
			c += e.d
			times[i], count[i] = e.t, c
		}
		for _, r := range rs {
			if 10*len(r.ChunkTimesS) < 9*generated(r) {
				continue // many chunks of several tokens: a gap is not one step
			}
			for i := 1; i < len(r.ChunkTimesS); i++ {
				a, b := r.ChunkTimesS[i-1], r.ChunkTimesS[i]
				if !(b > a) {
					continue
				}
				k, _ := slices.BinarySearch(times, (a+b)/2)
				if k == 0 {
					continue
				}
				n := min(count[k-1], maxSeqs)
				if n >= 1 {
					bins[n] = append(bins[n], b-a)
				}
			}
		}
	}
	var pts [][2]float64
	var ns []int
	for n := 1; n <= maxSeqs; n++ {
		if g := bins[n]; len(g) >= minGapsPerBin {
			pts = append(pts, [2]float64{float64(n), *contract.Median(g)})
			ns = append(ns, len(g))
		}
	}
	// Pool adjacent violators: a step does not get cheaper with more
	// sequences; noise between neighbouring occupancies is averaged away.
	type block struct {
		lo, hi int
		v, w   float64
	}
	var blocks []block
	for i, p := range pts {
		blocks = append(blocks, block{i, i, p[1], float64(ns[i])})
		for len(blocks) > 1 && blocks[len(blocks)-2].v > blocks[len(blocks)-1].v {
			a, b := blocks[len(blocks)-2], blocks[len(blocks)-1]
			blocks = blocks[:len(blocks)-2]
			blocks = append(blocks, block{a.lo, b.hi, (a.v*a.w + b.v*b.w) / (a.w + b.w), a.w + b.w})
		}
	}
	for _, b := range blocks {
		for i := b.lo; i <= b.hi; i++ {
			pts[i][1] = round6(b.v)
		}
	}
	return pts, ns
}

// thinSteps keeps the first and last points of a piecewise-linear curve and
// every interior point the line between its kept neighbours misses by more
// than occupancyKeep.
func thinSteps(pts [][2]float64) [][2]float64 {
	if len(pts) <= 2 {
		return pts
	}
	out := [][2]float64{pts[0]}
	for i := 1; i < len(pts)-1; i++ {
		a, c := out[len(out)-1], pts[i+1]
		line := a[1] + (c[1]-a[1])*(pts[i][0]-a[0])/(c[0]-a[0])
		if math.Abs(line-pts[i][1]) > occupancyKeep*pts[i][1] {
			out = append(out, pts[i])
		}
	}
	return append(out, pts[len(pts)-1])
}

// occupancyAgree is how close (relative) the occupancy curve must come to
// every per-load point for its gaps to be read as the steps the per-load
// TPOTs time: where it does not (a simulator at a high time scale, whose
// wall-clock gaps carry the host's noise; prefills that lengthen the odd
// step), the per-load points stay.
const occupancyAgree = 0.05

// worstMiss is the occupancy strictly between two of the curve's points
// that the curve misses most, relative to the measured step there, and by
// how much; 0 where the measured steps disagree with the curve's own points
// by more than occupancyAgree (the gaps do not time the same steps).
func worstMiss(curve, measured [][2]float64) (float64, float64, float64) {
	p := &engine.Profile{DecodeStepS: curve}
	m := &engine.Profile{DecodeStepS: measured}
	for _, c := range curve {
		if c[0] < measured[0][0] || c[0] > measured[len(measured)-1][0] {
			return 0, 0, 0 // the gaps do not reach this point
		}
		if v := m.DecodeS(c[0]); math.Abs(v-c[1]) > occupancyAgree*c[1] {
			return 0, 0, 0
		}
	}
	worst, at, model := 0.0, 0.0, 0.0
	for _, m := range measured {
		if m[0] <= curve[0][0] || m[0] >= curve[len(curve)-1][0] || slices.ContainsFunc(curve, func(c [2]float64) bool { return c[0] == m[0] }) {
			continue
		}
		s := p.DecodeS(m[0])
		if d := math.Abs(s-m[1]) / m[1]; d > worst {
			worst, at, model = d, m[0], s
		}
	}
	return worst, at, model
}

// occupancyAt is the measured step at occupancy n of the curve.
func occupancyAt(pts [][2]float64, n float64) float64 {
	for _, p := range pts {
		if p[0] == n {
			return p[1]
		}
	}
	return 0
}

// formatSteps writes decode points as "batch: seconds" pairs.
func formatSteps(pts [][2]float64) string {
	parts := make([]string, len(pts))
	for i, p := range pts {
		parts[i] = fmt.Sprintf("%g: %.4f s", p[0], p[1])
	}
	return strings.Join(parts, ", ")
}
