package engine

import (
	"slices"
	"testing"
	"testing/synctest"
)

// TestRequestMetricsFollowTheEngine runs two requests through the serial
// engine on the fake clock and checks vLLM's request metrics against the
// token times the engine produced: the second waits in the queue for the
// whole of the first, and every phase adds up.
func TestRequestMetricsFollowTheEngine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := testProfile(t, Serial)
		clk := NewClock(1)
		e := Start(p, clk, Limits{MaxSeqs: 1, BatchTokens: 0, KVBudget: p.KVTokenBudget}, nil)
		defer e.Close()
		a := &Sequence{PromptTokens: 40, OutputTokens: 6, ArrivalS: clk.Now(), FinishReason: "length"}
		b := &Sequence{PromptTokens: 30, OutputTokens: 4, ArrivalS: clk.Now()}
		if err := e.Submit(a, b); err != nil {
			t.Fatal(err)
		}
		ta, tb := <-watch(clk, a), <-watch(clk, b)
		if len(ta) != 6 || len(tb) != 4 {
			t.Fatalf("tokens %d and %d, want 6 and 4", len(ta), len(tb))
		}
		synctest.Wait()
		m := e.Metrics()
		st := &m.Requests
		lastA, lastB := ta[5], tb[3]
		checks := []struct {
			name string
			h    *Histogram
			n    uint64
			sum  float64
		}{
			{"e2e", &st.E2E, 2, lastA + lastB},
			// a is admitted at once; b when a's last step ends.
			{"queue", &st.Queue, 2, lastA},
			{"prefill", &st.Prefill, 2, ta[0] + (tb[0] - lastA)},
			{"decode", &st.Decode, 2, (lastA - ta[0]) + (lastB - tb[0])},
			{"inference", &st.Inference, 2, lastA + (lastB - lastA)},
			{"itl", &st.ITL, 5 + 3, (lastA - ta[0]) + (lastB - tb[0])},
			{"request tpot", &st.RequestTPOT, 2, (lastA-ta[0])/5 + (lastB-tb[0])/3},
			{"prefill per token", &st.PrefillPerToken, 2, ta[0]/40 + (tb[0]-lastA)/30},
			{"prompt tokens", &st.PromptTokens, 2, 70},
			{"generation tokens", &st.GenerationTokens, 2, 10},
			// Each step: its tokens, plus the prompt of a sequence whose
			// first token it is (vLLM's iteration stats).
			{"iteration tokens", &st.IterationTokens, 10, 70 + 10},
			{"ttft", &m.TTFT, 2, ta[0] + tb[0]},
		}
		for _, c := range checks {
			if c.h.N != c.n || !near(c.h.Sum, c.sum, 1e-9) {
				t.Errorf("%s: %d observations summing to %v, want %d summing to %v", c.name, c.h.N, c.h.Sum, c.n, c.sum)
			}
		}
		if st.Success != [3]uint64{1, 1, 0} {
			t.Errorf("request_success stop, length, abort = %v, want [1 1 0]", st.Success)
		}
		if st.Lateness.N != uint64(m.Steps) || st.LatenessMaxS != 0 {
			t.Errorf("lateness: %d observations, max %v; want one per step (%d), none late on the fake clock", st.Lateness.N, st.LatenessMaxS, m.Steps)
		}
	})
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
			e := &Engine{prof: p, maxSeqs: 256, kvBudget: 1 << 40, ttft: newHistogram(ttftBuckets)}
			if on {
				e.stats = newRequestStats(p.MaxModelLen)
			}
			for range 256 {
				s := &Sequence{PromptTokens: 100, OutputTokens: 1 << 30, notify: make(chan struct{}, 1), scheduledS: 0}
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

func TestBuild125BucketsIsVLLMs(t *testing.T) {
	if got := build125Buckets(100); !slices.Equal(got, []float64{1, 2, 5, 10, 20, 50, 100}) {
		t.Errorf("build125Buckets(100) = %v, want vLLM's docstring example", got)
	}
	p := &Profile{MaxModelLen: 32768}
	e := &Engine{stats: newRequestStats(p.MaxModelLen)}
	if got := e.stats.PromptTokens.Bounds; got[len(got)-1] != 20000 {
		t.Errorf("prompt-token buckets of max_model_len 32768 end at %v, want 20000", got[len(got)-1])
	}
}
