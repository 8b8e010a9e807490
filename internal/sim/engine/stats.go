package engine

import (
	"slices"
	"sort"
)

// ttftBuckets are vLLM's bucket bounds for vllm:time_to_first_token_seconds.
var ttftBuckets = []float64{
	0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
	2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
}

// Histogram is a bucketed histogram; the engine locks it.
type Histogram struct {
	// Bounds are the buckets' upper bounds (le), ascending.
	Bounds []float64
	// Counts holds the observations per bucket, not cumulative; the last
	// is +Inf.
	Counts []uint64
	Sum    float64
	N      uint64
}

func newHistogram(bounds []float64) Histogram {
	return Histogram{Bounds: bounds, Counts: make([]uint64, len(bounds)+1)}
}

func (h *Histogram) observe(v float64) {
	i := sort.SearchFloat64s(h.Bounds, v) // first bound >= v: le semantics
	h.Counts[i]++
	h.Sum += v
	h.N++
}

// clone is a copy of h that later observations leave alone.
func (h Histogram) clone() Histogram {
	h.Counts = slices.Clone(h.Counts)
	return h
}

// vLLM's bucket bounds (vllm/v1/metrics/loggers.py, PrometheusStatLogger).
var (
	// tpotBuckets: vllm:time_per_output_token_seconds and its successors
	// vllm:inter_token_latency_seconds and
	// vllm:request_time_per_output_token_seconds.
	tpotBuckets = []float64{
		0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0,
		2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
	}
	// requestLatencyBuckets: e2e, queue, inference, prefill and decode time.
	requestLatencyBuckets = []float64{
		0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0,
		50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
	}
	prefillPerTokenBuckets = []float64{0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0}
	iterationTokenBuckets  = []float64{1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384}
	// latenessBuckets are the simulator's own: wall seconds an engine step
	// ended after its place on the simulated schedule.
	latenessBuckets = []float64{0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5}
)

// build125Buckets is vLLM's build_1_2_5_buckets: 1, 2, 5, 10, 20, 50, ...
// up to max.
func build125Buckets(max int) []float64 {
	var out []float64
	for p := 1; ; p *= 10 {
		for _, m := range []int{1, 2, 5} {
			if m*p > max {
				return out
			}
			out = append(out, float64(m*p))
		}
	}
}

// vLLM's finish reasons (vllm/v1/engine FinishReason), indices of
// FinishReasons.
const (
	finishStop = iota
	finishLength
	finishAbort
)

// FinishReasons are the values of vllm:request_success_total's
// finished_reason label, in the order of RequestStats.Success.
var FinishReasons = [...]string{"stop", "length", "abort"}

// RequestStats are the request and step metrics of vLLM's exporter that the
// engine model knows, in simulated seconds (Lateness in wall seconds).
type RequestStats struct {
	// Success counts the requests that ended, by FinishReasons.
	Success [len(FinishReasons)]uint64

	ITL, RequestTPOT                                    Histogram
	E2E, Queue, Inference, Prefill, Decode              Histogram
	PrefillPerToken                                     Histogram
	PromptTokens, GenerationTokens, MaxGenerationTokens Histogram
	IterationTokens                                     Histogram

	// Lateness is how far each step ended after its place on the
	// simulated schedule, in wall seconds; LatenessMaxS the largest.
	Lateness     Histogram
	LatenessMaxS float64
}

func newRequestStats(maxModelLen int) *RequestStats {
	lengths := build125Buckets(max(maxModelLen, 1))
	return &RequestStats{
		ITL: newHistogram(tpotBuckets), RequestTPOT: newHistogram(tpotBuckets),
		E2E: newHistogram(requestLatencyBuckets), Queue: newHistogram(requestLatencyBuckets),
		Inference: newHistogram(requestLatencyBuckets), Prefill: newHistogram(requestLatencyBuckets),
		Decode: newHistogram(requestLatencyBuckets), PrefillPerToken: newHistogram(prefillPerTokenBuckets),
		PromptTokens: newHistogram(lengths), GenerationTokens: newHistogram(lengths), MaxGenerationTokens: newHistogram(lengths),
		IterationTokens: newHistogram(iterationTokenBuckets), Lateness: newHistogram(latenessBuckets),
	}
}

// clone is a deep copy of st.
func (st *RequestStats) clone() RequestStats {
	c := *st
	for _, h := range []*Histogram{&c.ITL, &c.RequestTPOT, &c.E2E, &c.Queue, &c.Inference, &c.Prefill, &c.Decode,
		&c.PrefillPerToken, &c.PromptTokens, &c.GenerationTokens, &c.MaxGenerationTokens, &c.IterationTokens, &c.Lateness} {
		*h = h.clone()
	}
	return c
}

// finished records a sequence whose last token came at simulated time
// endS, with vLLM's definitions: e2e from the request's arrival, queue
// time from reaching the engine's queue to first joining the batch,
// prefill to the first token, decode from the first token to the last,
// inference the two together.
func (st *RequestStats) finished(s *Sequence, endS float64) {
	reason := finishStop
	if s.FinishReason == "length" {
		reason = finishLength
	}
	st.Success[reason]++
	// A step that catches up on a late schedule is stamped with its
	// scheduled end, which can precede a sequence that joined it late:
	// no phase is shorter than zero.
	prefill := max(0, s.firstTokenS-s.scheduledS)
	decode := max(0, endS-s.firstTokenS)
	st.E2E.observe(max(0, endS-s.ArrivalS))
	st.Queue.observe(max(0, s.scheduledS-s.queuedS))
	st.Prefill.observe(prefill)
	st.Decode.observe(decode)
	st.Inference.observe(prefill + decode)
	if s.PromptTokens > 0 {
		st.PrefillPerToken.observe(prefill / float64(s.PromptTokens))
	}
	if s.OutputTokens > 1 {
		st.RequestTPOT.observe(decode / float64(s.OutputTokens-1))
	}
	st.PromptTokens.observe(float64(s.PromptTokens))
	st.GenerationTokens.observe(float64(s.OutputTokens))
	st.MaxGenerationTokens.observe(float64(s.OutputTokens))
}

// observeLateness records how far (in wall time) a step that should have
// ended at simulated time target ran late, now being the simulated time it
// did end.
func (e *Engine) observeLateness(now, target float64) {
	late := max(0, (now-target)/e.clk.scale)
	e.histMu.Lock()
	e.stats.Lateness.observe(late)
	e.stats.LatenessMaxS = max(e.stats.LatenessMaxS, late)
	e.histMu.Unlock()
}

// Metrics is a snapshot of what an engine counts, as vLLM's exporter
// counts it: gauges, counters and histograms in simulated seconds, and the
// simulator's own step figures.
type Metrics struct {
	// Running and Waiting are the sequences in the batch and in the queue.
	Running, Waiting int64
	// KVUsedTokens is the KV cache the running batch holds, of
	// KVBudgetTokens.
	KVUsedTokens, KVBudgetTokens int64
	// PrefixQueries counts the prompt tokens looked up in the prefix cache
	// and PrefixHits those found (0 without one).
	PrefixQueries, PrefixHits int64
	Preemptions               int64
	// PromptTokens and GenerationTokens are the tokens prefilled and
	// generated.
	PromptTokens, GenerationTokens int64
	// Steps are the steps run, LastStepS the simulated time the last one
	// ended, and SlipS the simulated seconds lost because the host could
	// not keep the schedule.
	Steps            int64
	LastStepS, SlipS float64
	TTFT             Histogram
	Requests         RequestStats
}

// Metrics is a snapshot of the engine's metrics.
func (e *Engine) Metrics() Metrics {
	m := Metrics{
		Running: e.nRunning.Load(), Waiting: e.nWaiting.Load(),
		KVUsedTokens: e.kvUsed.Load(), KVBudgetTokens: int64(e.kvBudget),
		Preemptions: e.preemptions.Load(), PromptTokens: e.promptTokens.Load(), GenerationTokens: e.genTokens.Load(),
	}
	if e.cache != nil {
		m.PrefixQueries, m.PrefixHits = e.cache.queries.Load(), e.cache.hits.Load()
	}
	e.histMu.Lock()
	m.TTFT = e.ttft.clone()
	m.Requests = e.stats.clone()
	e.histMu.Unlock()
	m.Steps, m.LastStepS, m.SlipS = e.steps.Load(), float64(e.lastStepNs.Load())/1e9, e.slipS()
	return m
}
