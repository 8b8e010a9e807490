package sim

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/workload"
)

// lengthPrompts are n prompts of different lengths (20 to 20 + 37·(n−1)
// words), for per-request input lengths.
func lengthPrompts(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("Prompt %d: ", i) + strings.Repeat("the quiet harbour at dawn ", 4+7*i)
	}
	return out
}

// TestPredictOpenMatchesServedSimulator holds PredictOpen to the served
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
		w             OpenWorkload
	}{
		{"batching-linear-ramp-lengths", "t4-qwen2.5-1.5b-batching", false, OpenWorkload{
			Prompts: lengthPrompts(12), MaxTokens: 64, PromptMaxTokens: lengths(12), TimeoutS: 60, IgnoreEOS: true,
			Arrival: workload.ArrivalPoisson, Seed: 5, NumRequests: 30, Ramp: &contract.Ramp{Strategy: contract.RampLinear, StartRPS: 2, EndRPS: 40}}},
		{"serial-exponential-ramp-lengths", "t4-qwen2.5-1.5b-serial", false, OpenWorkload{
			Prompts: lengthPrompts(6), MaxTokens: 64, PromptMaxTokens: lengths(6), TimeoutS: 5, IgnoreEOS: true,
			Arrival: workload.ArrivalGamma, Burstiness: 0.5, Seed: 2, NumRequests: 12, Ramp: &contract.Ramp{Strategy: contract.RampExponential, StartRPS: 0.5, EndRPS: 8}}},
		{"batching-trace-prefix-caching", "t4-qwen2.5-1.5b-batching", true, OpenWorkload{
			Prompts: sharedPrefixPrompts(10), MaxTokens: 24, PromptMaxTokens: lengths(10), TimeoutS: 60, IgnoreEOS: true,
			Arrival: workload.ArrivalTrace, ArrivalsS: []float64{0, 0.01, 0.013, 0.2, 0.21, 0.5, 0.52, 0.9, 1.4, 1.41}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := BuiltinProfile(tc.profile)
			if err != nil {
				t.Fatal(err)
			}
			p.PrefixCaching = tc.caching
			p.DecodePerContextTokenS = 2e-6
			p.StepJitter = 0.2
			pr, err := PredictOpen(p, tc.w, PredictOptions{Server: "sim"})
			if err != nil {
				t.Fatal(err)
			}
			offs, err := tc.w.offsets()
			if err != nil {
				t.Fatal(err)
			}
			if len(offs) != len(pr.Records) || len(offs) < 10 {
				t.Fatalf("%d offsets, %d records", len(offs), len(pr.Records))
			}
			synctest.Test(t, func(t *testing.T) {
				s, err := New(Options{Profile: p})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				served := make([]servedOutcome, len(offs))
				release := s.clk.now()
				var wg sync.WaitGroup
				for i, off := range offs {
					wg.Go(func() {
						time.Sleep(time.Duration(off * float64(time.Second)))
						ctx, cancel := context.WithTimeout(context.Background(), time.Duration(tc.w.TimeoutS*float64(time.Second)))
						defer cancel()
						prompt := workload.PromptIndex(i, len(tc.w.Prompts))
						res := serveMem(t, s, ctx, chatBody(tc.w.Prompts[prompt], tc.w.PromptMaxTokens[prompt], `,"ignore_eos":true`))
						o := servedOutcome{endS: s.clk.now() - release, contents: len(res.contents)}
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

// TestStepModelTerms: the context term adds per context token, the jitter
// moves steps around their model with mean about 0, and both are 0 by
// default (the step is StepS exactly).
func TestStepModelTerms(t *testing.T) {
	p, err := BuiltinProfile("t4-qwen2.5-1.5b-batching")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.stepModelS(7, 8, 100, 5000), p.StepS(8, 100); got != want {
		t.Errorf("default profile: step %g, want StepS %g", got, want)
	}
	p.DecodePerContextTokenS = 1e-6
	if got, want := p.stepModelS(7, 8, 100, 5000), p.StepS(8, 100)+0.005; !near(got, want, 1e-12) {
		t.Errorf("context term: step %g, want %g", got, want)
	}
	p.DecodePerContextTokenS, p.StepJitter = 0, 0.2
	base := p.StepS(8, 0)
	sum, lo, hi := 0.0, math.Inf(1), math.Inf(-1)
	const n = 20000
	for i := range int64(n) {
		s := p.stepModelS(i, 8, 0, 0)
		sum += s
		lo, hi = min(lo, s), max(hi, s)
	}
	if mean := sum / n; math.Abs(mean/base-1) > 0.01 {
		t.Errorf("jittered steps average %g, want about %g", mean, base)
	}
	if lo < base*(1-0.2*math.Sqrt(3))-1e-12 || hi > base*(1+0.2*math.Sqrt(3))+1e-12 || hi-lo < base*0.6 {
		t.Errorf("jittered steps span [%g, %g] around %g", lo, hi, base)
	}
	if p.stepModelS(3, 8, 0, 0) != p.stepModelS(3, 8, 0, 0) {
		t.Error("the jitter of a step is not a function of its index")
	}
	for _, bad := range []float64{-0.1, 0.6, math.NaN()} {
		q := *p
		q.StepJitter = bad
		if err := q.Validate(); err == nil || !strings.Contains(err.Error(), "step_jitter") {
			t.Errorf("step_jitter %g: %v", bad, err)
		}
	}
}

// openBundle is a bundle of a known profile's open-loop predictions at
// each rate (one wave a rate) and its sustained loop at each number of
// clients: what a fit on those modes must recover.
func openBundle(t *testing.T, p *Profile, w OpenWorkload, rates []float64, sustained []int) *bundle.Results {
	t.Helper()
	res := &bundle.Results{
		Schema:     bundle.Schema,
		Provenance: bundle.Provenance{Model: bundle.Model{ID: "Qwen/Qwen2.5-1.5B-Instruct"}},
		Workload: bundle.Workload{Kind: contract.ModeOpen, Repeats: 1, Prompts: w.Prompts, MaxTokens: w.MaxTokens, PromptMaxTokens: w.PromptMaxTokens,
			TimeoutS: w.TimeoutS, ExtraBody: map[string]any{"ignore_eos": true},
			Open: &bundle.OpenLoop{RequestRatesRPS: rates, Arrival: w.Arrival, Seed: w.Seed, NumRequests: w.NumRequests}},
		Servers: []bundle.Server{{Name: "s", LaunchArgv: []string{"vllm", "serve", "--max-num-seqs", "64"}}},
	}
	add := func(pr *Prediction) {
		ids := map[int]int{}
		for _, wv := range pr.Waves {
			ids[wv.ID] = len(res.Waves)
			wv.ID = len(res.Waves)
			res.Waves = append(res.Waves, wv)
		}
		for _, r := range pr.Records {
			r.Wave = ids[r.Wave]
			res.Records = append(res.Records, r)
		}
	}
	for _, rate := range rates {
		ow := w
		ow.RateRPS = rate
		pr, err := PredictOpen(p, ow, PredictOptions{Server: "s"})
		if err != nil {
			t.Fatal(err)
		}
		add(pr)
	}
	if len(sustained) > 0 {
		res.Workload.Sustained = &bundle.Sustained{NumRequests: 48, WarmupRequests: 8}
		sw := SustainedWorkload{Prompts: w.Prompts, MaxTokens: w.MaxTokens, PromptMaxTokens: w.PromptMaxTokens, TimeoutS: w.TimeoutS, IgnoreEOS: true, Requests: 48, WarmupRequests: 8}
		for _, c := range sustained {
			pr, err := PredictSustained(p, sw, c, PredictOptions{Server: "s"})
			if err != nil {
				t.Fatal(err)
			}
			add(pr)
		}
	}
	res.Recompute()
	return res
}

// TestFitOnOpenAndSustainedRecovers fits a batching profile on open-loop
// and sustained records of a known one, whose prompts and outputs vary in
// length: the prefill per token, the decode term per context token and the
// decode steps come back near the truth, and the fitted profile predicts a
// held-out rate within 10 % on goodput and TPOT.
func TestFitOnOpenAndSustainedRecovers(t *testing.T) {
	truth, err := BuiltinProfile("t4-qwen2.5-1.5b-batching")
	if err != nil {
		t.Fatal(err)
	}
	truth.DecodeStepS = [][2]float64{{1, 0.015}, {64, 0.035}}
	truth.RequestOverheadS, truth.FrontendSPerRequest, truth.PrefillBaseS = 0.004, 0, 0
	truth.PrefillPerTokenS, truth.DecodePerContextTokenS = 0.0001, 1e-6
	truth.MaxNumSeqs, truth.MaxNumBatchedTokens = 64, 0
	prompts := lengthPrompts(40)
	maxTok := make([]int, len(prompts))
	for i := range maxTok {
		maxTok[i] = 32 + (i*29)%96
	}
	w := OpenWorkload{Prompts: prompts, MaxTokens: 128, PromptMaxTokens: maxTok, TimeoutS: 120, IgnoreEOS: true,
		Arrival: workload.ArrivalPoisson, Seed: 1, NumRequests: 80}
	res := openBundle(t, truth, w, []float64{0.2, 4, 12}, []int{32})
	keys := []contract.Key{{Mode: contract.ModeOpen, RequestRateRPS: 0.2}, {Mode: contract.ModeOpen, RequestRateRPS: 12}}
	f, err := FitProfile(res, FitOptions{Server: "s", Engine: EngineBatching, FitLoads: keys})
	if err != nil {
		t.Fatal(err)
	}
	p := f.Profile
	within := func(name string, got, want, tol float64) {
		t.Helper()
		if math.Abs(got/want-1) > tol {
			t.Errorf("%s = %.4g, want %.4g within %.0f %%\n%s", name, got, want, 100*tol, strings.Join(f.Derivation, "\n"))
		}
	}
	within("prefill_per_token_s", p.PrefillPerTokenS, truth.PrefillPerTokenS, 0.35)
	within("decode_per_context_token_s", p.DecodePerContextTokenS, truth.DecodePerContextTokenS, 0.5)
	within("decode step at the lowest batch", p.decodeS(p.DecodeStepS[0][0]), truth.decodeS(p.DecodeStepS[0][0]), 0.15)
	last := p.DecodeStepS[len(p.DecodeStepS)-1]
	if last[0] < 32 {
		t.Errorf("decode points %v: 12 req/s should run at a batch well above 32", p.DecodeStepS)
	}
	within("decode step at the highest batch", last[1], truth.decodeS(last[0]), 0.15)
	// With the sustained loop too: its point comes from its measured
	// decode occupancy. Its warm-up requests are not in its records, so the
	// prefill they share is not taken out of its TPOT: a wider tolerance.
	fs, err := FitProfile(res, FitOptions{Server: "s", Engine: EngineBatching, FitLoads: append(keys, contract.Key{Mode: contract.ModeSustained, Concurrency: 32})})
	if err != nil {
		t.Fatal(err)
	}
	if pts := fs.Profile.DecodeStepS; len(pts) != 3 || pts[1][0] < 16 || pts[1][0] > 32 || math.Abs(pts[1][1]/truth.decodeS(pts[1][0])-1) > 0.3 {
		t.Errorf("with 32 sustained clients: decode points %v, want a middle one at a batch of 16 to 32 within 30 %% of the truth's", pts)
	}
	if p.MaxNumSeqs != 64 || p.StepJitter != 0 {
		t.Errorf("max_num_seqs %d, step_jitter %g", p.MaxNumSeqs, p.StepJitter)
	}
	// The held-out rate, predicted by the fitted profile.
	ow := w
	ow.RateRPS = 4
	want, err := PredictOpen(truth, ow, PredictOptions{Server: "s"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := PredictOpen(p, ow, PredictOptions{Server: "s"})
	if err != nil {
		t.Fatal(err)
	}
	g := RelErr(got.Aggregates[0].Goodput.Median, want.Aggregates[0].Goodput.Median)
	tp := RelErr(got.Aggregates[0].TPOT.P50, want.Aggregates[0].TPOT.P50)
	if g == nil || tp == nil || math.Abs(*g) > 0.10 || math.Abs(*tp) > 0.10 {
		t.Errorf("held-out 4 req/s: goodput error %v, TPOT p50 error %v, want within 10 %%", deref(g), deref(tp))
	}
}

// TestFitJitterRecoversTheSpread: a profile with step jitter 0.2, served
// one request at a time, is fitted back to about 0.2 with --fit-jitter,
// and to 0 without it.
func TestFitJitterRecoversTheSpread(t *testing.T) {
	truth, err := BuiltinProfile("t4-qwen2.5-1.5b-serial")
	if err != nil {
		t.Fatal(err)
	}
	truth.StepJitter = 0.2
	w := OpenWorkload{Prompts: fitPrompts, MaxTokens: 64, TimeoutS: 60, IgnoreEOS: true, Arrival: workload.ArrivalFixed, Seed: 1, NumRequests: 20}
	res := openBundle(t, truth, w, []float64{0.1}, nil)
	keys := []contract.Key{{Mode: contract.ModeOpen, RequestRateRPS: 0.1}}
	f, err := FitProfile(res, FitOptions{Server: "s", Engine: EngineSerial, FitLoads: keys, Jitter: true})
	if err != nil {
		t.Fatal(err)
	}
	if j := f.Profile.StepJitter; math.Abs(j-0.2) > 0.04 {
		t.Errorf("step_jitter %g, want about 0.2", j)
	}
	f, err = FitProfile(res, FitOptions{Server: "s", Engine: EngineSerial, FitLoads: keys})
	if err != nil || f.Profile.StepJitter != 0 {
		t.Errorf("without Jitter: step_jitter %v (%v)", f.Profile.StepJitter, err)
	}
}
