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

// writeMetrics writes the engine's metrics in the Prometheus text format
// with vLLM's names and its model_name label.
func (s *Server) writeMetrics(w io.Writer) error {
	e := s.engine
	label := []*dto.LabelPair{{Name: ptr("model_name"), Value: ptr(s.model)}}
	gauge := func(name, help string, v float64) *dto.MetricFamily {
		return &dto.MetricFamily{
			Name: ptr(name), Help: ptr(help), Type: dto.MetricType_GAUGE.Enum(),
			Metric: []*dto.Metric{{Label: label, Gauge: &dto.Gauge{Value: ptr(v)}}},
		}
	}
	counter := func(name, help string, v float64) *dto.MetricFamily {
		return &dto.MetricFamily{
			Name: ptr(name), Help: ptr(help), Type: dto.MetricType_COUNTER.Enum(),
			Metric: []*dto.Metric{{Label: label, Counter: &dto.Counter{Value: ptr(v)}}},
		}
	}

	e.histMu.Lock()
	var buckets []*dto.Bucket
	var cum uint64
	for i, b := range e.ttft.bounds {
		cum += e.ttft.counts[i]
		buckets = append(buckets, &dto.Bucket{UpperBound: ptr(b), CumulativeCount: ptr(cum)})
	}
	hist := &dto.Histogram{SampleCount: ptr(e.ttft.n), SampleSum: ptr(e.ttft.sum), Bucket: buckets}
	e.histMu.Unlock()

	var queries, hits int64
	if e.cache != nil {
		queries, hits = e.cache.queries.Load(), e.cache.hits.Load()
	}
	families := []*dto.MetricFamily{
		gauge("vllm:num_requests_running", "Number of requests in model execution batches.", float64(e.nRunning.Load())),
		gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", float64(e.nWaiting.Load())),
		counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.", float64(e.promptTokens.Load())),
		counter("vllm:generation_tokens_total", "Number of generation tokens processed.", float64(e.genTokens.Load())),
		counter("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.", float64(queries)),
		counter("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.", float64(hits)),
		counter("vllm:num_preemptions_total", "Cumulative number of preemptions from the engine.", float64(e.preemptions.Load())),
		{
			Name: ptr("vllm:time_to_first_token_seconds"), Help: ptr("Histogram of time to first token in seconds (simulated)."),
			Type:   dto.MetricType_HISTOGRAM.Enum(),
			Metric: []*dto.Metric{{Label: label, Histogram: hist}},
		},
		counter("rehearse_sim_steps_total", "Engine steps run by the simulator.", float64(e.steps.Load())),
		counter("rehearse_sim_clock_slip_seconds_total", "Simulated seconds lost because the host could not keep the simulated schedule.", e.slipS()),
		gauge("rehearse_sim_time_scale", "Simulated seconds per wall-clock second.", s.opts.TimeScale),
	}
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
