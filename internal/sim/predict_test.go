package sim

import (
	"cmp"
	"context"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rehearse/rehearse/internal/contract"
)

// servedOutcome is what one client of a served wave saw.
type servedOutcome struct {
	ok       bool
	firstS   *float64
	endS     float64
	contents int
}

// serveOrderedWave releases n clients through the served simulator on the
// fake clock, letting each reach the handler before the next starts (all at
// the same fake instant), so that they pass the frontend in client order.
func serveOrderedWave(t *testing.T, s *Server, w ClosedWorkload, n int) []servedOutcome {
	t.Helper()
	extra := ""
	if w.IgnoreEOS {
		extra = `,"ignore_eos":true`
	}
	timeout := time.Duration(w.TimeoutS * float64(time.Second))
	out := make([]servedOutcome, n)
	release := s.clk.now()
	var wg sync.WaitGroup
	for c := range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			res := serveMem(t, s, ctx, chatBody(w.Prompts[c%len(w.Prompts)], w.MaxTokens, extra))
			o := servedOutcome{endS: s.clk.now() - release, contents: len(res.contents)}
			if ctx.Err() != nil {
				o.endS = w.TimeoutS
			}
			o.ok = ctx.Err() == nil && res.done && res.finish != ""
			if len(res.contentAtS) > 0 {
				f := res.contentAtS[0] - release
				o.firstS = &f
			}
			out[c] = o
		})
		synctest.Wait()
	}
	wg.Wait()
	return out
}

// TestPredictMatchesServedSimulator holds the virtual-clock prediction to
// the served simulator run on the fake clock: the same first token, end and
// outcome for every client, with a frontend, chunked prefill, batching and
// timeouts in play.
func TestPredictMatchesServedSimulator(t *testing.T) {
	cases := []struct {
		profile  string
		workload ClosedWorkload
		inOrder  bool // clients reach the engine one after another, in client order
		caching  bool // the profile caches prefixes
	}{
		// Frontend queue, chunked prefill, prompt-dependent natural lengths.
		{"t4-qwen2.5-1.5b-batching", ClosedWorkload{Concurrencies: []int{8, 64}, Repeats: 1, Prompts: fitPrompts, MaxTokens: 128, TimeoutS: 60}, true, false},
		// Prefix caching: shared-prefix prompts hit blocks cached by the
		// wave before and by earlier requests of the same wave; the cache
		// outlives each wave.
		{"t4-qwen2.5-1.5b-batching", ClosedWorkload{Concurrencies: []int{8, 64}, Repeats: 2, Prompts: sharedPrefixPrompts(8), MaxTokens: 32, TimeoutS: 60}, true, true},
		// One lock, timeouts in the queue and mid-stream; one prompt, since
		// requests arriving at one instant reach a lock in any order.
		{"t4-qwen2.5-1.5b-serial", ClosedWorkload{Concurrencies: []int{32}, Repeats: 1, Prompts: fitPrompts[:1], MaxTokens: 128, TimeoutS: 60, IgnoreEOS: true}, false, false},
	}
	for _, tc := range cases {
		name := tc.profile
		if tc.caching {
			name += "-prefix-caching"
		}
		t.Run(name, func(t *testing.T) {
			p, err := BuiltinProfile(tc.profile)
			if err != nil {
				t.Fatal(err)
			}
			p.PrefixCaching = tc.caching
			pr, err := Predict(p, tc.workload, PredictOptions{Server: "sim"})
			if err != nil {
				t.Fatal(err)
			}
			synctest.Test(t, func(t *testing.T) {
				s, err := New(Options{Profile: p})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				for _, n := range tc.workload.Concurrencies {
					for rep := 1; rep <= tc.workload.Repeats; rep++ {
						served := serveOrderedWave(t, s, tc.workload, n)
						time.Sleep(time.Second)
						var predicted []contract.Record
						fails := 0
						for _, r := range pr.Records {
							if r.Concurrency == n && r.Repeat == rep {
								predicted = append(predicted, r)
								if !r.OK {
									fails++
								}
							}
						}
						if !tc.inOrder {
							// Which client takes the lock first is the
							// scheduler's choice: compare the timelines.
							sortOutcomes(served)
							slices.SortStableFunc(predicted, func(a, b contract.Record) int {
								return cmpOutcome(a.OK, a.FirstContentS, a.EndS, b.OK, b.FirstContentS, b.EndS)
							})
						}
						for i, r := range predicted {
							got := served[i]
							if got.ok != r.OK || math.Abs(got.endS-r.EndS) > 1e-6 || (got.firstS == nil) != (r.FirstContentS == nil) ||
								(got.firstS != nil && math.Abs(*got.firstS-*r.FirstContentS) > 1e-6) {
								t.Errorf("%d clients, repeat %d, request %d: served ok=%v first=%v end=%.6f; predicted ok=%v first=%v end=%.6f",
									n, rep, i, got.ok, deref(got.firstS), got.endS, r.OK, deref(r.FirstContentS), r.EndS)
							}
							if r.OK && got.contents != len(r.ChunkTimesS) {
								t.Errorf("%d clients, request %d: served %d content chunks, predicted %d", n, i, got.contents, len(r.ChunkTimesS))
							}
						}
						if tc.profile == "t4-qwen2.5-1.5b-serial" && fails == 0 {
							t.Errorf("%d clients: no predicted timeout; the case is meant to exercise them", n)
						}
					}
				}
			})
		})
	}
}

func cmpOutcome(aOK bool, aFirst *float64, aEnd float64, bOK bool, bFirst *float64, bEnd float64) int {
	if aOK != bOK {
		if aOK {
			return -1
		}
		return 1
	}
	if c := cmp.Compare(deref(aFirst), deref(bFirst)); c != 0 {
		return c
	}
	return cmp.Compare(aEnd, bEnd)
}

func sortOutcomes(os []servedOutcome) {
	slices.SortStableFunc(os, func(a, b servedOutcome) int {
		return cmpOutcome(a.ok, a.firstS, a.endS, b.ok, b.firstS, b.endS)
	})
}

func deref(v *float64) float64 {
	if v == nil {
		return math.NaN()
	}
	return *v
}

func TestPredictAggregatesByTheContract(t *testing.T) {
	p, err := BuiltinProfile("t4-qwen2.5-1.5b-serial")
	if err != nil {
		t.Fatal(err)
	}
	w := ClosedWorkload{Concurrencies: []int{8, 1}, Repeats: 2, Prompts: fitPrompts, MaxTokens: 64, TimeoutS: 60, IgnoreEOS: true}
	pr, err := Predict(p, w, PredictOptions{Server: "naive"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pr.Waves) != 4 || len(pr.Records) != 2*(1+8) {
		t.Fatalf("%d waves and %d records, want 4 and 18", len(pr.Waves), len(pr.Records))
	}
	if got := pr.Waves[0].Concurrency; got != 1 {
		t.Errorf("first wave at %d clients, want concurrencies in ascending order", got)
	}
	// The aggregates are the contract's own over the predicted records.
	want := contract.Aggregates(pr.Waves, pr.Records, []string{"naive"}, "")
	if len(pr.Aggregates) != 2 || *pr.Aggregates[1].Goodput.Median != *want[1].Goodput.Median {
		t.Fatalf("aggregates %+v, want the contract's %+v", pr.Aggregates, want)
	}
	for _, r := range pr.Records {
		if !r.OK || r.OutputTokens != 64 || *r.UsageCompletionTokens != 64 || r.FinishReason != "length" {
			t.Fatalf("record %+v: want ok, 64 generated tokens counted as 64 (the simulator's text round-trips)", r)
		}
	}
	// One client at a time: the 8-client wave lasts about 8 one-client waves.
	one, eight := pr.Waves[0].WallS, pr.Waves[2].WallS
	if eight < 7.5*one || eight > 8.5*one {
		t.Errorf("8-client wave %.3f s against 1-client %.3f s: a serial engine should take about 8 times as long", eight, one)
	}
	again, err := Predict(p, w, PredictOptions{Server: "naive"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range pr.Records {
		if pr.Records[i].EndS != again.Records[i].EndS {
			t.Fatalf("record %d: end %.9f then %.9f: a prediction must be deterministic", i, pr.Records[i].EndS, again.Records[i].EndS)
		}
	}
}

func TestPredictRejectsBadInput(t *testing.T) {
	p, err := BuiltinProfile("t4-qwen2.5-1.5b-batching")
	if err != nil {
		t.Fatal(err)
	}
	good := ClosedWorkload{Concurrencies: []int{1}, Repeats: 1, Prompts: fitPrompts, MaxTokens: 16, TimeoutS: 60}
	for _, tc := range []struct {
		name string
		edit func(*ClosedWorkload, *PredictOptions)
		want string
	}{
		{"no prompts", func(w *ClosedWorkload, _ *PredictOptions) { w.Prompts = nil }, "no prompts"},
		{"zero repeats", func(w *ClosedWorkload, _ *PredictOptions) { w.Repeats = 0 }, "repeats = 0"},
		{"bad timeout", func(w *ClosedWorkload, _ *PredictOptions) { w.TimeoutS = math.Inf(1) }, "timeout_s = +Inf"},
		{"over max_model_len", func(w *ClosedWorkload, _ *PredictOptions) { w.MaxTokens = 4000 }, "max_model_len 2048"},
		{"bad concurrency", func(w *ClosedWorkload, _ *PredictOptions) { w.Concurrencies = []int{0} }, "concurrency 0"},
	} {
		w, o := good, PredictOptions{}
		tc.edit(&w, &o)
		_, err := Predict(p, w, o)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

func BenchmarkPredictCanonical(b *testing.B) {
	p, err := BuiltinProfile("h200-qwen2.5-1.5b-transformers-batching")
	if err != nil {
		b.Fatal(err)
	}
	w := ClosedWorkload{Concurrencies: []int{1, 8, 32, 64}, Repeats: 3, Prompts: fitPrompts, MaxTokens: 128, TimeoutS: 60, IgnoreEOS: true}
	tk, err := defaultCounter()
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := Predict(p, w, PredictOptions{Tokenizer: tk}); err != nil {
			b.Fatal(err)
		}
	}
}
