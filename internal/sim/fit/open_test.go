package fit

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/sim/engine"
	"github.com/rehearse/rehearse/internal/sim/predict"
	"github.com/rehearse/rehearse/internal/workload"
)

// openBundle is a bundle of a known profile's open-loop predictions at
// each rate (one wave a rate) and its sustained loop at each number of
// clients: what a fit on those modes must recover.
func openBundle(t *testing.T, p *engine.Profile, w predict.OpenWorkload, rates []float64, sustained []int) *bundle.Results {
	t.Helper()
	res := &bundle.Results{
		Schema:     bundle.Schema,
		Provenance: bundle.Provenance{Model: bundle.Model{ID: "Qwen/Qwen2.5-1.5B-Instruct"}},
		Workload: bundle.Workload{Kind: contract.ModeOpen, Repeats: 1, Prompts: w.Prompts, MaxTokens: w.MaxTokens, PromptMaxTokens: w.PromptMaxTokens,
			TimeoutS: w.TimeoutS, ExtraBody: map[string]any{"ignore_eos": true},
			Open: &bundle.OpenLoop{RequestRatesRPS: rates, Arrival: w.Arrival, Seed: w.Seed, NumRequests: w.NumRequests}},
		Servers: []bundle.Server{{Name: "s", LaunchArgv: []string{"vllm", "serve", "--max-num-seqs", "64"}}},
	}
	add := func(pr *predict.Result) {
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
		pr, err := predict.Open(p, ow, predict.Options{Server: "s"})
		if err != nil {
			t.Fatal(err)
		}
		add(pr)
	}
	if len(sustained) > 0 {
		res.Workload.Sustained = &bundle.Sustained{NumRequests: 48, WarmupRequests: 8}
		sw := predict.SustainedWorkload{Prompts: w.Prompts, MaxTokens: w.MaxTokens, PromptMaxTokens: w.PromptMaxTokens, TimeoutS: w.TimeoutS, IgnoreEOS: true, Requests: 48, WarmupRequests: 8}
		for _, c := range sustained {
			pr, err := predict.Sustained(p, sw, c, predict.Options{Server: "s"})
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
	truth, err := engine.BuiltinProfile("t4-qwen2.5-1.5b-batching")
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
	w := predict.OpenWorkload{Prompts: prompts, MaxTokens: 128, PromptMaxTokens: maxTok, TimeoutS: 120, IgnoreEOS: true,
		Arrival: workload.ArrivalPoisson, Seed: 1, NumRequests: 80}
	res := openBundle(t, truth, w, []float64{0.2, 4, 12}, []int{32})
	keys := []contract.Key{{Mode: contract.ModeOpen, RequestRateRPS: 0.2}, {Mode: contract.ModeOpen, RequestRateRPS: 12}}
	f, err := Profile(res, Options{Server: "s", Engine: engine.Batching, FitLoads: keys})
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
	within("decode step at the lowest batch", p.DecodeS(p.DecodeStepS[0][0]), truth.DecodeS(p.DecodeStepS[0][0]), 0.15)
	last := p.DecodeStepS[len(p.DecodeStepS)-1]
	if last[0] < 32 {
		t.Errorf("decode points %v: 12 req/s should run at a batch well above 32", p.DecodeStepS)
	}
	within("decode step at the highest batch", last[1], truth.DecodeS(last[0]), 0.15)
	// With the sustained loop too: its point comes from its measured
	// decode occupancy. Its warm-up requests are not in its records, so the
	// prefill they share is not taken out of its TPOT: a wider tolerance.
	fs, err := Profile(res, Options{Server: "s", Engine: engine.Batching, FitLoads: append(keys, contract.Key{Mode: contract.ModeSustained, Concurrency: 32})})
	if err != nil {
		t.Fatal(err)
	}
	if pts := fs.Profile.DecodeStepS; len(pts) != 3 || pts[1][0] < 16 || pts[1][0] > 32 || math.Abs(pts[1][1]/truth.DecodeS(pts[1][0])-1) > 0.3 {
		t.Errorf("with 32 sustained clients: decode points %v, want a middle one at a batch of 16 to 32 within 30 %% of the truth's", pts)
	}
	if p.MaxNumSeqs != 64 || p.StepJitter != 0 {
		t.Errorf("max_num_seqs %d, step_jitter %g", p.MaxNumSeqs, p.StepJitter)
	}
	// The held-out rate, predicted by the fitted profile.
	ow := w
	ow.RateRPS = 4
	want, err := predict.Open(truth, ow, predict.Options{Server: "s"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := predict.Open(p, ow, predict.Options{Server: "s"})
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
	truth, err := engine.BuiltinProfile("t4-qwen2.5-1.5b-serial")
	if err != nil {
		t.Fatal(err)
	}
	truth.StepJitter = 0.2
	w := predict.OpenWorkload{Prompts: fitPrompts, MaxTokens: 64, TimeoutS: 60, IgnoreEOS: true, Arrival: workload.ArrivalFixed, Seed: 1, NumRequests: 20}
	res := openBundle(t, truth, w, []float64{0.1}, nil)
	keys := []contract.Key{{Mode: contract.ModeOpen, RequestRateRPS: 0.1}}
	f, err := Profile(res, Options{Server: "s", Engine: engine.Serial, FitLoads: keys, Jitter: true})
	if err != nil {
		t.Fatal(err)
	}
	if j := f.Profile.StepJitter; math.Abs(j-0.2) > 0.04 {
		t.Errorf("step_jitter %g, want about 0.2", j)
	}
	f, err = Profile(res, Options{Server: "s", Engine: engine.Serial, FitLoads: keys})
	if err != nil || f.Profile.StepJitter != 0 {
		t.Errorf("without Jitter: step_jitter %v (%v)", f.Profile.StepJitter, err)
	}
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

// near reports whether got is within a relative tol of want.
func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol*math.Abs(want)+1e-8 }

// fitPrompts are the eight prompts rehearse demo sends.
var fitPrompts = workload.BuiltinPrompts()

// deref is *v, NaN for nil.
func deref(v *float64) float64 {
	if v == nil {
		return math.NaN()
	}
	return *v
}
