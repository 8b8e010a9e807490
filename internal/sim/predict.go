package sim

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/workload"
)

// ClosedWorkload is the closed-loop workload a prediction runs: waves of N
// clients released together, one request each, prompts assigned round-robin.
type ClosedWorkload struct {
	Concurrencies []int
	Repeats       int
	Prompts       []string
	MaxTokens     int
	TimeoutS      float64
	// IgnoreEOS and MinTokens are the request fields of the same names.
	IgnoreEOS bool
	MinTokens int
	// PromptMaxTokens is each prompt's own max_tokens, aligned with
	// Prompts (0 or absent: MaxTokens), as workload.prompt_max_tokens: a
	// length distribution's output lengths.
	PromptMaxTokens []int
}

// WorkloadOf reads the closed-loop workload of a bundle (of kind closed, or
// closed+open: its closed waves; its open-loop waves are not read here).
// Request fields of
// workload.extra_body other than ignore_eos and min_tokens do not change what
// the simulated engine does; they come back as notes.
func WorkloadOf(res *bundle.Results) (ClosedWorkload, []string, error) {
	wl := res.Workload
	if wl.Kind != "" && wl.Kind != contract.ModeClosed && wl.Kind != contract.ModeClosed+"+"+contract.ModeOpen {
		return ClosedWorkload{}, nil, fmt.Errorf("sim: bundle workload.kind = %q: only closed-loop waves can be fitted and predicted", wl.Kind)
	}
	w := ClosedWorkload{
		Concurrencies: slices.Clone(wl.Concurrencies),
		Repeats:       wl.Repeats,
		Prompts:       wl.Prompts,
		MaxTokens:     wl.MaxTokens,
		TimeoutS:      wl.TimeoutS,
	}
	if err := checkModelled(wl); err != nil {
		return ClosedWorkload{}, nil, err
	}
	w.PromptMaxTokens = wl.PromptMaxTokens
	ignoreEOS, minTokens, notes, err := requestFields(wl.ExtraBody)
	if err != nil {
		return ClosedWorkload{}, nil, err
	}
	w.IgnoreEOS, w.MinTokens = ignoreEOS, minTokens
	return w, notes, w.validate()
}

// requestFields reads the request fields of a workload's extra_body that
// the simulated engine models, ignore_eos and min_tokens; the others come
// back as notes.
func requestFields(extra map[string]any) (ignoreEOS bool, minTokens int, notes []string, err error) {
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := extra[k]
		switch k {
		case "ignore_eos":
			b, ok := v.(bool)
			if !ok {
				return false, 0, nil, fmt.Errorf("sim: bundle workload.extra_body.ignore_eos = %v: want true or false", v)
			}
			ignoreEOS = b
		case "min_tokens":
			f, ok := number(v)
			if !ok || f < 0 || f != math.Trunc(f) {
				return false, 0, nil, fmt.Errorf("sim: bundle workload.extra_body.min_tokens = %v: want a whole number >= 0", v)
			}
			minTokens = int(f)
		default:
			notes = append(notes, fmt.Sprintf("workload.extra_body.%s is sent by the rehearsal but not modelled by the simulator", k))
		}
	}
	return ignoreEOS, minTokens, notes, nil
}

// number is v as a float64: a JSON number, or an integer a YAML file gave.
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case uint64:
		return float64(x), true
	}
	return 0, false
}

func (w ClosedWorkload) validate() error {
	switch {
	case len(w.Concurrencies) == 0:
		return fmt.Errorf("sim: workload has no concurrencies")
	case w.Repeats < 1:
		return fmt.Errorf("sim: workload repeats = %d, want >= 1", w.Repeats)
	case len(w.Prompts) == 0:
		return fmt.Errorf("sim: workload has no prompts")
	case w.MaxTokens < 1:
		return fmt.Errorf("sim: workload max_tokens = %d, want >= 1", w.MaxTokens)
	case !(w.TimeoutS > 0) || !finite(w.TimeoutS):
		return fmt.Errorf("sim: workload timeout_s = %g, want > 0", w.TimeoutS)
	case w.MinTokens > w.MaxTokens:
		return fmt.Errorf("sim: workload min_tokens = %d is above max_tokens %d", w.MinTokens, w.MaxTokens)
	case len(w.PromptMaxTokens) > 0 && len(w.PromptMaxTokens) != len(w.Prompts):
		return fmt.Errorf("sim: workload has %d prompt max_tokens for %d prompts", len(w.PromptMaxTokens), len(w.Prompts))
	}
	for i, n := range w.PromptMaxTokens {
		if n < 0 {
			return fmt.Errorf("sim: workload prompt %d: max_tokens %d, want >= 0", i, n)
		}
	}
	for _, c := range w.Concurrencies {
		if c < 1 || c > 1<<16 {
			return fmt.Errorf("sim: workload concurrency %d: want 1 to 65536", c)
		}
	}
	return nil
}

// PredictOptions configures a prediction.
type PredictOptions struct {
	// Server names the simulated server in the predicted records.
	Server string
	// Seed drives the output lengths of prompts the profile does not pin.
	Seed int64
	// Tokenizer counts prompt tokens through the profile's chat template;
	// nil means the pinned default tokenizer.
	Tokenizer Counter
}

// A prediction counts output tokens as generated tokens, exactly as the
// served simulator does: its text re-tokenizes to the tokens its engine
// emitted, so a client counts output_tokens = usage_completion_tokens. The
// predictor and the live simulator are one engine model, and neither
// applies a bundle's re-tokenization ratio (random-weight text re-tokenizes
// to about 1.06 tokens per generated one): that ratio is an artifact of the
// measured model's text, not of the engine, and a real model's text
// round-trips. A comparison with a bundle counts the bundle's records in
// generated tokens instead (GeneratedCounts), so predicted, live and
// measured figures all speak the engine's tokens.

// Prediction is what the simulated engine does under a closed-loop
// workload: its waves and records, in the contract's terms, and the
// contract's aggregates of them.
type Prediction struct {
	Waves      []contract.Wave
	Records    []contract.Record
	Aggregates []contract.Aggregate
}

// Predict runs every wave of the workload (each concurrency, each repeat)
// through the profile's engine on a virtual clock and aggregates the
// records with the contract, so that predicted and measured figures are
// defined identically. The engine is the served simulator's own scheduling
// code, stepped without a wall clock; the virtual timeline is the one the
// served simulator follows on a fake clock, and a test holds them equal. It
// is deterministic: the same profile and workload give the same records.
func Predict(p *Profile, w ClosedWorkload, o PredictOptions) (*Prediction, error) {
	o, plans, cache, err := prepare(p, w, o)
	if err != nil {
		return nil, err
	}

	pr := &Prediction{}
	concurrencies := slices.Clone(w.Concurrencies)
	slices.Sort(concurrencies)
	concurrencies = slices.Compact(concurrencies)
	for _, n := range concurrencies {
		for rep := 1; rep <= w.Repeats; rep++ {
			reqs := make([]*virtualRequest, n)
			for c := range n {
				prompt := workload.PromptIndex(c, len(w.Prompts))
				reqs[c] = plans[prompt].request(c, prompt)
			}
			if err := runVirtual(p, reqs, w.TimeoutS, cache, nil); err != nil {
				return nil, err
			}
			wave := contract.Wave{ID: len(pr.Waves), Server: o.Server, Concurrency: n, Repeat: rep, Kind: contract.KindRecorded, Mode: contract.ModeClosed}
			recs := make([]contract.Record, 0, n)
			for _, r := range reqs {
				recs = append(recs, r.record(wave, 0))
			}
			wave.WallS = contract.WaveWallS(recs)
			pr.Waves = append(pr.Waves, wave)
			pr.Records = append(pr.Records, recs...)
		}
	}
	pr.Aggregates = contract.Aggregates(pr.Waves, pr.Records, []string{o.Server}, "")
	return pr, nil
}

// promptWorkload is a workload whose requests a prediction plans.
type promptWorkload interface {
	validate() error
	requests() requestSpec
}

// requestSpec is what every request of a workload sends: its prompts and
// request fields.
type requestSpec struct {
	prompts         []string
	maxTokens       int
	promptMaxTokens []int
	minTokens       int
	ignoreEOS       bool
}

// maxTokensOf is the max_tokens prompt i is sent with (plan.Load's).
func (r requestSpec) maxTokensOf(i int) int {
	if i < len(r.promptMaxTokens) && r.promptMaxTokens[i] > 0 {
		return r.promptMaxTokens[i]
	}
	return r.maxTokens
}

func (w ClosedWorkload) requests() requestSpec {
	return requestSpec{w.Prompts, w.MaxTokens, w.PromptMaxTokens, w.MinTokens, w.IgnoreEOS}
}

// checkModelled refuses what a prediction cannot send: prompts that are
// whole conversations, multi-turn sessions.
func checkModelled(wl bundle.Workload) error {
	switch {
	case len(wl.PromptMessages) > 0:
		return fmt.Errorf("sim: the prompts are whole conversations; a prediction sends one user message")
	case len(wl.Sessions) > 0:
		return fmt.Errorf("sim: the workload runs multi-turn sessions, which a prediction does not model")
	}
	return nil
}

// prepare is what every prediction starts from: the profile and workload
// checked, o's defaults filled, every prompt planned and the run's prefix
// cache.
func prepare(p *Profile, w promptWorkload, o PredictOptions) (PredictOptions, []promptPlan, *prefixCache, error) {
	if err := checkPredictable(p); err != nil {
		return o, nil, nil, err
	}
	if err := w.validate(); err != nil {
		return o, nil, nil, err
	}
	if o.Server == "" {
		o.Server = p.Name
	}
	plans, cache, err := planPrompts(p, w.requests(), o)
	return o, plans, cache, err
}

// checkPredictable refuses a profile the virtual engine cannot run.
func checkPredictable(p *Profile) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("sim: profile %s: %w", p.Name, err)
	}
	if p.Engine == EngineSerial && p.MaxNumSeqs != 1 {
		return fmt.Errorf("sim: profile %s: the serial engine runs one sequence at a time; max_num_seqs %d is not 1", p.Name, p.MaxNumSeqs)
	}
	return nil
}

// promptPlan is what one prompt costs and yields, decided as the server's
// request parsing decides it.
type promptPlan struct {
	promptTokens, outputTokens, maxTokens int
	blocks                                []uint64
}

// request is a virtual request of client sending the prompt of index
// prompt, planned as pl.
func (pl promptPlan) request(client, prompt int) *virtualRequest {
	return &virtualRequest{client: client, prompt: prompt, promptTokens: pl.promptTokens, outputTokens: pl.outputTokens, maxTokens: pl.maxTokens, blocks: pl.blocks}
}

// planPrompts plans every prompt of a workload through the profile's chat
// template and output lengths, each with its own prompt tokens and
// max_tokens, as the served simulator's request parsing decides them, and
// returns the prefix cache of the whole run (nil for none): one served
// simulator keeps it from wave to wave.
func planPrompts(p *Profile, rs requestSpec, o PredictOptions) ([]promptPlan, *prefixCache, error) {
	prompts, minTokens, ignoreEOS := rs.prompts, rs.minTokens, rs.ignoreEOS
	counter := o.Tokenizer
	if counter == nil {
		c, err := defaultCounter()
		if err != nil {
			return nil, nil, fmt.Errorf("sim: tokenizer: %w", err)
		}
		counter = c
	}
	var cache *prefixCache
	var enc Encoder
	if p.PrefixCaching {
		var ok bool
		if enc, ok = counter.(Encoder); !ok {
			return nil, nil, fmt.Errorf("sim: profile %s caches prefixes, and the tokenizer only counts tokens", p.Name)
		}
		cache = newPrefixCache(p.KVTokenBudget)
	}
	plans := make([]promptPlan, len(prompts))
	for i, text := range prompts {
		maxTokens := rs.maxTokensOf(i)
		msgs := []chatMessage{{Role: "user", Content: text}}
		var blocks []uint64
		var pt int
		if enc != nil {
			ids := enc.Encode(renderChat(p, msgs))
			pt, blocks = len(ids), blockHashes(ids)
		} else {
			pt = counter.Count(renderChat(p, msgs))
		}
		if pt+maxTokens > p.MaxModelLen {
			return nil, nil, fmt.Errorf("sim: prompt %d: %d prompt tokens + max_tokens %d exceed the profile's max_model_len %d", i, pt, maxTokens, p.MaxModelLen)
		}
		if pt+maxTokens > p.KVTokenBudget {
			return nil, nil, fmt.Errorf("sim: prompt %d: %d prompt tokens + max_tokens %d exceed the profile's kv_token_budget %d", i, pt, maxTokens, p.KVTokenBudget)
		}
		if minTokens > maxTokens {
			return nil, nil, fmt.Errorf("sim: prompt %d: min_tokens %d is above its max_tokens %d", i, minTokens, maxTokens)
		}
		n := max(p.NaturalOutputTokens(o.Seed, text), minTokens)
		if ignoreEOS {
			n = maxTokens
		}
		plans[i] = promptPlan{pt, min(n, maxTokens), maxTokens, blocks}
	}
	return plans, cache, nil
}

// virtualRequest is one client's request in a virtual run.
type virtualRequest struct {
	client, prompt                        int
	promptTokens, outputTokens, maxTokens int
	blocks                                []uint64

	// atS is when a first request of a run is sent (0 for closed waves
	// and sustained loops; an open-loop arrival's offset).
	atS float64

	seq       *sequence
	tokensS   []float64 // simulated time of every token the engine produced
	sentS     float64   // when its client sends it
	engineAtS float64   // when the request reaches the engine's queue
	deadlineS float64   // when its client gives up
	// afterStep is the engine step before whose end the request cannot
	// join the batch: a sustained client's next request, sent with no
	// overhead or frontend at the end of the step that ended its last one,
	// reaches the engine after it has planned the next step (the served
	// engine starts that step as it applies the last, before the client's
	// next request is read), unless the engine is idle.
	afterStep int64
}

// nextRequest is a virtual run's clients' behaviour: once request r has
// ended for its client at endS (its last token, or the client gave up),
// it returns the request that client sends next, at endS, or nil when the
// client sends no more. Nil: every client sends one request.
type nextRequest func(r *virtualRequest, endS float64) *virtualRequest

// runVirtual sends the first requests at their atS (0 but for open-loop
// arrivals), in order (atS must not decrease), and steps the
// engine until each request (and each one next hands out as an earlier
// one ends) has finished or its client has given up, exactly as the
// served simulator's handlers and engine goroutine do it on a clock: the
// parallel request overhead, the serial frontend in the order requests
// reach it, then the engine loop (drop canceled, preempt, admit, plan,
// step, apply). A closed wave is next == nil; a sustained closed loop
// hands each client its next request as its last one ends.
//
// cache is the engine's prefix cache, nil for none; it outlives the run.
func runVirtual(p *Profile, first []*virtualRequest, timeoutS float64, cache *prefixCache, next nextRequest) error {
	maxSeqs, batchTokens := p.MaxNumSeqs, p.MaxNumBatchedTokens
	if p.Engine == EngineSerial {
		maxSeqs, batchTokens = 1, 0
	}
	e := &engine{prof: p, maxSeqs: maxSeqs, batchTokens: batchTokens, kvBudget: p.KVTokenBudget, cache: cache, ttft: newHistogram(ttftBuckets)}
	frontendFree := 0.0
	// pending are the requests sent and not yet at the engine, by
	// engineAtS (in the order they reached the frontend among equals);
	// inFlight those at the engine whose clients still wait.
	var pending, inFlight []*virtualRequest
	sent := 0
	send := func(r *virtualRequest, atS float64) {
		sent++
		at := atS + p.RequestOverheadS
		if p.FrontendSPerRequest > 0 {
			at = max(at, frontendFree) + p.FrontendSPerRequest
			frontendFree = at
		}
		r.sentS, r.engineAtS, r.deadlineS = atS, at, atS+timeoutS
		r.seq = &sequence{promptTokens: r.promptTokens, blocks: r.blocks, outputTokens: r.outputTokens, notify: make(chan struct{}, 1), prefillLeft: r.promptTokens, tokenTimesS: &r.tokensS}
		i := sort.Search(len(pending), func(i int) bool { return pending[i].engineAtS > at })
		pending = slices.Insert(pending, i, r)
	}
	ended := func(r *virtualRequest, atS float64) {
		if next == nil {
			return
		}
		if n := next(r, atS); n != nil {
			send(n, atS)
			if n.engineAtS <= atS {
				n.afterStep = e.steps.Load() + 1
			}
		}
	}
	for i, r := range first {
		if i > 0 && r.atS < first[i-1].atS {
			return fmt.Errorf("sim: virtual run: request %d is sent at %g s, before request %d at %g s", i, r.atS, i-1, first[i-1].atS)
		}
		send(r, r.atS)
	}
	vnow := 0.0
	for steps := 0; ; steps++ {
		if steps > 1e8 {
			return fmt.Errorf("sim: virtual run of %d requests did not finish in 1e8 steps", sent)
		}
		kept := inFlight[:0]
		for _, r := range inFlight {
			if r.deadlineS <= vnow {
				r.seq.canceled.Store(true)
				ended(r, r.deadlineS)
				continue
			}
			kept = append(kept, r)
		}
		clear(inFlight[len(kept):])
		inFlight = kept
		for len(pending) > 0 && pending[0].engineAtS <= vnow {
			r := pending[0]
			if r.afterStep > e.steps.Load() && (len(e.running) > 0 || len(e.waiting) > 0) {
				break // it joins after the step the engine starts now
			}
			pending = pending[1:]
			if r.engineAtS < r.deadlineS {
				e.waiting = append(e.waiting, r.seq)
				inFlight = append(inFlight, r)
			} else { // the client left while in the frontend
				ended(r, r.deadlineS)
			}
		}
		e.dropCanceled()
		if len(e.running) == 0 && len(e.waiting) == 0 {
			if len(pending) == 0 {
				return nil
			}
			vnow = max(vnow, pending[0].engineAtS)
			continue
		}
		e.preempt()
		e.admit()
		if len(e.running) == 0 {
			return fmt.Errorf("sim: profile %s: the queue head cannot be admitted (kv_token_budget %d)", p.Name, p.KVTokenBudget)
		}
		inStep, prefillTokens, contextTokens := e.planStep()
		target := vnow + p.stepModelS(e.steps.Load(), inStep, prefillTokens, contextTokens)
		e.steps.Add(1)
		e.applyStep(target)
		vnow = target
		kept = inFlight[:0]
		for _, r := range inFlight {
			// A request whose last token came after its deadline ends
			// when its client gives up, at the loop's head.
			if got := len(r.tokensS); got == r.outputTokens && r.tokensS[got-1] <= r.deadlineS {
				ended(r, r.tokensS[got-1])
				continue
			}
			kept = append(kept, r)
		}
		clear(inFlight[len(kept):])
		inFlight = kept
	}
}

// record is the contract's record of the request as its client saw it,
// its times from releaseS, the release of its wave.
// Its output_tokens are its generated tokens, as the served simulator's
// text re-tokenizes.
func (r *virtualRequest) record(w contract.Wave, releaseS float64) contract.Record {
	rec := contract.Record{
		Kind: w.Kind, Server: w.Server, Concurrency: w.Concurrency, Repeat: w.Repeat, Wave: w.ID,
		Client: r.client, Prompt: r.prompt, ChunkTimesS: []float64{},
		StartS: r.sentS - releaseS,
	}
	for _, t := range r.tokensS {
		if t > r.deadlineS {
			break
		}
		rec.ChunkTimesS = append(rec.ChunkTimesS, t-releaseS)
	}
	got := len(rec.ChunkTimesS)
	if got > 0 {
		first := rec.ChunkTimesS[0]
		rec.FirstContentS = &first
	}
	counted := got
	if got == r.outputTokens {
		rec.OK, rec.HTTPStatus = true, 200
		rec.EndS = rec.ChunkTimesS[got-1]
		rec.OutputTokens = counted
		usage, prompt := got, r.promptTokens
		rec.UsageCompletionTokens, rec.UsagePromptTokens = &usage, &prompt
		rec.FinishReason = "stop"
		if got == r.maxTokens {
			rec.FinishReason = "length"
		}
		return rec
	}
	if r.engineAtS < r.deadlineS {
		rec.HTTPStatus = 200 // the simulator answers once the engine has the request
	}
	rec.EndS = r.deadlineS - releaseS
	rec.OutputTokens = counted
	rec.ErrorKind = contract.ErrTimeout
	timeoutS := r.deadlineS - r.sentS
	if got == 0 {
		rec.Error = fmt.Sprintf("predicted: client timeout after %g s before the first token", timeoutS)
	} else {
		rec.Error = fmt.Sprintf("predicted: client timeout after %g s with %d of %d tokens", timeoutS, got, r.outputTokens)
	}
	return rec
}
