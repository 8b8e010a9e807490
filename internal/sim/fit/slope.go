package fit

import (
	"fmt"
	"math"
	"slices"

	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/sim/engine"
)

// minVaried is the fewest requests, and spread (largest ÷ smallest x),
// for which a slope is fitted.
const (
	minVariedN      = 8
	minVariedSpread = 1.5
	// minSlopeT and minSlopeEffect: a slope is fitted when its t-statistic
	// is at least minSlopeT and it moves y by at least minSlopeEffect of
	// y's median over the range of x.
	minSlopeT      = 3
	minSlopeEffect = 0.05
)

// slopeOf is the least-squares slope of y on x over the records xy gives
// a point for, when x varies enough (minVariedN points, largest ÷
// smallest at least minVariedSpread); 0 and why not otherwise (or when
// the slope is negative).
func slopeOf(recs []contract.Record, xy func(contract.Record) (float64, float64, bool)) (float64, string) {
	var xs, ys []float64
	for _, r := range recs {
		if x, y, ok := xy(r); ok {
			xs, ys = append(xs, x), append(ys, y)
		}
	}
	if len(xs) < minVariedN {
		return 0, fmt.Sprintf("%d requests, too few to fit a slope", len(xs))
	}
	lo, hi := slices.Min(xs), slices.Max(xs)
	if !(lo > 0) || hi < minVariedSpread*lo {
		return 0, fmt.Sprintf("one length (%g to %g over %d requests)", lo, hi, len(xs))
	}
	mx, my := 0.0, 0.0
	for i := range xs {
		mx += xs[i]
		my += ys[i]
	}
	mx /= float64(len(xs))
	my /= float64(len(xs))
	var sxy, sxx float64
	for i := range xs {
		sxy += (xs[i] - mx) * (ys[i] - my)
		sxx += (xs[i] - mx) * (xs[i] - mx)
	}
	slope := sxy / sxx
	if !(slope > 0) || !finite(slope) {
		return 0, fmt.Sprintf("no positive slope over %d requests of %g to %g", len(xs), lo, hi)
	}
	// The slope must stand out of the scatter (t ≥ minSlopeT) and matter
	// (it moves y by at least minSlopeEffect of its median over x's range).
	rss := 0.0
	for i := range xs {
		d := ys[i] - my - slope*(xs[i]-mx)
		rss += d * d
	}
	se := math.Sqrt(rss / float64(len(xs)-2) / sxx)
	if se > 0 && slope/se < minSlopeT {
		return 0, fmt.Sprintf("a slope of %.3g not told from the scatter (t = %.1f) over %d requests of %g to %g", slope, slope/se, len(xs), lo, hi)
	}
	ys2 := slices.Clone(ys)
	if med := *contract.Median(ys2); slope*(hi-lo) < minSlopeEffect*math.Abs(med) {
		return 0, fmt.Sprintf("a slope of %.3g too small to matter over %d requests of %g to %g", slope, len(xs), lo, hi)
	}
	return slope, fmt.Sprintf("%d (%g to %g, t = %.1f)", len(xs), lo, hi, slope/math.Max(se, 1e-300))
}

// fitJitter is the relative spread of the inter-token gaps of the point's
// successful requests: the standard deviation of the gaps between their
// 5th and 95th percentiles, ÷ 0.9 (what trimming leaves of the model's
// uniform draw), over the median gap.
func fitJitter(pt fitPoint) (float64, string) {
	var gaps []float64
	for _, r := range pt.recs {
		if !r.OK {
			continue
		}
		for i := 1; i < len(r.ChunkTimesS); i++ {
			if d := r.ChunkTimesS[i] - r.ChunkTimesS[i-1]; d > 0 {
				gaps = append(gaps, d)
			}
		}
	}
	if len(gaps) < 20 {
		return 0, fmt.Sprintf("0: %d inter-token gaps at %s, too few", len(gaps), pt.label())
	}
	slices.Sort(gaps)
	lo, hi := gaps[len(gaps)*5/100], gaps[len(gaps)*95/100]
	var kept []float64
	for _, g := range gaps {
		if g >= lo && g <= hi {
			kept = append(kept, g)
		}
	}
	m := 0.0
	for _, g := range kept {
		m += g
	}
	m /= float64(len(kept))
	v := 0.0
	for _, g := range kept {
		v += (g - m) * (g - m)
	}
	sd := math.Sqrt(v/float64(len(kept))) / 0.9
	med := *contract.Median(gaps)
	j := min(engine.MaxStepJitter, round6(sd/med))
	return j, fmt.Sprintf("the spread of the %d inter-token gaps at %s (trimmed standard deviation %.4f s ÷ 0.9 over the median %.4f s)", len(gaps), pt.label(), sd, med)
}

// round9 rounds a per-token cost to the nanosecond.
func round9(x float64) float64 { return math.Round(x*1e9) / 1e9 }

// round6 rounds a latency to the microsecond, so profiles read cleanly.
func round6(x float64) float64 { return math.Round(x*1e6) / 1e6 }

// finite reports whether v is a usable number.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
