package sim

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/rehearse/rehearse/internal/sim/engine"
)

// TestKVCacheUsageIsHeldOverBudget checks vllm:kv_cache_usage_perc against
// the KV tokens the running batch holds, mid-request and after.
func TestKVCacheUsageIsHeldOverBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := New(Options{Engine: engine.Batching})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan *streamResult, 1)
		go func() { done <- serveMem(t, s, ctx, chatBody("a prompt of some words", 200, `,"ignore_eos":true`)) }()
		time.Sleep(time.Second)
		synctest.Wait()
		// The engine's own test holds KVUsedTokens to the running batch's
		// KV cache; the gauge is that over the budget.
		m := s.engine.Metrics()
		held, budget := m.KVUsedTokens, m.KVBudgetTokens
		fams := scrapeFamilies(t, s.Handler())
		got := fams["vllm:kv_cache_usage_perc"].Metric[0].GetGauge().GetValue()
		if held == 0 || budget != int64(s.engine.KVBudget()) || got != float64(held)/float64(budget) {
			t.Errorf("kv_cache_usage_perc %v, want %d held tokens / %d = %v", got, held, budget, float64(held)/float64(budget))
		}
		if r := <-done; !r.done {
			t.Fatal("request did not complete")
		}
		synctest.Wait()
		fams = scrapeFamilies(t, s.Handler())
		if got := fams["vllm:kv_cache_usage_perc"].Metric[0].GetGauge().GetValue(); got != 0 {
			t.Errorf("kv_cache_usage_perc %v with nothing running, want 0", got)
		}
	})
}

// scrapeFamilies parses /metrics.
func scrapeFamilies(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(w.Body)
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return fams
}

// TestMetricsSurfaceIsVLLMs checks the names, types, labels and buckets of
// the vLLM series against vLLM's PrometheusStatLogger.
func TestMetricsSurfaceIsVLLMs(t *testing.T) {
	s, err := New(Options{Engine: engine.Batching, TimeScale: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if res := serveMem(t, s, context.Background(), chatBody("hello there", 3, `,"ignore_eos":true`)); !res.done {
		t.Fatal("request did not complete")
	}
	fams := scrapeFamilies(t, s.Handler())
	want := map[string]dto.MetricType{
		"vllm:num_requests_running": dto.MetricType_GAUGE, "vllm:num_requests_waiting": dto.MetricType_GAUGE,
		"vllm:kv_cache_usage_perc":        dto.MetricType_GAUGE,
		"vllm:prefix_cache_queries_total": dto.MetricType_COUNTER, "vllm:prefix_cache_hits_total": dto.MetricType_COUNTER,
		"vllm:num_preemptions_total": dto.MetricType_COUNTER, "vllm:prompt_tokens_total": dto.MetricType_COUNTER,
		"vllm:generation_tokens_total": dto.MetricType_COUNTER, "vllm:request_success_total": dto.MetricType_COUNTER,
		"vllm:request_prompt_tokens": dto.MetricType_HISTOGRAM, "vllm:request_generation_tokens": dto.MetricType_HISTOGRAM,
		"vllm:iteration_tokens_total": dto.MetricType_HISTOGRAM, "vllm:request_max_num_generation_tokens": dto.MetricType_HISTOGRAM,
		"vllm:time_to_first_token_seconds": dto.MetricType_HISTOGRAM, "vllm:time_per_output_token_seconds": dto.MetricType_HISTOGRAM,
		"vllm:inter_token_latency_seconds": dto.MetricType_HISTOGRAM, "vllm:request_time_per_output_token_seconds": dto.MetricType_HISTOGRAM,
		"vllm:time_per_prefill_token_request_seconds": dto.MetricType_HISTOGRAM, "vllm:e2e_request_latency_seconds": dto.MetricType_HISTOGRAM,
		"vllm:request_queue_time_seconds": dto.MetricType_HISTOGRAM, "vllm:request_inference_time_seconds": dto.MetricType_HISTOGRAM,
		"vllm:request_prefill_time_seconds": dto.MetricType_HISTOGRAM, "vllm:request_decode_time_seconds": dto.MetricType_HISTOGRAM,
	}
	for name, typ := range want {
		f, ok := fams[name]
		if !ok {
			t.Errorf("/metrics has no %s", name)
			continue
		}
		if f.GetType() != typ {
			t.Errorf("%s is a %v, want a %v", name, f.GetType(), typ)
		}
		for _, m := range f.Metric {
			l := map[string]string{}
			for _, p := range m.Label {
				l[p.GetName()] = p.GetValue()
			}
			if l["model_name"] != s.Model() || l["engine"] != "0" {
				t.Errorf("%s labels %v, want model_name %q and engine \"0\"", name, l, s.Model())
			}
		}
	}
	var reasons []string
	for _, m := range fams["vllm:request_success_total"].Metric {
		for _, p := range m.Label {
			if p.GetName() == "finished_reason" {
				reasons = append(reasons, p.GetValue())
			}
		}
	}
	if !slices.Equal(reasons, []string{"stop", "length", "abort"}) {
		t.Errorf("finished_reason values %v, want vLLM's stop, length, abort", reasons)
	}
	bounds := func(name string) []float64 {
		var out []float64
		for _, b := range fams[name].Metric[0].GetHistogram().Bucket {
			if math.IsInf(b.GetUpperBound(), 1) {
				continue // the text parser's own
			}
			out = append(out, b.GetUpperBound())
		}
		return out
	}
	if got := bounds("vllm:request_prompt_tokens"); !slices.Equal(got, s.engine.Metrics().Requests.PromptTokens.Bounds) || got[len(got)-1] > float64(s.Profile().MaxModelLen) {
		t.Errorf("request_prompt_tokens buckets %v", got)
	}
	if got := bounds("vllm:e2e_request_latency_seconds"); len(got) != 21 || got[0] != 0.3 || got[20] != 7680 {
		t.Errorf("e2e buckets %v, want vLLM's 21 from 0.3 to 7680", got)
	}
}
