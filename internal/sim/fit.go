package sim

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
)

// qwenSystemPrompt is the system message Qwen2.5's chat template inserts when
// a conversation has none. A fit keeps it when the server's reported prompt
// token counts show it was rendered.
const qwenSystemPrompt = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."

// Figures a bundle cannot tell, used by every fitted profile.
const (
	// fitKVTokenBudget never binds for the workloads rehearse sends.
	fitKVTokenBudget = 4_000_000
	// fitMaxNumSeqs is assumed when the server's launch argv does not say
	// --max-num-seqs.
	fitMaxNumSeqs = 256
)

// FitOptions says what to fit from a bundle.
type FitOptions struct {
	// Server is the name of the bundle's server to fit.
	Server string
	// Engine is the simulated engine the profile is for: serial or batching.
	Engine string
	// FitConcurrencies are the recorded closed-loop waves the fit may read
	// (their concurrencies); the others are held out.
	FitConcurrencies []int
	// FitLoads are further recorded loads the fit reads, of any mode
	// (contract keys: closed, sustained or open-loop, ramps and trace
	// replays included); their server is ignored.
	FitLoads []contract.Key
	// Jitter fits the profile's step_jitter from the spread of the lowest
	// fitted load's inter-token gaps; off, step_jitter stays 0.
	Jitter bool
	// Name and Description of the profile; empty means ones derived from the
	// bundle.
	Name, Description string
	// MaxModelLen of the profile (a bundle does not record it); 0 means 32768.
	MaxModelLen int
	// Tokenizer renders and counts prompts to decide the default system
	// prompt; nil means the pinned default tokenizer.
	Tokenizer Counter
}

// Fit is a profile fitted from a bundle's raw records, with how each number
// was obtained.
type Fit struct {
	Profile *Profile
	// CountedPerGeneratedToken is output_tokens (the returned text
	// re-tokenized) over the tokens the server reported generating
	// (usage_completion_tokens), summed over the fitted successful records:
	// 1 for text that round-trips; above 1 for random-weight text. It is
	// reported, not modelled: predictions and the live simulator count
	// generated tokens, and comparisons count the bundle's records the
	// same way (GeneratedCounts).
	CountedPerGeneratedToken float64
	// Derivation says, one line per fitted number, which records it came
	// from and how.
	Derivation []string
	// Unexplained lists what the measured records show and the fitted model
	// cannot reproduce.
	Unexplained []string
}

// fitPoint is what the fit reads from one fitted load's successful
// records.
type fitPoint struct {
	key         contract.Key
	concurrency int     // closed loop: the clients; else 0
	batch       float64 // the clients of a closed wave; else the measured decode occupancy
	ok          int     // successful requests
	tpotS       float64 // median of (end − first content) ÷ (generated − 1)
	ttftS       float64 // median TTFT
	ttftLessTPO float64 // median of TTFT − that request's TPOT
	// servedLessTPO is ttftLessTPO with each TTFT counted from its send or
	// from the end of the request of its wave that ended last before its
	// first token, whichever is later: a serial engine's first token
	// without the wait for the lock.
	servedLessTPO float64
	firstTTFTS    float64 // median over waves of the wave's smallest TTFT
	contextS      float64 // median context (prompt + generated ÷ 2) of its requests, tokens
	recs          []contract.Record
}

// label names the point's load as every output does.
func (pt fitPoint) label() string { return pt.key.LoadLabel() }

// FitProfile fits a profile of the given engine to one server of a bundle,
// reading only the recorded waves at the fit loads (closed-loop
// concurrencies, and FitLoads of any mode):
//
//   - decode step: the median per-request generated TPOT ((end_s −
//     first_content_s) ÷ (generated − 1), generated = usage_completion_tokens
//     where the server reported it, else output_tokens) of each fitted
//     load; serial: one step cost, the mean over the fitted loads;
//     batching: one point per batch size seen, linear in between. The batch
//     size of a closed wave is its concurrency (capped at max_num_seqs);
//     of a sustained or open-loop load, the measured decode occupancy: for
//     each request, the time-averaged number of its wave's requests
//     streaming (between their first content and their end) while it
//     streams, the median over the load's requests;
//   - decode step by occupancy (batching, no prefill or context term): where
//     those per-load points miss by over 15 % the step measured at some
//     occupancy, the curve is read from every inter-token gap of the fitted
//     requests instead, binned by the number of its wave's requests
//     streaming at the gap's midpoint (the median of each occupancy with at
//     least 100 gaps, made non-decreasing): a closed wave drains through
//     every occupancy below its concurrency, which shows a step cost that
//     jumps between two fitted loads (the H200 transformers server's, from
//     25 to 43 ms between 32 and 39 sequences);
//   - staggered prefill (batching, no prefill slope): where the highest
//     closed wave's prompts overflow one step's token budget (the argv's,
//     else 8192), its TTFT growth may be prefill rather than a frontend
//     queue: the prefill cost whose predicted median TTFT there is the
//     measured one (bisection on the predictor), with no frontend, is kept
//     when it predicts the fitted closed waves' goodput better than the
//     frontend does;
//   - cold repeats (batching, no prefix caching): a repeat of a fitted load whose median TTFT
//     is over 1.5× and 20 ms above its warmest repeat's is left out of every
//     number (a server capturing CUDA graphs lazily pays it in the first
//     repeat to meet a batch shape), and the derivation says so;
//   - decode per context token: where the lowest load's requests differ in
//     context (prompt + half the output, by at least half), the least-squares
//     slope of their TPOT on it; the decode points are then what is left of
//     each load's median TPOT less the slope times its batch's context;
//     otherwise 0;
//   - request overhead: the median of TTFT − TPOT at the lowest fitted
//     load, less the frontend time and the prompt's prefill (a first token
//     costs one step);
//   - prefill per token: where the lowest load's prompts differ in length
//     (usage_prompt_tokens, by at least half), the least-squares slope of
//     TTFT − TPOT on the prompt tokens; otherwise 0 (one prompt length
//     cannot tell a prefill cost from the overhead);
//   - frontend (batching): the growth of the median TTFT from the lowest to
//     the highest fitted closed concurrency, read as a queue every request
//     passes one after another: f = 2·(median TTFT(N) − median TTFT(L)) ÷
//     (N − L); 0 without two closed loads (arrivals spread over time do not
//     show the queue);
//   - KV budget and max_num_seqs: from the launch argv where it says
//     (--max-num-seqs; vLLM's --num-gpu-blocks-override × --block-size, or
//     rehearse sim's --kv-token-budget), else assumed;
//   - prefix caching: from the launch argv (vLLM's --enable-prefix-caching,
//     rehearse sim's --prefix-caching on, or a built-in --profile that caches);
//   - step jitter (with o.Jitter): the relative spread of the lowest load's
//     inter-token gaps; else 0;
//   - output lengths: max_tokens (each prompt's own) when the workload sets
//     ignore_eos, else the median generated length of each prompt's requests
//     that stopped.
//
// It is a pure function of the bundle and the options.
func FitProfile(res *bundle.Results, o FitOptions) (*Fit, error) {
	if o.Engine != EngineSerial && o.Engine != EngineBatching {
		return nil, fmt.Errorf("sim: fit: engine %q: want %q or %q", o.Engine, EngineSerial, EngineBatching)
	}
	var server *bundle.Server
	for i := range res.Servers {
		if res.Servers[i].Name == o.Server {
			server = &res.Servers[i]
		}
	}
	if server == nil {
		return nil, fmt.Errorf("sim: fit: the bundle has no server %q (have: %s)", o.Server, strings.Join(res.ServerNames(), ", "))
	}
	wl := res.Workload
	if err := checkModelled(wl); err != nil {
		return nil, err
	}
	ignoreEOS, _, _, err := requestFields(wl.ExtraBody)
	if err != nil {
		return nil, err
	}
	var keys []contract.Key
	for _, c := range o.FitConcurrencies {
		keys = append(keys, contract.Key{Server: o.Server, Mode: contract.ModeClosed, Concurrency: c})
	}
	for _, k := range o.FitLoads {
		k.Server = o.Server
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("sim: fit: no fit concurrencies")
	}
	slices.SortFunc(keys, compareKeys)
	keys = slices.Compact(keys)
	recs := fitRecords(res, o.Server, keys)
	var fitAt []int // the closed-loop concurrencies
	for _, k := range keys {
		if k.Mode == contract.ModeClosed {
			fitAt = append(fitAt, k.Concurrency)
		}
	}

	f := &Fit{}
	note := func(format string, a ...any) { f.Derivation = append(f.Derivation, fmt.Sprintf(format, a...)) }
	unexplained := func(format string, a ...any) { f.Unexplained = append(f.Unexplained, fmt.Sprintf(format, a...)) }

	caching, _ := argvPrefixCaching(server.LaunchArgv)
	points := make([]fitPoint, 0, len(keys))
	var all []contract.Record
	for _, k := range keys {
		// A batching engine's cold repeats are left out; a serial one's
		// TTFT is mostly the wait for the lock, whose spread between
		// repeats says nothing of a warm-up.
		// A prefix-caching server's first repeat is slower by design (it
		// fills the cache the later ones hit), and the model has it.
		if kept, why := warmRepeats(k.LoadLabel(), recs[k]); why != "" && o.Engine == EngineBatching && !caching {
			recs[k] = kept
			note("%s", why)
		}
		pt, err := readPoint(k, recs[k])
		if err != nil {
			return nil, fmt.Errorf("sim: fit: server %s: %w", o.Server, err)
		}
		points = append(points, pt)
		all = append(all, recs[k]...)
	}

	// Counted per generated token, from every fitted successful record that
	// carries the server's usage.
	counted, generatedN := 0, 0
	for _, r := range all {
		if r.OK && r.UsageCompletionTokens != nil {
			counted += r.OutputTokens
			generatedN += *r.UsageCompletionTokens
		}
	}
	f.CountedPerGeneratedToken = 1
	if generatedN > 0 {
		f.CountedPerGeneratedToken = float64(counted) / float64(generatedN)
		note("counted per generated token: %.4f = %d output_tokens (text re-tokenized) ÷ %d usage_completion_tokens over the fitted successful records", f.CountedPerGeneratedToken, counted, generatedN)
	} else {
		note("counted per generated token: 1 (the server reported no usage)")
	}

	p := &Profile{
		Engine:           o.Engine,
		Model:            res.Provenance.Model.ID,
		MaxModelLen:      o.MaxModelLen,
		ChatTemplate:     "chatml",
		KVTokenBudget:    fitKVTokenBudget,
		MaxNumSeqs:       1,
		PrefillBaseS:     0,
		PrefillPerTokenS: 0,
	}
	if server.Model != "" {
		p.Model = server.Model
	}
	if p.Model == "" {
		p.Model = "unknown"
	}
	if p.MaxModelLen == 0 {
		p.MaxModelLen = 32768
	}
	if o.Engine == EngineBatching {
		p.MaxNumSeqs = fitMaxNumSeqs
		if n, ok := argvInt(server.LaunchArgv, "--max-num-seqs"); ok && n > 0 {
			p.MaxNumSeqs = n
			note("max_num_seqs: %d, from the server's launch argv", n)
		} else {
			note("max_num_seqs: %d assumed (the launch argv does not say --max-num-seqs)", fitMaxNumSeqs)
		}
	}
	for i := range points {
		if points[i].concurrency > 0 {
			points[i].batch = float64(min(points[i].concurrency, p.MaxNumSeqs))
		} else if o.Engine == EngineSerial {
			points[i].batch = 1
		}
	}
	// The lowest load: the smallest batch; among equals (a serial engine's
	// are all 1) the one of least queueing, the smallest median TTFT.
	low := points[0]
	for _, pt := range points[1:] {
		if pt.batch < low.batch || (pt.batch == low.batch && pt.ttftS < low.ttftS) {
			low = pt
		}
	}
	var closedPts []fitPoint
	for _, pt := range points {
		if pt.concurrency > 0 {
			closedPts = append(closedPts, pt)
		}
	}

	// The context and prefill terms, where requests vary in length: read
	// from the requests that ran alone (no other request of their wave in
	// flight, so that no other prefill or decode shares their steps), of
	// the least-loaded fitted load that has at least minVariedN of them
	// with prompts varied by minVariedSpread (the lowest load itself when
	// none has).
	slopeAt := low
	slopeRecs := alone(low.recs)
	if len(slopeRecs) < minVariedN {
		slopeRecs = low.recs
	}
	byLoad := slices.Clone(points)
	slices.SortStableFunc(byLoad, func(a, b fitPoint) int { return cmp.Or(cmp.Compare(a.batch, b.batch), cmp.Compare(a.ttftS, b.ttftS)) })
	for _, pt := range byLoad {
		if rs := alone(pt.recs); len(rs) >= minVariedN && promptSpread(rs) >= minVariedSpread {
			slopeAt, slopeRecs = pt, rs
			break
		}
	}
	perCtx, ctxHow := slopeOf(slopeRecs, func(r contract.Record) (float64, float64, bool) {
		tpot, ok := recordTPOT(r)
		pt := promptTokensOf(r)
		if !ok || pt < 0 {
			return 0, 0, false
		}
		return float64(pt) + float64(generated(r))/2, tpot, true
	})
	if perCtx > 0 {
		p.DecodePerContextTokenS = round9(perCtx)
		note("decode per context token: %.3g s = the least-squares slope of TPOT on context (prompt + output ÷ 2) over the %s requests at %s that ran alone (or all, when fewer than %d did)", p.DecodePerContextTokenS, ctxHow, slopeAt.label(), minVariedN)
	} else {
		note("decode per context token: 0 (%s at %s)", ctxHow, slopeAt.label())
	}
	ctxPart := func(pt fitPoint) float64 { return p.DecodePerContextTokenS * pt.batch * pt.contextS }
	perTok, preHow := slopeOf(slopeRecs, func(r contract.Record) (float64, float64, bool) {
		tpot, ok := recordTPOT(r)
		pt := promptTokensOf(r)
		if !ok || pt < 0 || r.FirstContentS == nil {
			return 0, 0, false
		}
		return float64(pt), *r.FirstContentS - r.StartS - tpot, true
	})
	prefillMedian := 0.0
	if perTok > 0 {
		p.PrefillPerTokenS = round9(perTok)
		var pts []float64
		for _, r := range low.recs {
			if n := promptTokensOf(r); r.OK && n >= 0 {
				pts = append(pts, float64(n))
			}
		}
		prefillMedian = p.PrefillPerTokenS * *contract.Median(pts)
		note("prefill per token: %.3g s = the least-squares slope of TTFT − TPOT on usage_prompt_tokens over the %s requests at %s that ran alone (or all, when fewer than %d did)", p.PrefillPerTokenS, preHow, slopeAt.label(), minVariedN)
	}

	// loadPts are the loads the batching decode points came from; nil
	// once the occupancy curve replaces them.
	var loadPts []fitPoint
	switch o.Engine {
	case EngineSerial:
		sum := 0.0
		var parts []string
		for _, pt := range points {
			sum += pt.tpotS - ctxPart(pt)
			parts = append(parts, fmt.Sprintf("%.4f s at %s (%d requests)", pt.tpotS, pt.label(), pt.ok))
		}
		step := sum / float64(len(points))
		p.DecodeStepS = [][2]float64{{1, round6(step)}}
		note("decode step (batch 1): %.4f s = the mean over the fitted loads of the median generated TPOT: %s", p.DecodeStepS[0][1], strings.Join(parts, ", "))
		if len(points) > 1 {
			lo, hi := points[0].tpotS, points[0].tpotS
			for _, pt := range points {
				lo, hi = min(lo, pt.tpotS), max(hi, pt.tpotS)
			}
			if hi > 1.1*lo {
				unexplained("the per-token cost differs by %.0f %% between the fitted loads (%s); a serial engine has one step cost, so the mean is used and each side is off by about half the difference", 100*(hi/lo-1), strings.Join(parts, ", "))
			}
		}
		p.RequestOverheadS = round6(max(0, low.servedLessTPO-prefillMedian))
		note("request overhead: %.4f s = median of TTFT − TPOT over the %d successful requests at %s (the first token costs one step), each TTFT from its send or from the end of the request served before it, whichever is later%s", p.RequestOverheadS, low.ok, low.label(), lessPrefill(prefillMedian))
		if low.servedLessTPO < low.ttftLessTPO-1e-9 {
			unexplained("at %s, the least-loaded fitted load, requests waited for the lock: the request overhead is read from the time between the previous request's end and the first token, which hides an overhead paid while waiting; a serial profile fitted here may undershoot the TTFT of an idle server", low.label())
		}
		if perTok == 0 {
			note("frontend: 0 s per request; prefill: 0 (%s at %s: a prefill cost cannot be told apart from the overhead)", preHow, slopeAt.label())
		} else {
			note("frontend: 0 s per request")
		}
		if len(closedPts) > 1 {
			high := closedPts[len(closedPts)-1]
			predicted := p.RequestOverheadS + step
			if high.firstTTFTS > 2*predicted {
				unexplained("at %s the first request served waited %.3f s for its first token (median over the waves of the smallest TTFT) against %.3f s at %s: the server seems to take in the whole wave before it streams to the first (one event loop); the model's serial engine starts it after %.3f s", high.label(), high.firstTTFTS, low.ttftS, low.label(), predicted)
			}
		}
	case EngineBatching:
		byBatch := slices.Clone(points)
		slices.SortStableFunc(byBatch, func(a, b fitPoint) int { return cmp.Compare(a.batch, b.batch) })
		var pts [][2]float64
		for _, pt := range byBatch {
			batch := math.Max(1, math.Round(pt.batch*100)/100)
			if len(pts) > 0 && pts[len(pts)-1][0] >= batch {
				unexplained("%s runs at the same batch size (%g) as a lower fitted load; its TPOT %.4f s is not used", pt.label(), batch, pt.tpotS)
				continue
			}
			loadPts = append(loadPts, pt)
			tpot := pt.tpotS
			if p.PrefillPerTokenS > 0 {
				tpot = decodeTPOT(pt.recs, p.PrefillPerTokenS)
			}
			step := round6(max(tpot-ctxPart(pt), 1e-6))
			pts = append(pts, [2]float64{batch, step})
			how := "its concurrency"
			if pt.concurrency == 0 {
				how = "its measured decode occupancy"
			}
			if p.PrefillPerTokenS > 0 {
				how += "; each request's TPOT less the prefill of the other requests whose first token came while it streamed, and less the context term"
			}
			note("decode step at batch %g (%s): %.4f s = median generated TPOT of the %d successful requests at %s", batch, how, step, pt.ok, pt.label())
		}
		p.DecodeStepS = pts
		if occ, ns := occupancySteps(all, p.MaxNumSeqs); len(occ) >= 2 {
			if miss, at, model := worstMiss(pts, occ); miss > occupancyMiss {
				if p.PrefillPerTokenS > 0 || p.DecodePerContextTokenS > 0 {
					unexplained("the per-load decode points miss the step measured at %g streaming requests by %.0f %% (%.4f s against %.4f s), but the fit has prefill or context terms the occupancy curve would count twice; the per-load points are kept", at, 100*miss, model, occupancyAt(occ, at))
				} else {
					total := 0
					for _, n := range ns {
						total += n
					}
					p.DecodeStepS, loadPts = thinSteps(occ), nil
					note("decode step by occupancy: the per-load points miss the step measured at %g streaming requests by %.0f %% (%.4f s against %.4f s), so the curve is read from the %d inter-token gaps of the fitted requests instead, binned by how many of their wave's requests were streaming at each gap's midpoint: the median gap of each occupancy with at least %d gaps (%d occupancies from %g to %g), made non-decreasing, points the line between their neighbours misses by under %.0f %% dropped: %s", at, 100*miss, model, occupancyAt(occ, at), total, minGapsPerBin, len(occ), occ[0][0], occ[len(occ)-1][0], 100*occupancyKeep, formatSteps(p.DecodeStepS))
					pts = p.DecodeStepS
				}
			}
		}
		if len(pts) > 1 {
			note("decode step between the points: linear; beyond batch %g: along the last segment (not measured)", pts[len(pts)-1][0])
		} else {
			note("decode step: the same at every batch size (one fitted load)")
		}
		if len(closedPts) > 1 {
			lowC, high := closedPts[0], closedPts[len(closedPts)-1]
			fs := 2 * (high.ttftS - lowC.ttftS) / float64(high.concurrency-lowC.concurrency)
			p.FrontendSPerRequest = round6(max(0, fs))
			note("frontend: %.4f s per request = 2 · (median TTFT %.4f s at %s − %.4f s at %d) ÷ (%d − %d): a queue every request passes one after another, whose median wait matches", p.FrontendSPerRequest, high.ttftS, high.label(), lowC.ttftS, lowC.concurrency, high.concurrency, lowC.concurrency)
		} else {
			note("frontend: 0 s per request (fewer than two fitted closed-loop concurrencies: arrivals spread over time do not show a frontend queue)")
		}
		p.RequestOverheadS = round6(max(0, low.ttftLessTPO-p.FrontendSPerRequest-prefillMedian))
		note("request overhead: %.4f s = median of TTFT − TPOT over the %d successful requests at %s, less the frontend's %.4f s%s", p.RequestOverheadS, low.ok, low.label(), p.FrontendSPerRequest, lessPrefill(prefillMedian))
		if perTok == 0 {
			note("prefill: 0 and no per-step token budget (%s at %s: a prefill cost cannot be told apart from the overhead)", preHow, slopeAt.label())
		}
		if p.FrontendSPerRequest > 0 && low.ttftLessTPO < p.FrontendSPerRequest {
			unexplained("at %s the first token comes %.4f s after one step's time, less than the %.4f s frontend slot the %s TTFT growth implies: the server does not make every request wait its turn; it admits arrivals in groups, which the model's one-at-a-time frontend spreads evenly", low.label(), low.ttftLessTPO, p.FrontendSPerRequest, closedPts[len(closedPts)-1].label())
		}
	}

	for _, pt := range closedPts {
		if d := coldWaves(res, o.Server, pt, pt.recs); d != "" {
			unexplained("%s", d)
		}
	}

	if kv, how := argvKVBudget(server.LaunchArgv); kv > 0 {
		p.KVTokenBudget = kv
		note("kv_token_budget: %d tokens, %s", kv, how)
	}
	if on, how := argvPrefixCaching(server.LaunchArgv); on {
		p.PrefixCaching = true
		note("prefix caching: on, %s", how)
	} else {
		note("prefix caching: off (%s; rehearse sim --prefix-caching on turns it on)", how)
	}

	if o.Jitter {
		j, how := fitJitter(low)
		p.StepJitter = j
		note("step jitter: %.4f = %s", j, how)
	}

	// Prompt rendering: keep Qwen's default system prompt when the server's
	// reported prompt tokens show it was rendered.
	sys, how := fitSystemPrompt(res, all, o.Tokenizer, p)
	p.DefaultSystemPrompt = sys
	note("%s", how)

	// Output lengths.
	if ignoreEOS {
		p.OutputTokens = []int{wl.MaxTokens}
		if len(wl.PromptMaxTokens) > 0 {
			note("output lengths: each prompt's own max_tokens: the workload sets ignore_eos, so every request runs to its max_tokens; where the model would stop on its own is not measured")
		} else {
			note("output lengths: %d (max_tokens): the workload sets ignore_eos, so every request runs to max_tokens; where the model would stop on its own is not measured", wl.MaxTokens)
		}
	} else {
		byPrompt, fallback := naturalLengths(wl, all)
		p.OutputTokensByPrompt = byPrompt
		p.OutputTokens = []int{fallback}
		note("output lengths: per prompt, the median generated tokens of its fitted requests that stopped on their own (%d prompts); a prompt that always reached max_tokens gets max_model_len; any other prompt %d", len(byPrompt), fallback)
	}

	// With prefix caching a prompt's prefill is mostly a cache hit: TTFT
	// growth cannot be read as its prompt tokens.
	if o.Engine == EngineBatching && perTok == 0 && len(closedPts) > 1 && !p.PrefixCaching {
		// The per-load decode points, with the prefill of the other
		// requests that shared their steps taken out (the occupancy curve's
		// median gaps are mostly steps without one).
		decodeAt := func(perTok float64) [][2]float64 {
			if loadPts == nil || perTok == 0 {
				return p.DecodeStepS
			}
			out := slices.Clone(p.DecodeStepS)
			for i, pt := range loadPts {
				out[i][1] = round6(max(decodeTPOT(pt.recs, perTok)-ctxPart(pt), 1e-6))
			}
			return out
		}
		if err := fitStaggeredPrefill(res, server, f, p, low, closedPts, decodeAt, o.Tokenizer); err != nil {
			return nil, err
		}
	}

	p.Name = o.Name
	if p.Name == "" {
		p.Name = o.Server + "-" + o.Engine + "-fit"
	}
	p.Description = o.Description
	if p.Description == "" {
		var labels []string
		if len(fitAt) > 0 {
			labels = append(labels, joinInts(fitAt)+" clients")
		}
		for _, pt := range points {
			if pt.concurrency == 0 {
				labels = append(labels, pt.label())
			}
		}
		p.Description = fmt.Sprintf("Fitted by rehearse sim fit to server %s of a bundle (%s, %s) on its waves at %s.",
			o.Server, p.Model, gpuName(res), strings.Join(labels, "; "))
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("sim: fit: the fitted profile is not valid: %w", err)
	}
	f.Profile = p
	return f, nil
}

func lessPrefill(s float64) string {
	if s == 0 {
		return ""
	}
	return fmt.Sprintf(", less the median prompt's prefill (%.4f s)", s)
}

// compareKeys orders loads: closed, sustained, open; by concurrency, rate
// and shape.
func compareKeys(a, b contract.Key) int {
	rank := func(m string) int {
		switch m {
		case contract.ModeClosed:
			return 0
		case contract.ModeSustained:
			return 1
		}
		return 2
	}
	return cmp.Or(cmp.Compare(rank(a.Mode), rank(b.Mode)), cmp.Compare(a.Concurrency, b.Concurrency),
		cmp.Compare(a.RequestRateRPS, b.RequestRateRPS), cmp.Compare(a.Shape, b.Shape))
}

// fitRecords returns the records of the server's recorded waves at each of
// the loads.
func fitRecords(res *bundle.Results, server string, keys []contract.Key) map[contract.Key][]contract.Record {
	waves := map[int]contract.Key{}
	for _, w := range res.Waves {
		k := contract.KeyOf(w)
		if w.Kind == contract.KindRecorded && w.Server == server && slices.Contains(keys, k) {
			waves[w.ID] = k
		}
	}
	out := map[contract.Key][]contract.Record{}
	for _, r := range res.Records {
		if k, ok := waves[r.Wave]; ok && r.Kind == contract.KindRecorded {
			out[k] = append(out[k], r)
		}
	}
	return out
}

// coldWaves describes the cold waves (the first after a launch) among the
// fitted ones at concurrency c: the model has no warm-up term.
func coldWaves(res *bundle.Results, server string, pt fitPoint, recs []contract.Record) string {
	c := pt.concurrency
	var parts []string
	for _, w := range res.Waves {
		if !w.Cold || w.Kind != contract.KindRecorded || w.Server != server || contract.KeyOf(w) != pt.key {
			continue
		}
		var ttft, tpot []float64
		for _, r := range recs {
			if r.Wave != w.ID || !r.OK || r.FirstContentS == nil {
				continue
			}
			ttft = append(ttft, *r.FirstContentS-r.StartS)
			if g := generated(r); g > 1 {
				tpot = append(tpot, (r.EndS-*r.FirstContentS)/float64(g-1))
			}
		}
		if len(ttft) == 0 || len(tpot) == 0 {
			parts = append(parts, fmt.Sprintf("repeat %d", w.Repeat))
			continue
		}
		mt, mp := *contract.Median(ttft), *contract.Median(tpot)
		if math.Abs(mt-pt.ttftS) <= 0.1*pt.ttftS && math.Abs(mp-pt.tpotS) <= 0.1*pt.tpotS {
			continue // it ran like the warm ones
		}
		parts = append(parts, fmt.Sprintf("repeat %d (median TTFT %.3f s, TPOT %.4f s against %.3f s and %.4f s over all the waves)", w.Repeat, mt, mp, pt.ttftS, pt.tpotS))
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("the fitted waves at %s include a cold wave, the first after the server's launch: %s; the model has no warm-up cost, the medians keep it out of the fit, but a tail percentile over few requests is its value", clients(c), strings.Join(parts, ", "))
}

// generated is the number of tokens the server generated for a record.
func generated(r contract.Record) int {
	if r.UsageCompletionTokens != nil {
		return *r.UsageCompletionTokens
	}
	return r.OutputTokens
}

// recordTPOT is a successful record's generated TPOT.
func recordTPOT(r contract.Record) (float64, bool) {
	if !r.OK || r.FirstContentS == nil {
		return 0, false
	}
	g := generated(r)
	if g < 2 {
		return 0, false
	}
	return (r.EndS - *r.FirstContentS) / float64(g-1), true
}

// promptTokensOf is the prompt tokens the server reported, -1 when none.
func promptTokensOf(r contract.Record) int {
	if r.UsagePromptTokens == nil {
		return -1
	}
	return *r.UsagePromptTokens
}

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
	j := min(maxStepJitter, round6(sd/med))
	return j, fmt.Sprintf("the spread of the %d inter-token gaps at %s (trimmed standard deviation %.4f s ÷ 0.9 over the median %.4f s)", len(gaps), pt.label(), sd, med)
}

// decodeTPOT is the median TPOT of the records with the prefill steps they
// shared taken out: for each, the prefill (perTok × usage_prompt_tokens) of
// every other request of its wave whose first token came while it streamed
// (a continuous-batching step that prefills a prompt also decodes the
// running sequences, and costs the prefill on top), spread over its
// tokens.
func decodeTPOT(recs []contract.Record, perTok float64) float64 {
	var out []float64
	for i, r := range recs {
		tpot, ok := recordTPOT(r)
		if !ok {
			continue
		}
		shared := 0.0
		for j, o := range recs {
			if j == i || o.Wave != r.Wave || o.FirstContentS == nil {
				continue
			}
			if f := *o.FirstContentS; f > *r.FirstContentS && f <= r.EndS {
				shared += perTok * float64(max(promptTokensOf(o), 0))
			}
		}
		out = append(out, tpot-shared/float64(generated(r)-1))
	}
	return *contract.Median(out)
}

// promptSpread is the largest over the smallest prompt of the records
// (0 when none reports one).
func promptSpread(recs []contract.Record) float64 {
	lo, hi := math.Inf(1), 0.0
	for _, r := range recs {
		if n := promptTokensOf(r); n > 0 {
			lo, hi = min(lo, float64(n)), max(hi, float64(n))
		}
	}
	if hi == 0 {
		return 0
	}
	return hi / lo
}

// alone are the successful records no other record of their wave
// overlapped (send to end).
func alone(recs []contract.Record) []contract.Record {
	var out []contract.Record
	for i, r := range recs {
		if !r.OK {
			continue
		}
		solo := true
		for j, o := range recs {
			if j != i && o.Wave == r.Wave && o.StartS < r.EndS && r.StartS < o.EndS {
				solo = false
				break
			}
		}
		if solo {
			out = append(out, r)
		}
	}
	return out
}

// occupancy is, for each record of one wave that streamed, the
// time-averaged number of the wave's records streaming (first content to
// end) while it streamed, itself included.
func occupancy(recs []contract.Record) []float64 {
	type span struct{ a, b float64 }
	var spans []span
	for _, r := range recs {
		if r.FirstContentS != nil && r.EndS > *r.FirstContentS {
			spans = append(spans, span{*r.FirstContentS, r.EndS})
		}
	}
	out := make([]float64, 0, len(spans))
	for _, s := range spans {
		sum := 0.0
		for _, o := range spans {
			if lo, hi := max(s.a, o.a), min(s.b, o.b); hi > lo {
				sum += hi - lo
			}
		}
		out = append(out, sum/(s.b-s.a))
	}
	return out
}

func readPoint(k contract.Key, recs []contract.Record) (fitPoint, error) {
	pt := fitPoint{key: k, recs: recs}
	if k.Mode == contract.ModeClosed {
		pt.concurrency = k.Concurrency
	}
	if len(recs) == 0 {
		if k.Mode == contract.ModeClosed {
			return pt, fmt.Errorf("no recorded closed-loop wave at %s to fit", clients(k.Concurrency))
		}
		return pt, fmt.Errorf("no recorded wave at %s to fit", k.LoadLabel())
	}
	var tpot, ttft, diff, served, ctx []float64
	firstByWave := map[int]float64{}
	byWave := map[int][]contract.Record{}
	for _, r := range recs {
		byWave[r.Wave] = append(byWave[r.Wave], r)
		if !r.OK || r.FirstContentS == nil {
			continue
		}
		pt.ok++
		t := *r.FirstContentS - r.StartS
		ttft = append(ttft, t)
		if v, ok := firstByWave[r.Wave]; !ok || t < v {
			firstByWave[r.Wave] = t
		}
		if v, ok := recordTPOT(r); ok {
			tpot = append(tpot, v)
			diff = append(diff, t-v)
			from := r.StartS
			for _, o := range recs {
				if o.Wave == r.Wave && o.EndS > from && o.EndS < *r.FirstContentS && (o.Client != r.Client || o.StartS != r.StartS) {
					from = o.EndS
				}
			}
			served = append(served, *r.FirstContentS-from-v)
			if n := promptTokensOf(r); n >= 0 {
				ctx = append(ctx, float64(n)+float64(generated(r))/2)
			}
		}
	}
	if len(tpot) == 0 {
		return pt, fmt.Errorf("no successful request with more than one token at %s to fit a decode step from", k.LoadLabel())
	}
	var firsts []float64
	for _, v := range firstByWave {
		firsts = append(firsts, v)
	}
	pt.tpotS = *contract.Median(tpot)
	pt.ttftS = *contract.Median(ttft)
	pt.ttftLessTPO = *contract.Median(diff)
	pt.servedLessTPO = *contract.Median(served)
	pt.firstTTFTS = *contract.Median(firsts)
	if len(ctx) > 0 {
		pt.contextS = *contract.Median(ctx)
	}
	if pt.concurrency == 0 {
		var occ []float64
		for _, rs := range byWave {
			occ = append(occ, occupancy(rs)...)
		}
		pt.batch = 1
		if len(occ) > 0 {
			pt.batch = max(1, *contract.Median(occ))
		}
	}
	return pt, nil
}

// fitSystemPrompt decides whether prompts were rendered with Qwen's default
// system prompt, by counting each fitted prompt both ways against the
// server's usage_prompt_tokens.
func fitSystemPrompt(res *bundle.Results, recs []contract.Record, counter Counter, p *Profile) (string, string) {
	reported := map[int]int{}
	for _, r := range recs {
		if r.UsagePromptTokens != nil && r.Prompt >= 0 && r.Prompt < len(res.Workload.Prompts) {
			reported[r.Prompt] = *r.UsagePromptTokens
		}
	}
	if len(reported) == 0 {
		return "", "default system prompt: none (the server reported no prompt tokens to check one against)"
	}
	if counter == nil {
		c, err := defaultCounter()
		if err != nil {
			return "", fmt.Sprintf("default system prompt: none (no tokenizer to check one: %v)", err)
		}
		counter = c
	}
	for _, sys := range []string{qwenSystemPrompt, ""} {
		q := *p
		q.DefaultSystemPrompt = sys
		match := true
		for i, n := range reported {
			if counter.Count(renderChat(&q, []chatMessage{{Role: "user", Content: res.Workload.Prompts[i]}})) != n {
				match = false
				break
			}
		}
		if match {
			if sys == "" {
				return "", fmt.Sprintf("default system prompt: none; the chatml rendering without one counts the server's usage_prompt_tokens of all %d prompts sent", len(reported))
			}
			return sys, fmt.Sprintf("default system prompt: Qwen2.5's; the chatml rendering with it counts the server's usage_prompt_tokens of all %d prompts sent", len(reported))
		}
	}
	return "", "default system prompt: none; neither rendering counts the server's usage_prompt_tokens (prompt lengths only bound the KV budget here)"
}

// naturalLengths fits output lengths from requests that stopped on their
// own (below their prompt's max_tokens).
func naturalLengths(wl bundle.Workload, recs []contract.Record) ([]PromptLength, int) {
	rs := requestSpec{prompts: wl.Prompts, maxTokens: wl.MaxTokens, promptMaxTokens: wl.PromptMaxTokens}
	stopped := map[int][]float64{}
	reachedMax := map[int]bool{}
	for _, r := range recs {
		if !r.OK || r.Prompt < 0 || r.Prompt >= len(wl.Prompts) {
			continue
		}
		if g := generated(r); g < rs.maxTokensOf(r.Prompt) {
			stopped[r.Prompt] = append(stopped[r.Prompt], float64(g))
		} else {
			reachedMax[r.Prompt] = true
		}
	}
	var out []PromptLength
	var all []float64
	for i, text := range wl.Prompts {
		n := 0
		switch {
		case len(stopped[i]) > 0:
			n = max(1, int(math.Round(*contract.Median(stopped[i]))))
		case reachedMax[i]:
			n = 1 << 20 // never stopped within max_tokens
		default:
			continue
		}
		all = append(all, float64(n))
		begin := text
		if len(begin) > 40 {
			begin = begin[:40]
		}
		out = append(out, PromptLength{PromptSHA256: sha256Hex(text), Prompt: begin, Tokens: n})
	}
	fallback := wl.MaxTokens
	if len(all) > 0 {
		fallback = max(1, int(math.Round(*contract.Median(all))))
	}
	return out, fallback
}

// argvKVBudget reads a KV budget from a launch argv: vLLM's
// --num-gpu-blocks-override × --block-size (default 16), or rehearse sim's
// --kv-token-budget; 0 when it says neither.
func argvKVBudget(argv []string) (int, string) {
	if n, ok := argvInt(argv, "--kv-token-budget"); ok && n > 0 {
		return n, "from the launch argv's --kv-token-budget"
	}
	if n, ok := argvInt(argv, "--num-gpu-blocks-override"); ok && n > 0 {
		bs := 16
		if b, ok := argvInt(argv, "--block-size"); ok && b > 0 {
			bs = b
		}
		return n * bs, fmt.Sprintf("= the launch argv's --num-gpu-blocks-override %d × block size %d", n, bs)
	}
	return 0, ""
}

// argvPrefixCaching reads whether a launch argv turns prefix caching on.
func argvPrefixCaching(argv []string) (bool, string) {
	for i, a := range argv {
		switch {
		case a == "--enable-prefix-caching":
			return true, "the launch argv says --enable-prefix-caching"
		case a == "--no-enable-prefix-caching":
			return false, "the launch argv says --no-enable-prefix-caching"
		case a == "--prefix-caching=on" || (a == "--prefix-caching" && i+1 < len(argv) && argv[i+1] == PrefixCachingOn):
			return true, "the launch argv says --prefix-caching on"
		case a == "--prefix-caching=off" || (a == "--prefix-caching" && i+1 < len(argv) && argv[i+1] == PrefixCachingOff):
			return false, "the launch argv says --prefix-caching off"
		}
	}
	for i, a := range argv {
		name, ok := strings.CutPrefix(a, "--profile=")
		if !ok && a == "--profile" && i+1 < len(argv) {
			name, ok = argv[i+1], true
		}
		if ok && slices.Contains(ProfileNames(), name) {
			if bp, err := BuiltinProfile(name); err == nil && bp.PrefixCaching {
				return true, "the launch argv's built-in profile " + name + " caches prefixes"
			}
		}
	}
	return false, "the launch argv does not turn it on"
}

// round9 rounds a per-token cost to the nanosecond.
func round9(x float64) float64 { return math.Round(x*1e9) / 1e9 }

// argvInt reads "--flag N" or "--flag=N" from an argv.
func argvInt(argv []string, flag string) (int, bool) {
	for i, a := range argv {
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			n, err := strconv.Atoi(v)
			return n, err == nil
		}
		if a == flag && i+1 < len(argv) {
			n, err := strconv.Atoi(argv[i+1])
			return n, err == nil
		}
	}
	return 0, false
}

func gpuName(res *bundle.Results) string {
	if len(res.Provenance.GPUs) == 0 {
		return "no GPU recorded"
	}
	return res.Provenance.GPUs[0].Name
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}

// round6 rounds a latency to the microsecond, so profiles read cleanly.
func round6(x float64) float64 { return math.Round(x*1e6) / 1e6 }

// Comparison sets a fitted profile's predictions beside the measured
// aggregates of the server it was fitted to, for every concurrency of the
// bundle.
type Comparison struct {
	Server string
	Rows   []ComparisonRow
	// Notes are what the prediction did not model (request fields).
	Notes []string
}

// ComparisonRow is one concurrency: fitted or held out, measured against
// predicted by the same contract.
type ComparisonRow struct {
	Concurrency         int
	Fitted              bool
	Measured, Predicted contract.Aggregate
}

// RelErr is (predicted − measured) ÷ measured, or nil when either is
// missing or the measured value is 0.
func RelErr(predicted, measured *float64) *float64 {
	if predicted == nil || measured == nil || *measured == 0 {
		return nil
	}
	v := (*predicted - *measured) / *measured
	return &v
}

// Compare predicts the bundle's closed-loop workload with the fit's profile
// and pairs each concurrency's aggregate with the measured one, recomputed
// from the bundle's records counted in generated tokens (GeneratedCounts),
// as the prediction counts them.
func Compare(res *bundle.Results, f *Fit, server string, fitAt []int, tk Counter) (*Comparison, error) {
	wl, notes, err := WorkloadOf(res)
	if err != nil {
		return nil, err
	}
	pr, err := Predict(f.Profile, wl, PredictOptions{Server: server, Tokenizer: tk})
	if err != nil {
		return nil, err
	}
	measured := map[int]contract.Aggregate{}
	for _, a := range contract.Aggregates(res.Waves, GeneratedCounts(res.Records), res.ServerNames(), "") {
		if a.Server == server && a.Mode == contract.ModeClosed {
			measured[a.Concurrency] = a
		}
	}
	cmp := &Comparison{Server: server, Notes: notes}
	for _, a := range pr.Aggregates {
		m, ok := measured[a.Concurrency]
		if !ok {
			continue
		}
		cmp.Rows = append(cmp.Rows, ComparisonRow{Concurrency: a.Concurrency, Fitted: slices.Contains(fitAt, a.Concurrency), Measured: m, Predicted: a})
	}
	if len(cmp.Rows) == 0 {
		return nil, fmt.Errorf("sim: the bundle has no recorded closed-loop wave of server %s", server)
	}
	return cmp, nil
}

// GeneratedCounts returns a copy of records whose output_tokens are the
// tokens the server reported generating (usage_completion_tokens) where a
// record carries them and has no reasoning or tool-call channel: the count
// the engine model (predictor and live simulator alike) speaks. A bundle of
// random-weight text re-tokenizes to about 6 % more tokens than were
// generated; counted this way, its goodput and TPOT are the engine's.
func GeneratedCounts(records []contract.Record) []contract.Record {
	out := slices.Clone(records)
	for i := range out {
		r := &out[i]
		if r.UsageCompletionTokens != nil && r.ReasoningTokens == nil && r.ToolCallText == "" {
			r.OutputTokens = *r.UsageCompletionTokens
		}
	}
	return out
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// clients says "1 client" or "N clients".
// clients labels a closed-loop load as every output does ("64 clients").
func clients(n int) string {
	return contract.Key{Mode: contract.ModeClosed, Concurrency: n}.LoadLabel()
}
