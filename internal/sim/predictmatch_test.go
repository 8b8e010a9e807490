package sim

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/sim/engine"
	"github.com/rehearse/rehearse/internal/sim/predict"
	"github.com/rehearse/rehearse/internal/workload"
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
func serveOrderedWave(t *testing.T, s *Server, w predict.ClosedWorkload, n int) []servedOutcome {
	t.Helper()
	extra := ""
	if w.IgnoreEOS {
		extra = `,"ignore_eos":true`
	}
	timeout := time.Duration(w.TimeoutS * float64(time.Second))
	out := make([]servedOutcome, n)
	release := s.clk.Now()
	var wg sync.WaitGroup
	for c := range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			res := serveMem(t, s, ctx, chatBody(w.Prompts[c%len(w.Prompts)], w.MaxTokens, extra))
			o := servedOutcome{endS: s.clk.Now() - release, contents: len(res.contents)}
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
		workload predict.ClosedWorkload
		inOrder  bool // clients reach the engine one after another, in client order
		caching  bool // the profile caches prefixes
	}{
		// Frontend queue, chunked prefill, prompt-dependent natural lengths.
		{"t4-qwen2.5-1.5b-batching", predict.ClosedWorkload{Concurrencies: []int{8, 64}, Repeats: 1, Prompts: fitPrompts, MaxTokens: 128, TimeoutS: 60}, true, false},
		// Prefix caching: shared-prefix prompts hit blocks cached by the
		// wave before and by earlier requests of the same wave; the cache
		// outlives each wave.
		{"t4-qwen2.5-1.5b-batching", predict.ClosedWorkload{Concurrencies: []int{8, 64}, Repeats: 2, Prompts: sharedPrefixPrompts(8), MaxTokens: 32, TimeoutS: 60}, true, true},
		// One lock, timeouts in the queue and mid-stream; one prompt, since
		// requests arriving at one instant reach a lock in any order.
		{"t4-qwen2.5-1.5b-serial", predict.ClosedWorkload{Concurrencies: []int{32}, Repeats: 1, Prompts: fitPrompts[:1], MaxTokens: 128, TimeoutS: 60, IgnoreEOS: true}, false, false},
	}
	for _, tc := range cases {
		name := tc.profile
		if tc.caching {
			name += "-prefix-caching"
		}
		t.Run(name, func(t *testing.T) {
			p, err := engine.BuiltinProfile(tc.profile)
			if err != nil {
				t.Fatal(err)
			}
			p.PrefixCaching = tc.caching
			pr, err := predict.Closed(p, tc.workload, predict.Options{Server: "sim"})
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

// lengthPrompts are n prompts of different lengths (20 to 20 + 37·(n−1)
// words), for per-request input lengths.
func lengthPrompts(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("Prompt %d: ", i) + strings.Repeat("the quiet harbour at dawn ", 4+7*i)
	}
	return out
}

// TestPredictOpenMatchesServedSimulator holds predict.Open to the served
// simulator on the fake clock, request by request: ramps (linear and
// exponential), a trace replay with prefix caching, per-request prompt and
// output lengths, the decode term per context token and the step jitter.
// Each request is sent at its offset of the same schedule, on a fresh
// server, so the engine's steps are the predictor's one for one.
func TestPredictOpenMatchesServedSimulator(t *testing.T) {
	lengths := func(n int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = 8 + (i*13)%40
		}
		return out
	}
	cases := []struct {
		name, profile string
		caching       bool
		w             predict.OpenWorkload
	}{
		{"batching-linear-ramp-lengths", "t4-qwen2.5-1.5b-batching", false, predict.OpenWorkload{
			Prompts: lengthPrompts(12), MaxTokens: 64, PromptMaxTokens: lengths(12), TimeoutS: 60, IgnoreEOS: true,
			Arrival: workload.ArrivalPoisson, Seed: 5, NumRequests: 30, Ramp: &contract.Ramp{Strategy: contract.RampLinear, StartRPS: 2, EndRPS: 40}}},
		{"serial-exponential-ramp-lengths", "t4-qwen2.5-1.5b-serial", false, predict.OpenWorkload{
			Prompts: lengthPrompts(6), MaxTokens: 64, PromptMaxTokens: lengths(6), TimeoutS: 5, IgnoreEOS: true,
			Arrival: workload.ArrivalGamma, Burstiness: 0.5, Seed: 2, NumRequests: 12, Ramp: &contract.Ramp{Strategy: contract.RampExponential, StartRPS: 0.5, EndRPS: 8}}},
		{"batching-trace-prefix-caching", "t4-qwen2.5-1.5b-batching", true, predict.OpenWorkload{
			Prompts: sharedPrefixPrompts(10), MaxTokens: 24, PromptMaxTokens: lengths(10), TimeoutS: 60, IgnoreEOS: true,
			Arrival: workload.ArrivalTrace, ArrivalsS: []float64{0, 0.01, 0.013, 0.2, 0.21, 0.5, 0.52, 0.9, 1.4, 1.41}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := engine.BuiltinProfile(tc.profile)
			if err != nil {
				t.Fatal(err)
			}
			p.PrefixCaching = tc.caching
			p.DecodePerContextTokenS = 2e-6
			p.StepJitter = 0.2
			pr, err := predict.Open(p, tc.w, predict.Options{Server: "sim"})
			if err != nil {
				t.Fatal(err)
			}
			// Each request is sent at its schedule offset, as the
			// predictor stamped it.
			var offs []float64
			for _, r := range pr.Records {
				offs = append(offs, r.IntendedStartS)
			}
			if len(offs) < 10 {
				t.Fatalf("%d records", len(offs))
			}
			synctest.Test(t, func(t *testing.T) {
				s, err := New(Options{Profile: p})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				served := make([]servedOutcome, len(offs))
				release := s.clk.Now()
				var wg sync.WaitGroup
				for i, off := range offs {
					wg.Go(func() {
						time.Sleep(time.Duration(off * float64(time.Second)))
						ctx, cancel := context.WithTimeout(context.Background(), time.Duration(tc.w.TimeoutS*float64(time.Second)))
						defer cancel()
						prompt := workload.PromptIndex(i, len(tc.w.Prompts))
						res := serveMem(t, s, ctx, chatBody(tc.w.Prompts[prompt], tc.w.PromptMaxTokens[prompt], `,"ignore_eos":true`))
						o := servedOutcome{endS: s.clk.Now() - release, contents: len(res.contents)}
						if ctx.Err() != nil {
							o.endS = off + tc.w.TimeoutS
						}
						o.ok = ctx.Err() == nil && res.done && res.finish != ""
						if len(res.contentAtS) > 0 {
							f := res.contentAtS[0] - release
							o.firstS = &f
						}
						served[i] = o
					})
				}
				wg.Wait()
				fails := 0
				for i, r := range pr.Records {
					got := served[i]
					if !r.OK {
						fails++
					}
					if got.ok != r.OK || math.Abs(got.endS-r.EndS) > 1e-6 || (got.firstS == nil) != (r.FirstContentS == nil) ||
						(got.firstS != nil && math.Abs(*got.firstS-*r.FirstContentS) > 1e-6) {
						t.Errorf("request %d (sent at %.4f s): served ok=%v first=%v end=%.6f; predicted ok=%v first=%v end=%.6f",
							i, offs[i], got.ok, deref(got.firstS), got.endS, r.OK, deref(r.FirstContentS), r.EndS)
					}
					if r.OK && got.contents != len(r.ChunkTimesS) {
						t.Errorf("request %d: served %d content chunks, predicted %d", i, got.contents, len(r.ChunkTimesS))
					}
				}
				if tc.profile == "t4-qwen2.5-1.5b-serial" && fails == 0 {
					t.Errorf("no predicted timeout; the serial case is meant to exercise them")
				}
			})
			// Each request generates its own max_tokens (ignore_eos).
			for i, r := range pr.Records {
				want := tc.w.PromptMaxTokens[workload.PromptIndex(i, len(tc.w.Prompts))]
				if r.OK && (r.OutputTokens != want || r.FinishReason != "length") {
					t.Errorf("request %d: %d tokens (%s), want its own max_tokens %d", i, r.OutputTokens, r.FinishReason, want)
				}
			}
		})
	}
}
