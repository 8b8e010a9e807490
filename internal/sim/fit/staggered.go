package fit

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/sim/engine"
	"github.com/rehearse/rehearse/internal/sim/predict"
)

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

// staggeredPrefill reads the TTFT growth between the lowest and the
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
func (ft *fitter) staggeredPrefill() error {
	low, closedPts, server := ft.low, ft.closedPts, ft.server
	high := closedPts[len(closedPts)-1]
	budget, how := argvBatchTokens(server.LaunchArgv)
	if budget == 0 {
		budget, how = fitBatchTokens, fmt.Sprintf("assumed (the launch argv says no per-step budget; %d is transformers' default cap)", fitBatchTokens)
	}
	promptHigh, promptLow := medianPrompt(high), medianPrompt(low)
	if promptHigh*float64(high.concurrency) <= float64(budget) {
		return nil // one prefill step holds the wave: the growth is a frontend's
	}
	wl, _, err := predict.ClosedOf(ft.res)
	if err != nil {
		return err
	}
	wl.Concurrencies, wl.Repeats = []int{high.concurrency}, 1
	q := *ft.p
	q.Name = "fit" // Closed validates it; the name is set later
	q.FrontendSPerRequest, q.MaxNumBatchedTokens = 0, budget
	overhead := func(perTok float64) float64 { return max(0, low.ttftLessTPO-perTok*promptLow) }
	perTok, found, err := ft.bisectPrefill(&q, wl, high, overhead)
	if err != nil || !found {
		return err
	}
	// Keep it only where it predicts the fitted closed waves' goodput
	// better than the frontend does: both models meet the highest wave's
	// median TTFT, and the goodput tells a prefill that slows the decode
	// steps it shares from a queue before the engine.
	q.PrefillPerTokenS, q.RequestOverheadS, q.DecodeStepS = perTok, round6(overhead(perTok)), ft.decodeAt(perTok)
	var fitted []int
	for _, pt := range closedPts {
		fitted = append(fitted, pt.concurrency)
	}
	errFrontend, err := goodputMiss(ft.res, server.Name, closedPts, ft.p, wl, fitted, ft.o.Tokenizer)
	if err != nil {
		return err
	}
	errPrefill, err := goodputMiss(ft.res, server.Name, closedPts, &q, wl, fitted, ft.o.Tokenizer)
	if err != nil {
		return err
	}
	if errPrefill >= errFrontend {
		ft.note("staggered prefill not used: the %s wave's prompts (median %g tokens × %d) overflow one step's budget of %d tokens, but its TTFT growth read as prefill (%.4g s per token, no frontend) predicts the fitted closed waves' goodput worse (mean |error| %.1f %%) than the frontend queue (%.1f %%)", high.label(), promptHigh, high.concurrency, budget, perTok, 100*errPrefill, 100*errFrontend)
		return nil
	}
	p, f := ft.p, ft.f
	p.FrontendSPerRequest, p.MaxNumBatchedTokens, p.PrefillPerTokenS, p.DecodeStepS = 0, budget, perTok, q.DecodeStepS
	p.RequestOverheadS = round6(overhead(perTok))
	// The frontend, overhead and prefill lines of the per-load fit are
	// superseded.
	f.Derivation = slices.DeleteFunc(f.Derivation, func(s string) bool {
		return strings.HasPrefix(s, "frontend:") || strings.HasPrefix(s, "request overhead:") || strings.HasPrefix(s, "prefill: 0")
	})
	f.Unexplained = slices.DeleteFunc(f.Unexplained, func(s string) bool { return strings.Contains(s, "frontend slot") })
	ft.note("staggered prefill: the %s wave's prompts (median %g tokens × %d) do not fit one step's budget of %d tokens %s, so its first tokens come in groups, one per prefill step: its TTFT growth is read as prefill, not a frontend queue (frontend 0)", high.label(), promptHigh, high.concurrency, budget, how)
	ft.note("prefill per token: %.4g s, the cost whose predicted median TTFT of the %s wave (this engine, the bundle's prompts) is the measured %.4f s (bisection); it predicts the fitted closed waves' goodput with a mean |error| of %.1f %% against the frontend queue's %.1f %%", perTok, high.label(), high.ttftS, 100*errPrefill, 100*errFrontend)
	ft.note("decode step: %s (where they are per-load points, each load's TPOT less the prefill of the other requests whose first token came while it streamed)", formatSteps(p.DecodeStepS))
	ft.note("request overhead: %.4f s = median of TTFT − TPOT over the %d successful requests at %s, less the median prompt's prefill (%.4f s)", p.RequestOverheadS, low.ok, low.label(), perTok*promptLow)
	return nil
}

// bisectPrefill finds the prefill cost per token whose predicted median
// TTFT of the high wave (wl, through q with no frontend, the request
// overhead overhead leaves and the decode points decodeAt gives) is the
// measured one, by bisection between 0 and 1 ms; found is false where no
// cost in that range is needed or enough.
func (ft *fitter) bisectPrefill(q *engine.Profile, wl predict.ClosedWorkload, high fitPoint, overhead func(float64) float64) (perTok float64, found bool, err error) {
	medianTTFT := func(perTok float64) (float64, error) {
		q.PrefillPerTokenS, q.RequestOverheadS, q.DecodeStepS = perTok, overhead(perTok), ft.decodeAt(perTok)
		pr, err := predict.Closed(q, wl, predict.Options{Server: ft.server.Name, Tokenizer: ft.o.Tokenizer})
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
	if t, err := medianTTFT(lo); err != nil || t >= high.ttftS {
		return 0, false, err // no prefill cost is needed to reach it
	}
	if t, err := medianTTFT(hi); err != nil || t < high.ttftS {
		return 0, false, err
	}
	for range 40 {
		mid := (lo + hi) / 2
		t, err := medianTTFT(mid)
		if err != nil {
			return 0, false, err
		}
		if t < high.ttftS {
			lo = mid
		} else {
			hi = mid
		}
	}
	return round9((lo + hi) / 2), true, nil
}

// medianPrompt is the median prompt tokens of the point's successful
// records (0 when none reports them).
func medianPrompt(pt fitPoint) float64 {
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

// goodputMiss is the mean relative error of the profile's predicted median
// goodput at the fitted closed concurrencies against the fitted records'
// (their warm repeats, counted in generated tokens).
func goodputMiss(res *bundle.Results, server string, closedPts []fitPoint, p *engine.Profile, wl predict.ClosedWorkload, fitted []int, tk engine.Counter) (float64, error) {
	w := wl
	w.Concurrencies, w.Repeats = fitted, 1
	q := *p
	if q.Name == "" {
		q.Name = "fit"
	}
	pr, err := predict.Closed(&q, w, predict.Options{Server: server, Tokenizer: tk})
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
