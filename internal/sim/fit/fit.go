package fit

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/sim/engine"
	"github.com/rehearse/rehearse/internal/sim/predict"
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

// Options says what to fit from a bundle.
type Options struct {
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
	Tokenizer engine.Counter
}

// Result is a profile fitted from a bundle's raw records, with how each
// number was obtained.
type Result struct {
	Profile *engine.Profile
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

// Profile fits a profile of the given engine to one server of a bundle,
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
func Profile(res *bundle.Results, o Options) (*Result, error) {
	ft, err := newFitter(res, o)
	if err != nil {
		return nil, err
	}
	ft.countTokens()
	ft.baseProfile()
	ft.placeLoads()
	ft.slopes()
	switch o.Engine {
	case engine.Serial:
		ft.serialSteps()
	case engine.Batching:
		ft.batchingSteps()
		ft.batchingFrontend()
	}
	for _, pt := range ft.closedPts {
		if d := coldWaves(res, o.Server, pt, pt.recs); d != "" {
			ft.unexplained("%s", d)
		}
	}
	ft.launchArgv()
	if o.Jitter {
		j, how := fitJitter(ft.low)
		ft.p.StepJitter = j
		ft.note("step jitter: %.4f = %s", j, how)
	}
	// Prompt rendering: keep Qwen's default system prompt when the server's
	// reported prompt tokens show it was rendered.
	sys, how := fitSystemPrompt(res, ft.all, o.Tokenizer, ft.p)
	ft.p.DefaultSystemPrompt = sys
	ft.note("%s", how)
	ft.outputLengths()
	// With prefix caching a prompt's prefill is mostly a cache hit: TTFT
	// growth cannot be read as its prompt tokens.
	if o.Engine == engine.Batching && ft.perTok == 0 && len(ft.closedPts) > 1 && !ft.p.PrefixCaching {
		if err := ft.staggeredPrefill(); err != nil {
			return nil, err
		}
	}
	ft.describe()
	if err := ft.p.Validate(); err != nil {
		return nil, fmt.Errorf("sim: fit: the fitted profile is not valid: %w", err)
	}
	ft.f.Profile = ft.p
	return ft.f, nil
}

// fitter is one fit in progress: the bundle and options, the profile as
// its sections fill it in, what one section reads that a later one uses,
// and the derivation.
type fitter struct {
	res       *bundle.Results
	o         Options
	server    *bundle.Server
	ignoreEOS bool // the workload sets ignore_eos
	f         *Result
	p         *engine.Profile

	points    []fitPoint        // every fitted load, in compareKeys order
	closedPts []fitPoint        // the closed-loop ones
	low       fitPoint          // the lowest load (placeLoads)
	all       []contract.Record // every fitted record
	fitAt     []int             // the closed-loop concurrencies

	// slopeAt is the load the context and prefill slopes were read at,
	// perTok the prefill cost per token (0: none) and preHow why not;
	// prefillMedian is the median prompt's prefill at the lowest load.
	slopeAt       fitPoint
	perTok        float64
	preHow        string
	prefillMedian float64
	// loadPts are the loads the batching decode points came from; nil
	// once the occupancy curve replaces them.
	loadPts []fitPoint
}

func (ft *fitter) note(format string, a ...any) {
	ft.f.Derivation = append(ft.f.Derivation, fmt.Sprintf(format, a...))
}

func (ft *fitter) unexplained(format string, a ...any) {
	ft.f.Unexplained = append(ft.f.Unexplained, fmt.Sprintf(format, a...))
}

// ctxPart is the decode-per-context term of a step at pt's batch and
// context.
func (ft *fitter) ctxPart(pt fitPoint) float64 {
	return ft.p.DecodePerContextTokenS * pt.batch * pt.contextS
}

// newFitter checks the options against the bundle and reads the fitted
// loads' points.
func newFitter(res *bundle.Results, o Options) (*fitter, error) {
	if o.Engine != engine.Serial && o.Engine != engine.Batching {
		return nil, fmt.Errorf("sim: fit: engine %q: want %q or %q", o.Engine, engine.Serial, engine.Batching)
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
	fields, _, err := predict.FieldsOf(res.Workload)
	if err != nil {
		return nil, err
	}
	keys := make([]contract.Key, 0, len(o.FitConcurrencies)+len(o.FitLoads))
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
	ft := &fitter{res: res, o: o, server: server, ignoreEOS: fields.IgnoreEOS, f: &Result{}}
	for _, k := range keys {
		if k.Mode == contract.ModeClosed {
			ft.fitAt = append(ft.fitAt, k.Concurrency)
		}
	}
	return ft, ft.readPoints(keys)
}

// readPoints reads each fitted load's point from its recorded waves.
func (ft *fitter) readPoints(keys []contract.Key) error {
	recs := fitRecords(ft.res, ft.o.Server, keys)
	caching, _ := argvPrefixCaching(ft.server.LaunchArgv)
	ft.points = make([]fitPoint, 0, len(keys))
	for _, k := range keys {
		// A batching engine's cold repeats are left out; a serial one's
		// TTFT is mostly the wait for the lock, whose spread between
		// repeats says nothing of a warm-up.
		// A prefix-caching server's first repeat is slower by design (it
		// fills the cache the later ones hit), and the model has it.
		if kept, why := warmRepeats(k.LoadLabel(), recs[k]); why != "" && ft.o.Engine == engine.Batching && !caching {
			recs[k] = kept
			ft.note("%s", why)
		}
		pt, err := readPoint(k, recs[k])
		if err != nil {
			return fmt.Errorf("sim: fit: server %s: %w", ft.o.Server, err)
		}
		ft.points = append(ft.points, pt)
		ft.all = append(ft.all, recs[k]...)
	}
	return nil
}

// countTokens derives the counted per generated token, from every fitted
// successful record that carries the server's usage.
func (ft *fitter) countTokens() {
	counted, generatedN := 0, 0
	for _, r := range ft.all {
		if r.OK && r.UsageCompletionTokens != nil {
			counted += r.OutputTokens
			generatedN += *r.UsageCompletionTokens
		}
	}
	f := ft.f
	f.CountedPerGeneratedToken = 1
	if generatedN > 0 {
		f.CountedPerGeneratedToken = float64(counted) / float64(generatedN)
		ft.note("counted per generated token: %.4f = %d output_tokens (text re-tokenized) ÷ %d usage_completion_tokens over the fitted successful records", f.CountedPerGeneratedToken, counted, generatedN)
	} else {
		ft.note("counted per generated token: 1 (the server reported no usage)")
	}
}

// baseProfile starts the profile with what the bundle says outright: the
// model, and max_num_seqs from the launch argv.
func (ft *fitter) baseProfile() {
	o := ft.o
	p := &engine.Profile{
		Engine:           o.Engine,
		Model:            ft.res.Provenance.Model.ID,
		MaxModelLen:      o.MaxModelLen,
		ChatTemplate:     "chatml",
		KVTokenBudget:    fitKVTokenBudget,
		MaxNumSeqs:       1,
		PrefillBaseS:     0,
		PrefillPerTokenS: 0,
	}
	if ft.server.Model != "" {
		p.Model = ft.server.Model
	}
	if p.Model == "" {
		p.Model = "unknown"
	}
	if p.MaxModelLen == 0 {
		p.MaxModelLen = 32768
	}
	if o.Engine == engine.Batching {
		p.MaxNumSeqs = fitMaxNumSeqs
		if n, ok := argvInt(ft.server.LaunchArgv, "--max-num-seqs"); ok && n > 0 {
			p.MaxNumSeqs = n
			ft.note("max_num_seqs: %d, from the server's launch argv", n)
		} else {
			ft.note("max_num_seqs: %d assumed (the launch argv does not say --max-num-seqs)", fitMaxNumSeqs)
		}
	}
	ft.p = p
}

// placeLoads sets each closed load's batch (its concurrency, capped at
// max_num_seqs; a serial engine's is 1) and finds the lowest load: the
// smallest batch, and among equals (a serial engine's are all 1) the one of
// least queueing, the smallest median TTFT.
func (ft *fitter) placeLoads() {
	points := ft.points
	for i := range points {
		if points[i].concurrency > 0 {
			points[i].batch = float64(min(points[i].concurrency, ft.p.MaxNumSeqs))
		} else if ft.o.Engine == engine.Serial {
			points[i].batch = 1
		}
	}
	ft.low = points[0]
	for _, pt := range points[1:] {
		if pt.batch < ft.low.batch || (pt.batch == ft.low.batch && pt.ttftS < ft.low.ttftS) {
			ft.low = pt
		}
	}
	for _, pt := range points {
		if pt.concurrency > 0 {
			ft.closedPts = append(ft.closedPts, pt)
		}
	}
}

// slopes fits the context and prefill terms, where requests vary in
// length: read from the requests that ran alone (no other request of their
// wave in flight, so that no other prefill or decode shares their steps),
// of the least-loaded fitted load that has at least minVariedN of them
// with prompts varied by minVariedSpread (the lowest load itself when none
// has).
func (ft *fitter) slopes() {
	p, low := ft.p, ft.low
	slopeAt := low
	slopeRecs := alone(low.recs)
	if len(slopeRecs) < minVariedN {
		slopeRecs = low.recs
	}
	byLoad := slices.Clone(ft.points)
	slices.SortStableFunc(byLoad, func(a, b fitPoint) int { return cmp.Or(cmp.Compare(a.batch, b.batch), cmp.Compare(a.ttftS, b.ttftS)) })
	for _, pt := range byLoad {
		if rs := alone(pt.recs); len(rs) >= minVariedN && promptSpread(rs) >= minVariedSpread {
			slopeAt, slopeRecs = pt, rs
			break
		}
	}
	ft.slopeAt = slopeAt
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
		ft.note("decode per context token: %.3g s = the least-squares slope of TPOT on context (prompt + output ÷ 2) over the %s requests at %s that ran alone (or all, when fewer than %d did)", p.DecodePerContextTokenS, ctxHow, slopeAt.label(), minVariedN)
	} else {
		ft.note("decode per context token: 0 (%s at %s)", ctxHow, slopeAt.label())
	}
	ft.perTok, ft.preHow = slopeOf(slopeRecs, func(r contract.Record) (float64, float64, bool) {
		tpot, ok := recordTPOT(r)
		pt := promptTokensOf(r)
		if !ok || pt < 0 || r.FirstContentS == nil {
			return 0, 0, false
		}
		return float64(pt), *r.FirstContentS - r.StartS - tpot, true
	})
	if ft.perTok > 0 {
		p.PrefillPerTokenS = round9(ft.perTok)
		var pts []float64
		for _, r := range low.recs {
			if n := promptTokensOf(r); r.OK && n >= 0 {
				pts = append(pts, float64(n))
			}
		}
		ft.prefillMedian = p.PrefillPerTokenS * *contract.Median(pts)
		ft.note("prefill per token: %.3g s = the least-squares slope of TTFT − TPOT on usage_prompt_tokens over the %s requests at %s that ran alone (or all, when fewer than %d did)", p.PrefillPerTokenS, ft.preHow, slopeAt.label(), minVariedN)
	}
}

// serialSteps fits a serial engine's one decode step (the mean over the
// fitted loads), its request overhead (from the lowest load's first
// tokens, each counted from the end of the request served before it) and
// no frontend.
func (ft *fitter) serialSteps() {
	p, low, points := ft.p, ft.low, ft.points
	sum := 0.0
	var parts []string
	for _, pt := range points {
		sum += pt.tpotS - ft.ctxPart(pt)
		parts = append(parts, fmt.Sprintf("%.4f s at %s (%d requests)", pt.tpotS, pt.label(), pt.ok))
	}
	step := sum / float64(len(points))
	p.DecodeStepS = [][2]float64{{1, round6(step)}}
	ft.note("decode step (batch 1): %.4f s = the mean over the fitted loads of the median generated TPOT: %s", p.DecodeStepS[0][1], strings.Join(parts, ", "))
	if len(points) > 1 {
		lo, hi := points[0].tpotS, points[0].tpotS
		for _, pt := range points {
			lo, hi = min(lo, pt.tpotS), max(hi, pt.tpotS)
		}
		if hi > 1.1*lo {
			ft.unexplained("the per-token cost differs by %.0f %% between the fitted loads (%s); a serial engine has one step cost, so the mean is used and each side is off by about half the difference", 100*(hi/lo-1), strings.Join(parts, ", "))
		}
	}
	p.RequestOverheadS = round6(max(0, low.servedLessTPO-ft.prefillMedian))
	ft.note("request overhead: %.4f s = median of TTFT − TPOT over the %d successful requests at %s (the first token costs one step), each TTFT from its send or from the end of the request served before it, whichever is later%s", p.RequestOverheadS, low.ok, low.label(), lessPrefill(ft.prefillMedian))
	if low.servedLessTPO < low.ttftLessTPO-1e-9 {
		ft.unexplained("at %s, the least-loaded fitted load, requests waited for the lock: the request overhead is read from the time between the previous request's end and the first token, which hides an overhead paid while waiting; a serial profile fitted here may undershoot the TTFT of an idle server", low.label())
	}
	if ft.perTok == 0 {
		ft.note("frontend: 0 s per request; prefill: 0 (%s at %s: a prefill cost cannot be told apart from the overhead)", ft.preHow, ft.slopeAt.label())
	} else {
		ft.note("frontend: 0 s per request")
	}
	if len(ft.closedPts) > 1 {
		high := ft.closedPts[len(ft.closedPts)-1]
		predicted := p.RequestOverheadS + step
		if high.firstTTFTS > 2*predicted {
			ft.unexplained("at %s the first request served waited %.3f s for its first token (median over the waves of the smallest TTFT) against %.3f s at %s: the server seems to take in the whole wave before it streams to the first (one event loop); the model's serial engine starts it after %.3f s", high.label(), high.firstTTFTS, low.ttftS, low.label(), predicted)
		}
	}
}

// batchingSteps fits a batching engine's decode steps: one point per batch
// size seen, linear in between, or the occupancy curve where those points
// miss the step measured at some occupancy (occupancyCurve).
func (ft *fitter) batchingSteps() {
	p := ft.p
	byBatch := slices.Clone(ft.points)
	slices.SortStableFunc(byBatch, func(a, b fitPoint) int { return cmp.Compare(a.batch, b.batch) })
	var pts [][2]float64
	for _, pt := range byBatch {
		batch := math.Max(1, math.Round(pt.batch*100)/100)
		if len(pts) > 0 && pts[len(pts)-1][0] >= batch {
			ft.unexplained("%s runs at the same batch size (%g) as a lower fitted load; its TPOT %.4f s is not used", pt.label(), batch, pt.tpotS)
			continue
		}
		ft.loadPts = append(ft.loadPts, pt)
		tpot := pt.tpotS
		if p.PrefillPerTokenS > 0 {
			tpot = decodeTPOT(pt.recs, p.PrefillPerTokenS)
		}
		step := round6(max(tpot-ft.ctxPart(pt), 1e-6))
		pts = append(pts, [2]float64{batch, step})
		how := "its concurrency"
		if pt.concurrency == 0 {
			how = "its measured decode occupancy"
		}
		if p.PrefillPerTokenS > 0 {
			how += "; each request's TPOT less the prefill of the other requests whose first token came while it streamed, and less the context term"
		}
		ft.note("decode step at batch %g (%s): %.4f s = median generated TPOT of the %d successful requests at %s", batch, how, step, pt.ok, pt.label())
	}
	p.DecodeStepS = pts
	pts = ft.occupancyCurve(pts)
	if len(pts) > 1 {
		ft.note("decode step between the points: linear; beyond batch %g: along the last segment (not measured)", pts[len(pts)-1][0])
	} else {
		ft.note("decode step: the same at every batch size (one fitted load)")
	}
}

// occupancyCurve replaces the per-load decode points pts with the curve
// read from every inter-token gap of the fitted requests, binned by how
// many of their wave's requests were streaming, where the points miss the
// step measured at some occupancy by over occupancyMiss and the fit has no
// prefill or context term the curve would count twice. It returns the
// decode points in use.
func (ft *fitter) occupancyCurve(pts [][2]float64) [][2]float64 {
	p := ft.p
	occ, ns := occupancySteps(ft.all, p.MaxNumSeqs)
	if len(occ) < 2 {
		return pts
	}
	miss, at, model := worstMiss(pts, occ)
	if miss <= occupancyMiss {
		return pts
	}
	if p.PrefillPerTokenS > 0 || p.DecodePerContextTokenS > 0 {
		ft.unexplained("the per-load decode points miss the step measured at %g streaming requests by %.0f %% (%.4f s against %.4f s), but the fit has prefill or context terms the occupancy curve would count twice; the per-load points are kept", at, 100*miss, model, occupancyAt(occ, at))
		return pts
	}
	total := 0
	for _, n := range ns {
		total += n
	}
	p.DecodeStepS, ft.loadPts = thinSteps(occ), nil
	ft.note("decode step by occupancy: the per-load points miss the step measured at %g streaming requests by %.0f %% (%.4f s against %.4f s), so the curve is read from the %d inter-token gaps of the fitted requests instead, binned by how many of their wave's requests were streaming at each gap's midpoint: the median gap of each occupancy with at least %d gaps (%d occupancies from %g to %g), made non-decreasing, points the line between their neighbours misses by under %.0f %% dropped: %s", at, 100*miss, model, occupancyAt(occ, at), total, minGapsPerBin, len(occ), occ[0][0], occ[len(occ)-1][0], 100*occupancyKeep, formatSteps(p.DecodeStepS))
	return p.DecodeStepS
}

// batchingFrontend fits a batching engine's frontend (the median TTFT's
// growth from the lowest to the highest fitted closed concurrency, read as
// a queue) and its request overhead (what is left of the lowest load's
// first token).
func (ft *fitter) batchingFrontend() {
	p, low, closedPts := ft.p, ft.low, ft.closedPts
	if len(closedPts) > 1 {
		lowC, high := closedPts[0], closedPts[len(closedPts)-1]
		fs := 2 * (high.ttftS - lowC.ttftS) / float64(high.concurrency-lowC.concurrency)
		p.FrontendSPerRequest = round6(max(0, fs))
		ft.note("frontend: %.4f s per request = 2 · (median TTFT %.4f s at %s − %.4f s at %d) ÷ (%d − %d): a queue every request passes one after another, whose median wait matches", p.FrontendSPerRequest, high.ttftS, high.label(), lowC.ttftS, lowC.concurrency, high.concurrency, lowC.concurrency)
	} else {
		ft.note("frontend: 0 s per request (fewer than two fitted closed-loop concurrencies: arrivals spread over time do not show a frontend queue)")
	}
	p.RequestOverheadS = round6(max(0, low.ttftLessTPO-p.FrontendSPerRequest-ft.prefillMedian))
	ft.note("request overhead: %.4f s = median of TTFT − TPOT over the %d successful requests at %s, less the frontend's %.4f s%s", p.RequestOverheadS, low.ok, low.label(), p.FrontendSPerRequest, lessPrefill(ft.prefillMedian))
	if ft.perTok == 0 {
		ft.note("prefill: 0 and no per-step token budget (%s at %s: a prefill cost cannot be told apart from the overhead)", ft.preHow, ft.slopeAt.label())
	}
	if p.FrontendSPerRequest > 0 && low.ttftLessTPO < p.FrontendSPerRequest {
		ft.unexplained("at %s the first token comes %.4f s after one step's time, less than the %.4f s frontend slot the %s TTFT growth implies: the server does not make every request wait its turn; it admits arrivals in groups, which the model's one-at-a-time frontend spreads evenly", low.label(), low.ttftLessTPO, p.FrontendSPerRequest, closedPts[len(closedPts)-1].label())
	}
}

// launchArgv reads the KV budget and prefix caching from the server's
// launch argv.
func (ft *fitter) launchArgv() {
	if kv, how := argvKVBudget(ft.server.LaunchArgv); kv > 0 {
		ft.p.KVTokenBudget = kv
		ft.note("kv_token_budget: %d tokens, %s", kv, how)
	}
	if on, how := argvPrefixCaching(ft.server.LaunchArgv); on {
		ft.p.PrefixCaching = true
		ft.note("prefix caching: on, %s", how)
	} else {
		ft.note("prefix caching: off (%s; rehearse sim --prefix-caching on turns it on)", how)
	}
}

// outputLengths fits the output lengths: max_tokens when the workload sets
// ignore_eos, else each prompt's median generated length where it stopped.
func (ft *fitter) outputLengths() {
	wl, p := ft.res.Workload, ft.p
	if ft.ignoreEOS {
		p.OutputTokens = []int{wl.MaxTokens}
		if len(wl.PromptMaxTokens) > 0 {
			ft.note("output lengths: each prompt's own max_tokens: the workload sets ignore_eos, so every request runs to its max_tokens; where the model would stop on its own is not measured")
		} else {
			ft.note("output lengths: %d (max_tokens): the workload sets ignore_eos, so every request runs to max_tokens; where the model would stop on its own is not measured", wl.MaxTokens)
		}
		return
	}
	byPrompt, fallback := naturalLengths(wl, ft.all)
	p.OutputTokensByPrompt = byPrompt
	p.OutputTokens = []int{fallback}
	ft.note("output lengths: per prompt, the median generated tokens of its fitted requests that stopped on their own (%d prompts); a prompt that always reached max_tokens gets max_model_len; any other prompt %d", len(byPrompt), fallback)
}

// decodeAt is the per-load decode points with the prefill of perTok per
// prompt token of the other requests that shared their steps taken out
// (the occupancy curve's median gaps are mostly steps without one, and
// are kept).
func (ft *fitter) decodeAt(perTok float64) [][2]float64 {
	p := ft.p
	if ft.loadPts == nil || perTok == 0 {
		return p.DecodeStepS
	}
	out := slices.Clone(p.DecodeStepS)
	for i, pt := range ft.loadPts {
		out[i][1] = round6(max(decodeTPOT(pt.recs, perTok)-ft.ctxPart(pt), 1e-6))
	}
	return out
}

// describe names the profile and describes it, where the options do not.
func (ft *fitter) describe() {
	o, p := ft.o, ft.p
	p.Name = o.Name
	if p.Name == "" {
		p.Name = o.Server + "-" + o.Engine + "-fit"
	}
	p.Description = o.Description
	if p.Description == "" {
		var labels []string
		if len(ft.fitAt) > 0 {
			labels = append(labels, joinInts(ft.fitAt)+" clients")
		}
		for _, pt := range ft.points {
			if pt.concurrency == 0 {
				labels = append(labels, pt.label())
			}
		}
		p.Description = fmt.Sprintf("Fitted by rehearse sim fit to server %s of a bundle (%s, %s) on its waves at %s.",
			o.Server, p.Model, gpuName(ft.res), strings.Join(labels, "; "))
	}
}

// lessPrefill says what the overhead lost to the median prompt's prefill.
func lessPrefill(s float64) string {
	if s == 0 {
		return ""
	}
	return fmt.Sprintf(", less the median prompt's prefill (%.4f s)", s)
}
