package engine

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Engine kinds, the values of Profile.Engine.
const (
	// Serial is a lock-serialized engine: one request at a time, in
	// arrival order; its prompt is prefilled in one step, then one token per
	// decode step until it ends, then the next request takes the lock.
	Serial = "serial"
	// Batching is an iteration-level (continuous batching) engine: every
	// step serves all running sequences; new requests join at the next step,
	// within max_num_seqs, the KV-token budget and the per-step token budget
	// (chunked prefill).
	Batching = "batching"
)

// Sequence states, as seen by the request handler.
const (
	seqWaiting int32 = iota
	seqRunning
	seqFinished
	seqAborted
)

// maxSlipWall is how far the engine may fall behind its simulated schedule
// (in wall time) and still catch up by running steps back to back; beyond it
// the schedule is moved to now and the difference counted as slip, so an
// overloaded simulator shows up in its own metrics instead of in figures.
const maxSlipWall = 100 * time.Millisecond

// ErrClosed is what Submit returns once the engine is shut down.
var ErrClosed = errors.New("sim: engine is shut down")

// Sequence is one request inside the engine. The submitter sets the
// exported fields before Submit; the engine writes the rest, which the
// submitter reads through the methods once Notify has signalled.
type Sequence struct {
	PromptTokens int
	OutputTokens int
	ArrivalS     float64
	// FinishReason is the finish_reason the request ends with ("stop",
	// "length", "tool_calls"), for vllm:request_success_total; "" counts
	// as "stop".
	FinishReason string
	// Blocks is the hash chain of the prompt's full blocks (BlockHashes),
	// for the prefix cache; nil when the engine has none.
	Blocks []uint64

	// Engine goroutine only.
	prefillLeft int
	looked      bool // the prefix cache has counted this sequence
	// queuedS is when the sequence reached the engine's queue, scheduledS
	// when it first joined the batch (-1 before), lastTokenS the time of
	// its latest token: the request's phases for /metrics.
	queuedS, scheduledS, lastTokenS float64
	// tokenTimesS, when set, collects the simulated time of every token
	// (the prediction's records); the served engine leaves it nil.
	tokenTimesS *[]float64

	// Written by the engine, read by the handler after it observes produced
	// or state through the atomics (which order the plain fields).
	firstTokenS float64
	produced    atomic.Int32
	state       atomic.Int32
	canceled    atomic.Bool
	notify      chan struct{}
}

func (s *Sequence) signal() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// Notify receives a signal after the engine produces tokens of the
// sequence, finishes it or aborts it; signals coalesce.
func (s *Sequence) Notify() <-chan struct{} { return s.notify }

// Produced is how many tokens the engine has produced for the sequence.
func (s *Sequence) Produced() int { return int(s.produced.Load()) }

// FirstTokenS is the simulated time of the sequence's first token, once
// Produced is above 0.
func (s *Sequence) FirstTokenS() float64 { return s.firstTokenS }

// Aborted reports whether the engine shut down before the sequence
// finished.
func (s *Sequence) Aborted() bool { return s.state.Load() == seqAborted }

// Limits are the scheduling limits an engine runs under: the sequences
// running at once, the tokens one step processes (0: unlimited) and the
// KV-cache tokens the running batch may hold.
type Limits struct {
	MaxSeqs, BatchTokens, KVBudget int
}

// Engine schedules sequences in steps on a simulated clock. One goroutine
// owns the queue and the running batch; handlers submit and abandon. Run
// steps the same scheduling code on a virtual clock instead.
type Engine struct {
	prof        *Profile
	clk         *Clock
	maxSeqs     int
	batchTokens int // 0: unlimited
	kvBudget    int
	cache       *PrefixCache // nil: no prefix caching

	mu       sync.Mutex
	incoming []*Sequence
	wake     chan struct{}

	waiting []*Sequence
	running []*Sequence
	chunks  []int // per running sequence: prompt tokens prefilled this step

	nRunning     atomic.Int64
	nWaiting     atomic.Int64
	genTokens    atomic.Int64
	promptTokens atomic.Int64
	preemptions  atomic.Int64
	steps        atomic.Int64
	slipNs       atomic.Int64 // simulated nanoseconds lost to slip
	lastStepNs   atomic.Int64 // simulated time of the last step's end
	kvUsed       atomic.Int64 // KV tokens the running batch holds
	// stepStartS is the simulated time the step being planned starts at,
	// the admission time of the sequences it admits.
	stepStartS float64

	histMu sync.Mutex
	ttft   Histogram
	// stats are the rest of vLLM's request and step metrics, under
	// histMu; nil (a virtual run's engine) records none of them.
	stats *RequestStats

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

// Start starts an engine of the profile on clk under the limits; cache is
// its prefix cache, nil for none.
func Start(prof *Profile, clk *Clock, l Limits, cache *PrefixCache) *Engine {
	ctx, cancel := context.WithCancel(context.Background())
	e := &Engine{
		prof:        prof,
		clk:         clk,
		maxSeqs:     l.MaxSeqs,
		batchTokens: l.BatchTokens,
		kvBudget:    l.KVBudget,
		cache:       cache,
		wake:        make(chan struct{}, 1),
		ttft:        newHistogram(ttftBuckets),
		stats:       newRequestStats(prof.MaxModelLen),
		ctx:         ctx,
		cancel:      cancel,
		done:        make(chan struct{}),
	}
	go e.run()
	return e
}

// KVBudget is the KV-cache tokens the running batch may hold.
func (e *Engine) KVBudget() int { return e.kvBudget }

// Caching reports whether the engine caches prompt prefixes.
func (e *Engine) Caching() bool { return e.cache != nil }

func (e *Engine) poke() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Submit queues sequences, in order; they join the batch at the next step.
// It fails (ErrClosed) only once the engine is closed.
func (e *Engine) Submit(seqs ...*Sequence) error {
	prompt := 0
	now := e.clk.Now()
	for _, s := range seqs {
		s.notify = make(chan struct{}, 1)
		s.prefillLeft = s.PromptTokens
		s.queuedS, s.scheduledS = now, -1
		prompt += s.PromptTokens
	}
	e.mu.Lock()
	if err := e.ctx.Err(); err != nil {
		e.mu.Unlock()
		return ErrClosed
	}
	e.incoming = append(e.incoming, seqs...)
	e.nWaiting.Add(int64(len(seqs)))
	e.mu.Unlock()
	e.promptTokens.Add(int64(prompt))
	e.poke()
	return nil
}

// Abandon marks a sequence canceled (its client went away); the engine frees
// its slot at the next step boundary.
func (e *Engine) Abandon(s *Sequence) {
	s.canceled.Store(true)
	e.poke()
}

// Close aborts every sequence and stops the engine goroutine.
func (e *Engine) Close() {
	e.cancel()
	<-e.done
}

func (e *Engine) run() {
	defer close(e.done)
	vnow := e.clk.Now()
	for {
		e.drain()
		e.dropCanceled()
		if len(e.running) == 0 && len(e.waiting) == 0 {
			select {
			case <-e.wake:
			case <-e.ctx.Done():
				e.abortAll()
				return
			}
			vnow = max(vnow, e.clk.Now())
			continue
		}
		e.preempt()
		e.stepStartS = vnow
		e.admit()
		e.publishGauges()
		if len(e.running) == 0 {
			// The queue head cannot be admitted (it cannot happen with a
			// validated budget, but never spin).
			select {
			case <-e.wake:
			case <-e.ctx.Done():
				e.abortAll()
				return
			}
			continue
		}

		inStep, prefillTokens, contextTokens := e.planStep()
		target := vnow + e.prof.stepModelS(e.steps.Load(), inStep, prefillTokens, contextTokens)
		if !e.clk.SleepUntil(e.ctx, target) {
			e.abortAll()
			return
		}
		now := e.clk.Now()
		if now-target > e.clk.scale*maxSlipWall.Seconds() {
			e.slipNs.Add(int64((now - target) * 1e9))
			vnow = now
		} else {
			vnow = target
		}
		e.observeLateness(now, target)
		e.steps.Add(1)
		e.lastStepNs.Store(int64(target * 1e9))

		e.applyStep(target)
		e.publishGauges()
	}
}

// planStep plans the next step over the running batch: running decodes
// first (one token each), then prefill chunks in admission order within the
// token budget. It returns the sequences served, the prompt tokens
// prefilled and the context tokens of the sequences decoded, the arguments
// of the step's latency.
func (e *Engine) planStep() (inStep, prefillTokens, contextTokens int) {
	budget := e.batchTokens
	if budget == 0 {
		budget = math.MaxInt
	}
	chunks := e.chunks[:0]
	for range e.running {
		chunks = append(chunks, 0)
	}
	e.chunks = chunks
	for _, s := range e.running {
		if s.prefillLeft == 0 {
			budget--
			inStep++
			contextTokens += s.PromptTokens + int(s.produced.Load())
		}
	}
	for i, s := range e.running {
		if s.prefillLeft > 0 && budget > 0 {
			c := min(s.prefillLeft, budget)
			chunks[i] = c
			budget -= c
			prefillTokens += c
			inStep++
		}
	}
	return inStep, prefillTokens, contextTokens
}

// applyStep applies the planned step that ended at simulated time target:
// every sequence that decoded or finished its prefill produced one token.
func (e *Engine) applyStep(target float64) {
	e.histMu.Lock()
	defer e.histMu.Unlock()
	iterTokens := 0
	kept := e.running[:0]
	for i, s := range e.running {
		produce := false
		if s.prefillLeft == 0 {
			produce = true
		} else if e.chunks[i] > 0 {
			s.prefillLeft -= e.chunks[i]
			produce = s.prefillLeft == 0
			if produce && e.cache != nil {
				e.cache.insert(s.Blocks) // its prompt's blocks are computed
			}
		}
		if produce {
			n := s.produced.Load() + 1
			iterTokens++
			if n == 1 {
				s.firstTokenS = target
				e.ttft.observe(target - s.ArrivalS)
				iterTokens += s.PromptTokens
			} else if e.stats != nil {
				e.stats.ITL.observe(target - s.lastTokenS)
			}
			s.lastTokenS = target
			if s.tokenTimesS != nil {
				*s.tokenTimesS = append(*s.tokenTimesS, target)
			}
			e.genTokens.Add(1)
			if int(n) >= s.OutputTokens {
				if e.stats != nil {
					e.stats.finished(s, target)
				}
				s.state.Store(seqFinished)
			}
			s.produced.Store(n)
			s.signal()
			if int(n) >= s.OutputTokens {
				continue
			}
		}
		kept = append(kept, s)
	}
	clear(e.running[len(kept):])
	e.running = kept
	if e.stats != nil {
		e.stats.IterationTokens.observe(float64(iterTokens))
	}
}

func (e *Engine) drain() {
	e.mu.Lock()
	e.waiting = append(e.waiting, e.incoming...)
	clear(e.incoming)
	e.incoming = e.incoming[:0]
	e.mu.Unlock()
}

func (e *Engine) dropCanceled() {
	drop := func(list []*Sequence) []*Sequence {
		kept := list[:0]
		for _, s := range list {
			if s.canceled.Load() {
				if e.stats != nil {
					e.histMu.Lock()
					e.stats.Success[finishAbort]++
					e.histMu.Unlock()
				}
				s.state.Store(seqAborted)
				s.signal()
				continue
			}
			kept = append(kept, s)
		}
		clear(list[len(kept):])
		return kept
	}
	e.waiting = drop(e.waiting)
	e.running = drop(e.running)
	e.publishGauges()
}

// kvHeld is the KV cache a running sequence needs for its next step.
func kvHeld(s *Sequence) int { return s.PromptTokens + int(s.produced.Load()) + 1 }

// preempt moves the newest running sequences back to the queue head while
// the running batch needs more KV cache than the budget (vLLM's recompute
// preemption); a preempted sequence prefills its prompt and output again.
func (e *Engine) preempt() {
	for len(e.running) > 1 {
		need := 0
		for _, s := range e.running {
			need += kvHeld(s)
		}
		if need <= e.kvBudget {
			return
		}
		last := e.running[len(e.running)-1]
		e.running = e.running[:len(e.running)-1]
		last.prefillLeft = last.PromptTokens + int(last.produced.Load())
		last.state.Store(seqWaiting)
		e.waiting = append([]*Sequence{last}, e.waiting...)
		e.preemptions.Add(1)
	}
}

// admit moves queue heads into the running batch, first come first served,
// while there is a free slot and KV budget.
func (e *Engine) admit() {
	held := 0
	for _, s := range e.running {
		held += kvHeld(s)
	}
	n := 0
	for _, s := range e.waiting {
		if len(e.running) >= e.maxSeqs || held+kvHeld(s) > e.kvBudget {
			break
		}
		held += kvHeld(s)
		e.lookUp(s)
		if s.scheduledS < 0 {
			// A step catching up on a late schedule starts before now:
			// a sequence that came in meanwhile joins it as it arrives.
			s.scheduledS = max(e.stepStartS, s.queuedS)
		}
		s.state.Store(seqRunning)
		e.running = append(e.running, s)
		n++
	}
	if n > 0 {
		clear(e.waiting[:n])
		e.waiting = e.waiting[n:]
	}
}

// lookUp skips the prefill of a sequence's cached prompt prefix, as it
// joins the batch; the first time, it counts the query and the hit.
func (e *Engine) lookUp(s *Sequence) {
	if e.cache == nil {
		return
	}
	hit := e.cache.match(s.Blocks, s.PromptTokens)
	s.prefillLeft -= hit
	if !s.looked {
		s.looked = true
		e.cache.queries.Add(int64(s.PromptTokens))
		e.cache.hits.Add(int64(hit))
	}
}

func (e *Engine) publishGauges() {
	e.nRunning.Store(int64(len(e.running)))
	held := 0
	for _, s := range e.running {
		held += kvHeld(s)
	}
	e.kvUsed.Store(int64(held))
	e.mu.Lock()
	e.nWaiting.Store(int64(len(e.waiting) + len(e.incoming)))
	e.mu.Unlock()
}

func (e *Engine) abortAll() {
	e.drain()
	for _, list := range [][]*Sequence{e.waiting, e.running} {
		for _, s := range list {
			s.state.Store(seqAborted)
			s.signal()
		}
	}
	e.waiting, e.running = nil, nil
	e.publishGauges()
}

// slipS is the simulated time the engine lost because the host could not
// keep up with the schedule.
func (e *Engine) slipS() float64 { return float64(e.slipNs.Load()) / 1e9 }
