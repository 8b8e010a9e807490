package sim

import (
	"io"
	"math"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/rehearse/rehearse/internal/sim/engine"
)

// EngineIndex is the value of the engine label: the simulator runs one
// engine, vLLM's engine 0.
const EngineIndex = "0"

// histogramDTO is h as a Prometheus histogram.
func histogramDTO(h *engine.Histogram) *dto.Histogram {
	var buckets []*dto.Bucket
	var cum uint64
	for i, b := range h.Bounds {
		cum += h.Counts[i]
		buckets = append(buckets, &dto.Bucket{UpperBound: ptr(b), CumulativeCount: ptr(cum)})
	}
	return &dto.Histogram{SampleCount: ptr(h.N), SampleSum: ptr(h.Sum), Bucket: buckets}
}

// writeMetrics writes the engine's metrics in the Prometheus text format
// with vLLM's names, types, help and buckets and its model_name and engine
// labels; times are simulated seconds. The rehearse_sim_* series are the
// simulator's own.
func (s *Server) writeMetrics(w io.Writer) error {
	m := s.engine.Metrics()
	fm := familyMaker{model: s.model}
	kvUsage := 0.0
	if m.KVBudgetTokens > 0 {
		kvUsage = float64(m.KVUsedTokens) / float64(m.KVBudgetTokens)
	}
	families := []*dto.MetricFamily{
		fm.gauge("vllm:num_requests_running", "Number of requests in model execution batches.", float64(m.Running)),
		fm.gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", float64(m.Waiting)),
		fm.gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", kvUsage),
		fm.counter("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.", float64(m.PrefixQueries)),
		fm.counter("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.", float64(m.PrefixHits)),
		fm.counter("vllm:num_preemptions_total", "Cumulative number of preemption from the engine.", float64(m.Preemptions)),
		fm.counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.", float64(m.PromptTokens)),
		fm.counter("vllm:generation_tokens_total", "Number of generation tokens processed.", float64(m.GenerationTokens)),
	}
	families = append(families, fm.requestFamilies(&m)...)
	families = append(families,
		fm.counter("rehearse_sim_steps_total", "Engine steps run by the simulator.", float64(m.Steps)),
		fm.counter("rehearse_sim_clock_slip_seconds_total", "Simulated seconds lost because the host could not keep the simulated schedule.", m.SlipS),
		fm.gauge("rehearse_sim_time_scale", "Simulated seconds per wall-clock second.", s.opts.TimeScale),
	)
	enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range families {
		if err := enc.Encode(f); err != nil {
			return err
		}
	}
	return nil
}

// requestFamilies are vLLM's request and step histograms, its requests by
// finish reason, and the simulator's step lateness.
func (fm familyMaker) requestFamilies(m *engine.Metrics) []*dto.MetricFamily {
	st := &m.Requests
	success := &dto.MetricFamily{
		Name: ptr("vllm:request_success_total"), Help: ptr("Count of successfully processed requests."),
		Type: dto.MetricType_COUNTER.Enum(),
	}
	for i, r := range engine.FinishReasons {
		success.Metric = append(success.Metric, &dto.Metric{Label: fm.labels("finished_reason", r), Counter: &dto.Counter{Value: ptr(float64(st.Success[i]))}})
	}
	return []*dto.MetricFamily{success,
		fm.hist("vllm:request_prompt_tokens", "Number of prefill tokens processed.", &st.PromptTokens),
		fm.hist("vllm:request_generation_tokens", "Number of generation tokens processed.", &st.GenerationTokens),
		fm.hist("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", &st.IterationTokens),
		fm.hist("vllm:request_max_num_generation_tokens", "Histogram of maximum number of requested generation tokens.", &st.MaxGenerationTokens),
		fm.hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", &m.TTFT),
		fm.hist("vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.", &st.ITL),
		fm.hist("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", &st.ITL),
		fm.hist("vllm:request_time_per_output_token_seconds", "Histogram of time_per_output_token_seconds per request.", &st.RequestTPOT),
		fm.hist("vllm:time_per_prefill_token_request_seconds", "Time spent per token during prefill  phase in seconds", &st.PrefillPerToken),
		fm.hist("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", &st.E2E),
		fm.hist("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", &st.Queue),
		fm.hist("vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.", &st.Inference),
		fm.hist("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.", &st.Prefill),
		fm.hist("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", &st.Decode),
		fm.hist("rehearse_sim_step_lateness_seconds", "Wall seconds each engine step ended after its place on the simulated schedule.", &st.Lateness),
		fm.gauge("rehearse_sim_step_lateness_max_seconds", "The largest rehearse_sim_step_lateness_seconds observation so far.", st.LatenessMaxS),
	}
}

// familyMaker makes metric families labelled with the served model and
// the engine, as vLLM labels its own.
type familyMaker struct{ model string }

func (fm familyMaker) labels(extra ...string) []*dto.LabelPair {
	l := []*dto.LabelPair{{Name: ptr("model_name"), Value: ptr(fm.model)}, {Name: ptr("engine"), Value: ptr(EngineIndex)}}
	for i := 0; i+1 < len(extra); i += 2 {
		l = append(l, &dto.LabelPair{Name: ptr(extra[i]), Value: ptr(extra[i+1])})
	}
	return l
}

func (fm familyMaker) gauge(name, help string, v float64) *dto.MetricFamily {
	return &dto.MetricFamily{
		Name: ptr(name), Help: ptr(help), Type: dto.MetricType_GAUGE.Enum(),
		Metric: []*dto.Metric{{Label: fm.labels(), Gauge: &dto.Gauge{Value: ptr(v)}}},
	}
}

func (fm familyMaker) counter(name, help string, v float64) *dto.MetricFamily {
	return &dto.MetricFamily{
		Name: ptr(name), Help: ptr(help), Type: dto.MetricType_COUNTER.Enum(),
		Metric: []*dto.Metric{{Label: fm.labels(), Counter: &dto.Counter{Value: ptr(v)}}},
	}
}

func (fm familyMaker) hist(name, help string, h *engine.Histogram) *dto.MetricFamily {
	return &dto.MetricFamily{
		Name: ptr(name), Help: ptr(help), Type: dto.MetricType_HISTOGRAM.Enum(),
		Metric: []*dto.Metric{{Label: fm.labels(), Histogram: histogramDTO(h)}},
	}
}

func ptr[T any](v T) *T { return &v }

// finite reports whether v is a usable number.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
