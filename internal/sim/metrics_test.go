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
)

// TestRequestMetricsFollowTheEngine runs two requests through the serial
// engine on the fake clock and checks vLLM's request metrics against the
// token times the engine produced: the second waits in the queue for the
// whole of the first, and every phase adds up.
func TestRequestMetricsFollowTheEngine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := testProfile(t, EngineSerial)
		clk := newSimClock(1)
		e := newEngine(p, clk, 1, 0, p.KVTokenBudget, nil)
		defer e.close()
		a := &sequence{promptTokens: 40, outputTokens: 6, arrivalS: clk.now(), finishReason: "length"}
		b := &sequence{promptTokens: 30, outputTokens: 4, arrivalS: clk.now()}
		if err := e.submit(a, b); err != nil {
			t.Fatal(err)
		}
		ta, tb := <-watch(clk, a), <-watch(clk, b)
		if len(ta) != 6 || len(tb) != 4 {
			t.Fatalf("tokens %d and %d, want 6 and 4", len(ta), len(tb))
		}
		synctest.Wait()
		e.histMu.Lock()
		defer e.histMu.Unlock()
		st := e.stats
		lastA, lastB := ta[5], tb[3]
		checks := []struct {
			name string
			h    *histogram
			n    uint64
			sum  float64
		}{
			{"e2e", &st.e2e, 2, lastA + lastB},
			// a is admitted at once; b when a's last step ends.
			{"queue", &st.queue, 2, lastA},
			{"prefill", &st.prefill, 2, ta[0] + (tb[0] - lastA)},
			{"decode", &st.decode, 2, (lastA - ta[0]) + (lastB - tb[0])},
			{"inference", &st.inference, 2, lastA + (lastB - lastA)},
			{"itl", &st.itlHist, 5 + 3, (lastA - ta[0]) + (lastB - tb[0])},
			{"request tpot", &st.requestTPOT, 2, (lastA-ta[0])/5 + (lastB-tb[0])/3},
			{"prefill per token", &st.prefillPerToken, 2, ta[0]/40 + (tb[0]-lastA)/30},
			{"prompt tokens", &st.promptTokens, 2, 70},
			{"generation tokens", &st.generationTokens, 2, 10},
			// Each step: its tokens, plus the prompt of a sequence whose
			// first token it is (vLLM's iteration stats).
			{"iteration tokens", &st.iterationTokens, 10, 70 + 10},
			{"ttft", &e.ttft, 2, ta[0] + tb[0]},
		}
		for _, c := range checks {
			if c.h.n != c.n || !near(c.h.sum, c.sum, 1e-9) {
				t.Errorf("%s: %d observations summing to %v, want %d summing to %v", c.name, c.h.n, c.h.sum, c.n, c.sum)
			}
		}
		if st.success != [3]uint64{1, 1, 0} {
			t.Errorf("request_success stop, length, abort = %v, want [1 1 0]", st.success)
		}
		if st.lateness.n != uint64(e.steps.Load()) || st.latenessMax != 0 {
			t.Errorf("lateness: %d observations, max %v; want one per step (%d), none late on the fake clock", st.lateness.n, st.latenessMax, e.steps.Load())
		}
	})
}

// TestKVCacheUsageIsHeldOverBudget checks vllm:kv_cache_usage_perc against
// the KV tokens the running batch holds, mid-request and after.
func TestKVCacheUsageIsHeldOverBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := New(Options{Engine: EngineBatching})
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
		e := s.engine
		e.mu.Lock()
		var held int
		for _, q := range e.running {
			held += kvHeld(q)
		}
		e.mu.Unlock()
		fams := scrapeFamilies(t, s.Handler())
		got := fams["vllm:kv_cache_usage_perc"].Metric[0].GetGauge().GetValue()
		if held == 0 || got != float64(held)/float64(e.kvBudget) {
			t.Errorf("kv_cache_usage_perc %v, want %d held tokens / %d = %v", got, held, e.kvBudget, float64(held)/float64(e.kvBudget))
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
	s, err := New(Options{Engine: EngineBatching, TimeScale: 1000})
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
	if got := bounds("vllm:request_prompt_tokens"); !slices.Equal(got, build125Buckets(s.Profile().MaxModelLen)) || got[len(got)-1] > float64(s.Profile().MaxModelLen) {
		t.Errorf("request_prompt_tokens buckets %v", got)
	}
	if got := bounds("vllm:e2e_request_latency_seconds"); len(got) != 21 || got[0] != 0.3 || got[20] != 7680 {
		t.Errorf("e2e buckets %v, want vLLM's 21 from 0.3 to 7680", got)
	}
	if got := build125Buckets(100); !slices.Equal(got, []float64{1, 2, 5, 10, 20, 50, 100}) {
		t.Errorf("build125Buckets(100) = %v, want vLLM's docstring example", got)
	}
}

// BenchmarkStepMetrics measures what vLLM's request and step metrics add
// to an engine step of a 256-sequence decode batch: stats=off is the
// predictor's engine (no stats), stats=on the served one. ns/op is per
// step, so ns/op ÷ 256 is the cost per token.
func BenchmarkStepMetrics(b *testing.B) {
	p, err := BuiltinProfile("t4-qwen2.5-1.5b-batching")
	if err != nil {
		b.Fatal(err)
	}
	for _, on := range []bool{false, true} {
		b.Run(map[bool]string{false: "stats=off", true: "stats=on"}[on], func(b *testing.B) {
			e := &engine{prof: p, maxSeqs: 256, kvBudget: 1 << 40, ttft: newHistogram(ttftBuckets)}
			if on {
				e.stats = newEngineStats(p.MaxModelLen)
			}
			for range 256 {
				s := &sequence{promptTokens: 100, outputTokens: 1 << 30, notify: make(chan struct{}, 1), scheduledS: 0}
				e.running = append(e.running, s)
			}
			now := 0.0
			b.ResetTimer()
			for range b.N {
				e.planStep()
				now += 0.01
				e.applyStep(now)
				e.publishGauges()
			}
		})
	}
}
