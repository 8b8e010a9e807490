package sim

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
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
	p := &Profile{DecodeStepS: curve}
	m := &Profile{DecodeStepS: measured}
	for _, c := range curve {
		if c[0] < measured[0][0] || c[0] > measured[len(measured)-1][0] {
			return 0, 0, 0 // the gaps do not reach this point
		}
		if v := m.decodeS(c[0]); math.Abs(v-c[1]) > occupancyAgree*c[1] {
			return 0, 0, 0
		}
	}
	worst, at, model := 0.0, 0.0, 0.0
	for _, m := range measured {
		if m[0] <= curve[0][0] || m[0] >= curve[len(curve)-1][0] || slices.ContainsFunc(curve, func(c [2]float64) bool { return c[0] == m[0] }) {
			continue
		}
		s := p.decodeS(m[0])
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

// fitBatchTokens is the per-step token budget assumed when the launch argv
// does not say one: transformers' continuous batching caps its
// max_batch_tokens at 8192 by default, as vLLM's chunked prefill often
// runs.
const fitBatchTokens = 8192

// argvBatchTokens reads a per-step token budget from a launch argv: vLLM's
// --max-num-batched-tokens, the batching reference server's
// --max-batch-tokens, or rehearse sim's --max-num-batched-tokens.
func argvBatchTokens(argv []string) (int, string) {
	for _, flag := range []string{"--max-num-batched-tokens", "--max-batch-tokens"} {
		if n, ok := argvInt(argv, flag); ok && n > 0 {
			return n, "from the launch argv's " + flag
		}
	}
	return 0, ""
}

// fitStaggeredPrefill reads the TTFT growth between the lowest and the
// highest fitted closed waves as prefill instead of a frontend queue, where
// the highest wave's prompts do not fit one step's token budget: its
// first tokens then come in groups, one per prefill step, and the same
// prefill slows every decode step it shares, which a frontend queue does
// not. The prefill cost per token is the one whose predicted median TTFT
// of the highest wave (the bundle's prompts through this engine) is the
// measured one, found by bisection (per-load decode points less the
// prefill their steps shared, as the fit does with a prefill slope); the
// request overhead is what is left
// of the lowest load's first token after one step and its prompt's
// prefill. Where the prompts fit one step, the frontend stays.
func fitStaggeredPrefill(res *bundle.Results, server *bundle.Server, f *Fit, p *Profile, low fitPoint, closedPts []fitPoint, decodeAt func(perTok float64) [][2]float64, tk Counter) error {
	high := closedPts[len(closedPts)-1]
	budget, how := argvBatchTokens(server.LaunchArgv)
	if budget == 0 {
		budget, how = fitBatchTokens, fmt.Sprintf("assumed (the launch argv says no per-step budget; %d is transformers' default cap)", fitBatchTokens)
	}
	medianPrompt := func(pt fitPoint) float64 {
		var xs []float64
		for _, r := range pt.recs {
			if n := promptTokensOf(r); r.OK && n >= 0 {
				xs = append(xs, float64(n))
			}
		}
		if len(xs) == 0 {
			return 0
		}
		return *contract.Median(xs)
	}
	promptHigh, promptLow := medianPrompt(high), medianPrompt(low)
	if promptHigh*float64(high.concurrency) <= float64(budget) {
		return nil // one prefill step holds the wave: the growth is a frontend's
	}
	wl, _, err := WorkloadOf(res)
	if err != nil {
		return err
	}
	wl.Concurrencies, wl.Repeats = []int{high.concurrency}, 1
	q := *p
	q.Name = "fit" // Predict validates it; the name is set later
	q.FrontendSPerRequest, q.MaxNumBatchedTokens = 0, budget
	overhead := func(perTok float64) float64 { return max(0, low.ttftLessTPO-perTok*promptLow) }
	medianTTFT := func(perTok float64) (float64, error) {
		q.PrefillPerTokenS, q.RequestOverheadS, q.DecodeStepS = perTok, overhead(perTok), decodeAt(perTok)
		pr, err := Predict(&q, wl, PredictOptions{Server: server.Name, Tokenizer: tk})
		if err != nil {
			return 0, err
		}
		var ttft []float64
		for _, r := range pr.Records {
			if r.OK && r.FirstContentS != nil {
				ttft = append(ttft, *r.FirstContentS-r.StartS)
			}
		}
		if 2*len(ttft) <= len(pr.Records) {
			return math.Inf(1), nil // most time out before a first token: too slow
		}
		return *contract.Median(ttft), nil
	}
	lo, hi := 0.0, 1e-3
	if t, err := medianTTFT(lo); err != nil {
		return err
	} else if t >= high.ttftS {
		return nil // no prefill cost is needed to reach it
	}
	if t, err := medianTTFT(hi); err != nil {
		return err
	} else if t < high.ttftS {
		return nil
	}
	for range 40 {
		mid := (lo + hi) / 2
		t, err := medianTTFT(mid)
		if err != nil {
			return err
		}
		if t < high.ttftS {
			lo = mid
		} else {
			hi = mid
		}
	}
	perTok := round9((lo + hi) / 2)
	// Keep it only where it predicts the fitted closed waves' goodput
	// better than the frontend does: both models meet the highest wave's
	// median TTFT, and the goodput tells a prefill that slows the decode
	// steps it shares from a queue before the engine.
	q.PrefillPerTokenS, q.RequestOverheadS, q.DecodeStepS = perTok, round6(overhead(perTok)), decodeAt(perTok)
	var fitted []int
	for _, pt := range closedPts {
		fitted = append(fitted, pt.concurrency)
	}
	errFrontend, err := goodputMiss(res, server.Name, closedPts, p, wl, fitted, tk)
	if err != nil {
		return err
	}
	errPrefill, err := goodputMiss(res, server.Name, closedPts, &q, wl, fitted, tk)
	if err != nil {
		return err
	}
	if errPrefill >= errFrontend {
		f.Derivation = append(f.Derivation, fmt.Sprintf("staggered prefill not used: the %s wave's prompts (median %g tokens × %d) overflow one step's budget of %d tokens, but its TTFT growth read as prefill (%.4g s per token, no frontend) predicts the fitted closed waves' goodput worse (mean |error| %.1f %%) than the frontend queue (%.1f %%)", high.label(), promptHigh, high.concurrency, budget, perTok, 100*errPrefill, 100*errFrontend))
		return nil
	}
	p.FrontendSPerRequest, p.MaxNumBatchedTokens, p.PrefillPerTokenS, p.DecodeStepS = 0, budget, perTok, q.DecodeStepS
	p.RequestOverheadS = round6(overhead(perTok))
	// The frontend, overhead and prefill lines of the per-load fit are
	// superseded.
	f.Derivation = slices.DeleteFunc(f.Derivation, func(s string) bool {
		return strings.HasPrefix(s, "frontend:") || strings.HasPrefix(s, "request overhead:") || strings.HasPrefix(s, "prefill: 0")
	})
	f.Unexplained = slices.DeleteFunc(f.Unexplained, func(s string) bool { return strings.Contains(s, "frontend slot") })
	f.Derivation = append(f.Derivation,
		fmt.Sprintf("staggered prefill: the %s wave's prompts (median %g tokens × %d) do not fit one step's budget of %d tokens %s, so its first tokens come in groups, one per prefill step: its TTFT growth is read as prefill, not a frontend queue (frontend 0)", high.label(), promptHigh, high.concurrency, budget, how),
		fmt.Sprintf("prefill per token: %.4g s, the cost whose predicted median TTFT of the %s wave (this engine, the bundle's prompts) is the measured %.4f s (bisection); it predicts the fitted closed waves' goodput with a mean |error| of %.1f %% against the frontend queue's %.1f %%", perTok, high.label(), high.ttftS, 100*errPrefill, 100*errFrontend),
		fmt.Sprintf("decode step: %s (where they are per-load points, each load's TPOT less the prefill of the other requests whose first token came while it streamed)", formatSteps(p.DecodeStepS)),
		fmt.Sprintf("request overhead: %.4f s = median of TTFT − TPOT over the %d successful requests at %s, less the median prompt's prefill (%.4f s)", p.RequestOverheadS, low.ok, low.label(), perTok*promptLow))
	return nil
}

// goodputMiss is the mean relative error of the profile's predicted median
// goodput at the fitted closed concurrencies against the fitted records'
// (their warm repeats, counted in generated tokens).
func goodputMiss(res *bundle.Results, server string, closedPts []fitPoint, p *Profile, wl ClosedWorkload, fitted []int, tk Counter) (float64, error) {
	w := wl
	w.Concurrencies, w.Repeats = fitted, 1
	q := *p
	if q.Name == "" {
		q.Name = "fit"
	}
	pr, err := Predict(&q, w, PredictOptions{Server: server, Tokenizer: tk})
	if err != nil {
		return 0, err
	}
	predicted := map[int]float64{}
	for _, a := range pr.Aggregates {
		if a.Goodput.Median != nil {
			predicted[a.Concurrency] = *a.Goodput.Median
		}
	}
	sum, n := 0.0, 0
	for _, pt := range closedPts {
		var recs []contract.Record
		ids := map[int]bool{}
		for _, r := range pt.recs {
			recs = append(recs, r)
			ids[r.Wave] = true
		}
		var waves []contract.Wave
		for _, wv := range res.Waves {
			if ids[wv.ID] {
				waves = append(waves, wv)
			}
		}
		for _, a := range contract.Aggregates(waves, GeneratedCounts(recs), []string{server}, "") {
			if a.Mode == contract.ModeClosed && a.Concurrency == pt.concurrency && a.Goodput.Median != nil && *a.Goodput.Median > 0 {
				if v, ok := predicted[pt.concurrency]; ok {
					sum += math.Abs(v-*a.Goodput.Median) / *a.Goodput.Median
					n++
				}
			}
		}
	}
	if n == 0 {
		return math.Inf(1), nil
	}
	return sum / float64(n), nil
}
