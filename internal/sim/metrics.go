package sim

import (
	"io"
	"math"
	"sort"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// ttftBuckets are vLLM's bucket bounds for vllm:time_to_first_token_seconds.
var ttftBuckets = []float64{
	0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
	2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
}

// histogram is a cumulative-bucket histogram; the caller locks.
type histogram struct {
	bounds []float64
	counts []uint64 // per bucket, not cumulative; the last is +Inf
	sum    float64
	n      uint64
}

func newHistogram(bounds []float64) histogram {
	return histogram{bounds: bounds, counts: make([]uint64, len(bounds)+1)}
}

func (h *histogram) observe(v float64) {
	i := sort.SearchFloat64s(h.bounds, v) // first bound >= v: le semantics
	h.counts[i]++
	h.sum += v
	h.n++
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

// vLLM's finish reasons (vllm/v1/engine FinishReason), the values of
// vllm:request_success_total's finished_reason label.
const (
	finishStop = iota
	finishLength
	finishAbort
)

var finishReasons = [...]string{"stop", "length", "abort"}

// engineStats are the request and step metrics of vLLM's exporter that the
// engine model knows, in simulated seconds; the engine locks histMu.
type engineStats struct {
	success [len(finishReasons)]uint64

	itlHist, requestTPOT                           histogram
	e2e, queue, inference, prefill, decode         histogram
	prefillPerToken                                histogram
	promptTokens, generationTokens, maxGenerations histogram
	iterationTokens                                histogram

	lateness    histogram // wall seconds
	latenessMax float64
}

func newEngineStats(maxModelLen int) *engineStats {
	lengths := build125Buckets(max(maxModelLen, 1))
	return &engineStats{
		itlHist: newHistogram(tpotBuckets), requestTPOT: newHistogram(tpotBuckets),
		e2e: newHistogram(requestLatencyBuckets), queue: newHistogram(requestLatencyBuckets),
		inference: newHistogram(requestLatencyBuckets), prefill: newHistogram(requestLatencyBuckets),
		decode: newHistogram(requestLatencyBuckets), prefillPerToken: newHistogram(prefillPerTokenBuckets),
		promptTokens: newHistogram(lengths), generationTokens: newHistogram(lengths), maxGenerations: newHistogram(lengths),
		iterationTokens: newHistogram(iterationTokenBuckets), lateness: newHistogram(latenessBuckets),
	}
}

// itl records the interval between two tokens of one sequence.
func (st *engineStats) itl(d float64) { st.itlHist.observe(d) }

// finished records a sequence whose last token came at simulated time
// endS, with vLLM's definitions: e2e from the request's arrival, queue
// time from reaching the engine's queue to first joining the batch,
// prefill to the first token, decode from the first token to the last,
// inference the two together.
func (st *engineStats) finished(s *sequence, endS float64) {
	reason := finishStop
	if s.finishReason == "length" {
		reason = finishLength
	}
	st.success[reason]++
	// A step that catches up on a late schedule is stamped with its
	// scheduled end, which can precede a sequence that joined it late:
	// no phase is shorter than zero.
	prefill := max(0, s.firstTokenS-s.scheduledS)
	decode := max(0, endS-s.firstTokenS)
	st.e2e.observe(max(0, endS-s.arrivalS))
	st.queue.observe(max(0, s.scheduledS-s.queuedS))
	st.prefill.observe(prefill)
	st.decode.observe(decode)
	st.inference.observe(prefill + decode)
	if s.promptTokens > 0 {
		st.prefillPerToken.observe(prefill / float64(s.promptTokens))
	}
	if s.outputTokens > 1 {
		st.requestTPOT.observe(decode / float64(s.outputTokens-1))
	}
	st.promptTokens.observe(float64(s.promptTokens))
	st.generationTokens.observe(float64(s.outputTokens))
	st.maxGenerations.observe(float64(s.outputTokens))
}

// observeLateness records how far (in wall time) a step that should have
// ended at simulated time target ran late, now being the simulated time it
// did end.
func (e *engine) observeLateness(now, target float64) {
	late := max(0, (now-target)/e.clk.scale)
	e.histMu.Lock()
	e.stats.lateness.observe(late)
	e.stats.latenessMax = max(e.stats.latenessMax, late)
	e.histMu.Unlock()
}

// EngineIndex is the value of the engine label: the simulator runs one
// engine, vLLM's engine 0.
const EngineIndex = "0"

func (h *histogram) dto() *dto.Histogram {
	var buckets []*dto.Bucket
	var cum uint64
	for i, b := range h.bounds {
		cum += h.counts[i]
		buckets = append(buckets, &dto.Bucket{UpperBound: ptr(b), CumulativeCount: ptr(cum)})
	}
	return &dto.Histogram{SampleCount: ptr(h.n), SampleSum: ptr(h.sum), Bucket: buckets}
}

// writeMetrics writes the engine's metrics in the Prometheus text format
// with vLLM's names, types, help and buckets and its model_name and engine
// labels; times are simulated seconds. The rehearse_sim_* series are the
// simulator's own.
func (s *Server) writeMetrics(w io.Writer) error {
	e := s.engine
	labels := func(extra ...string) []*dto.LabelPair {
		l := []*dto.LabelPair{{Name: ptr("model_name"), Value: ptr(s.model)}, {Name: ptr("engine"), Value: ptr(EngineIndex)}}
		for i := 0; i+1 < len(extra); i += 2 {
			l = append(l, &dto.LabelPair{Name: ptr(extra[i]), Value: ptr(extra[i+1])})
		}
		return l
	}
	gauge := func(name, help string, v float64) *dto.MetricFamily {
		return &dto.MetricFamily{
			Name: ptr(name), Help: ptr(help), Type: dto.MetricType_GAUGE.Enum(),
			Metric: []*dto.Metric{{Label: labels(), Gauge: &dto.Gauge{Value: ptr(v)}}},
		}
	}
	counter := func(name, help string, v float64) *dto.MetricFamily {
		return &dto.MetricFamily{
			Name: ptr(name), Help: ptr(help), Type: dto.MetricType_COUNTER.Enum(),
			Metric: []*dto.Metric{{Label: labels(), Counter: &dto.Counter{Value: ptr(v)}}},
		}
	}
	hist := func(name, help string, h *histogram) *dto.MetricFamily {
		return &dto.MetricFamily{
			Name: ptr(name), Help: ptr(help), Type: dto.MetricType_HISTOGRAM.Enum(),
			Metric: []*dto.Metric{{Label: labels(), Histogram: h.dto()}},
		}
	}

	var queries, hits int64
	if e.cache != nil {
		queries, hits = e.cache.queries.Load(), e.cache.hits.Load()
	}
	kvUsage := 0.0
	if e.kvBudget > 0 {
		kvUsage = float64(e.kvUsed.Load()) / float64(e.kvBudget)
	}
	families := []*dto.MetricFamily{
		gauge("vllm:num_requests_running", "Number of requests in model execution batches.", float64(e.nRunning.Load())),
		gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", float64(e.nWaiting.Load())),
		gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", kvUsage),
		counter("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.", float64(queries)),
		counter("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.", float64(hits)),
		counter("vllm:num_preemptions_total", "Cumulative number of preemption from the engine.", float64(e.preemptions.Load())),
		counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.", float64(e.promptTokens.Load())),
		counter("vllm:generation_tokens_total", "Number of generation tokens processed.", float64(e.genTokens.Load())),
	}

	e.histMu.Lock()
	st := e.stats
	success := &dto.MetricFamily{
		Name: ptr("vllm:request_success_total"), Help: ptr("Count of successfully processed requests."),
		Type: dto.MetricType_COUNTER.Enum(),
	}
	for i, r := range finishReasons {
		success.Metric = append(success.Metric, &dto.Metric{Label: labels("finished_reason", r), Counter: &dto.Counter{Value: ptr(float64(st.success[i]))}})
	}
	families = append(families, success,
		hist("vllm:request_prompt_tokens", "Number of prefill tokens processed.", &st.promptTokens),
		hist("vllm:request_generation_tokens", "Number of generation tokens processed.", &st.generationTokens),
		hist("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", &st.iterationTokens),
		hist("vllm:request_max_num_generation_tokens", "Histogram of maximum number of requested generation tokens.", &st.maxGenerations),
		hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", &e.ttft),
		hist("vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.", &st.itlHist),
		hist("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", &st.itlHist),
		hist("vllm:request_time_per_output_token_seconds", "Histogram of time_per_output_token_seconds per request.", &st.requestTPOT),
		hist("vllm:time_per_prefill_token_request_seconds", "Time spent per token during prefill  phase in seconds", &st.prefillPerToken),
		hist("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", &st.e2e),
		hist("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", &st.queue),
		hist("vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.", &st.inference),
		hist("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.", &st.prefill),
		hist("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", &st.decode),
		hist("rehearse_sim_step_lateness_seconds", "Wall seconds each engine step ended after its place on the simulated schedule.", &st.lateness),
		gauge("rehearse_sim_step_lateness_max_seconds", "The largest rehearse_sim_step_lateness_seconds observation so far.", st.latenessMax),
	)
	e.histMu.Unlock()

	families = append(families,
		counter("rehearse_sim_steps_total", "Engine steps run by the simulator.", float64(e.steps.Load())),
		counter("rehearse_sim_clock_slip_seconds_total", "Simulated seconds lost because the host could not keep the simulated schedule.", e.slipS()),
		gauge("rehearse_sim_time_scale", "Simulated seconds per wall-clock second.", s.opts.TimeScale),
	)
	enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range families {
		if err := enc.Encode(f); err != nil {
			return err
		}
	}
	return nil
}

func ptr[T any](v T) *T { return &v }

// finite reports whether v is a usable number.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
