package engine

import (
	"fmt"
	"slices"
	"sort"
)

// Request is one client's request in a virtual run (Run). The caller sets
// the fields above the line; the run writes those below it.
type Request struct {
	// Client and Prompt say which client sends the request and which of
	// its workload's prompts it carries; the run reads neither.
	Client, Prompt int
	// PromptTokens and OutputTokens are what it costs and yields;
	// MaxTokens is the max_tokens it was sent with (the run does not read
	// it: OutputTokens is already within it).
	PromptTokens, OutputTokens, MaxTokens int
	// Blocks is the prompt's block hash chain (BlockHashes), for a prefix
	// cache.
	Blocks []uint64
	// AtS is when a first request of a run is sent (0 for closed waves
	// and sustained loops; an open-loop arrival's offset).
	AtS float64

	// TokensS is the simulated time of every token the engine produced.
	TokensS []float64
	// SentS is when its client sent it, EngineAtS when it reached the
	// engine's queue and DeadlineS when its client gives up.
	SentS, EngineAtS, DeadlineS float64

	seq *Sequence
	// afterStep is the engine step before whose end the request cannot
	// join the batch: a sustained client's next request, sent with no
	// overhead or frontend at the end of the step that ended its last one,
	// reaches the engine after it has planned the next step (the served
	// engine starts that step as it applies the last, before the client's
	// next request is read), unless the engine is idle.
	afterStep int64
}

// Next is a virtual run's clients' behaviour: once request r has ended for
// its client at endS (its last token, or the client gave up), it returns
// the request that client sends next, at endS, or nil when the client
// sends no more. Nil: every client sends one request.
type Next func(r *Request, endS float64) *Request

// Run sends the first requests at their AtS, in order (AtS must not
// decrease), and steps the engine on a virtual clock until each request
// (and each one next hands out as an earlier one ends) has finished or its
// client has given up after timeoutS, exactly as the served simulator's
// handlers and engine goroutine do it on a clock: the parallel request
// overhead, the serial frontend in the order requests reach it, then the
// engine loop (drop canceled, preempt, admit, plan, step, apply). A closed
// wave is next == nil; a sustained closed loop hands each client its next
// request as its last one ends.
//
// cache is the engine's prefix cache, nil for none; it outlives the run.
func Run(p *Profile, first []*Request, timeoutS float64, cache *PrefixCache, next Next) error {
	maxSeqs, batchTokens := p.MaxNumSeqs, p.MaxNumBatchedTokens
	if p.Engine == Serial {
		maxSeqs, batchTokens = 1, 0
	}
	e := &Engine{prof: p, maxSeqs: maxSeqs, batchTokens: batchTokens, kvBudget: p.KVTokenBudget, cache: cache, ttft: newHistogram(ttftBuckets)}
	v := &virtualRun{p: p, e: e, timeoutS: timeoutS, next: next}
	for i, r := range first {
		if i > 0 && r.AtS < first[i-1].AtS {
			return fmt.Errorf("sim: virtual run: request %d is sent at %g s, before request %d at %g s", i, r.AtS, i-1, first[i-1].AtS)
		}
		v.send(r, r.AtS)
	}
	vnow := 0.0
	for steps := 0; ; steps++ {
		if steps > 1e8 {
			return fmt.Errorf("sim: virtual run of %d requests did not finish in 1e8 steps", v.sent)
		}
		v.expire(vnow)
		v.arrive(vnow)
		e.dropCanceled()
		if len(e.running) == 0 && len(e.waiting) == 0 {
			if len(v.pending) == 0 {
				return nil
			}
			vnow = max(vnow, v.pending[0].EngineAtS)
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
		v.finish()
	}
}

// virtualRun is the clients' side of a virtual run: the frontend, the
// requests on their way to the engine and those waiting at it.
type virtualRun struct {
	p        *Profile
	e        *Engine
	timeoutS float64
	next     Next

	frontendFree float64
	// pending are the requests sent and not yet at the engine, by
	// EngineAtS (in the order they reached the frontend among equals);
	// inFlight those at the engine whose clients still wait.
	pending, inFlight []*Request
	sent              int
}

// send sends r at atS: it reaches the engine after the request overhead
// and its turn through the frontend.
func (v *virtualRun) send(r *Request, atS float64) {
	v.sent++
	at := atS + v.p.RequestOverheadS
	if v.p.FrontendSPerRequest > 0 {
		at = max(at, v.frontendFree) + v.p.FrontendSPerRequest
		v.frontendFree = at
	}
	r.SentS, r.EngineAtS, r.DeadlineS = atS, at, atS+v.timeoutS
	r.seq = &Sequence{PromptTokens: r.PromptTokens, Blocks: r.Blocks, OutputTokens: r.OutputTokens, notify: make(chan struct{}, 1), prefillLeft: r.PromptTokens, tokenTimesS: &r.TokensS}
	i := sort.Search(len(v.pending), func(i int) bool { return v.pending[i].EngineAtS > at })
	v.pending = slices.Insert(v.pending, i, r)
}

// ended sends what r's client sends next, now that r has ended at atS.
func (v *virtualRun) ended(r *Request, atS float64) {
	if v.next == nil {
		return
	}
	if n := v.next(r, atS); n != nil {
		v.send(n, atS)
		if n.EngineAtS <= atS {
			n.afterStep = v.e.steps.Load() + 1
		}
	}
}

// expire cancels the requests at the engine whose clients gave up by vnow.
func (v *virtualRun) expire(vnow float64) {
	kept := v.inFlight[:0]
	for _, r := range v.inFlight {
		if r.DeadlineS <= vnow {
			r.seq.canceled.Store(true)
			v.ended(r, r.DeadlineS)
			continue
		}
		kept = append(kept, r)
	}
	clear(v.inFlight[len(kept):])
	v.inFlight = kept
}

// arrive queues at the engine the requests that reached it by vnow.
func (v *virtualRun) arrive(vnow float64) {
	e := v.e
	for len(v.pending) > 0 && v.pending[0].EngineAtS <= vnow {
		r := v.pending[0]
		if r.afterStep > e.steps.Load() && (len(e.running) > 0 || len(e.waiting) > 0) {
			break // it joins after the step the engine starts now
		}
		v.pending = v.pending[1:]
		if r.EngineAtS < r.DeadlineS {
			e.waiting = append(e.waiting, r.seq)
			v.inFlight = append(v.inFlight, r)
		} else { // the client left while in the frontend
			v.ended(r, r.DeadlineS)
		}
	}
}

// finish ends the requests whose last token came in time. A request whose
// last token came after its deadline ends when its client gives up, at the
// loop's head (expire).
func (v *virtualRun) finish() {
	kept := v.inFlight[:0]
	for _, r := range v.inFlight {
		if got := len(r.TokensS); got == r.OutputTokens && r.TokensS[got-1] <= r.DeadlineS {
			v.ended(r, r.TokensS[got-1])
			continue
		}
		kept = append(kept, r)
	}
	clear(v.inFlight[len(kept):])
	v.inFlight = kept
}
