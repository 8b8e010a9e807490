package fit

import (
	"compress/gzip"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/sim/engine"
	"github.com/rehearse/rehearse/internal/sim/predict"
)

// syntheticBundle is a bundle whose records are a known profile's
// prediction: what a fit must recover. ratio re-counts each record's
// output_tokens as random-weight text re-tokenizes (usage keeps the
// generated count).
func syntheticBundle(t *testing.T, p *engine.Profile, w predict.ClosedWorkload, server string, argv []string, ratio float64) *bundle.Results {
	t.Helper()
	pr, err := predict.Closed(p, w, predict.Options{Server: server})
	if err != nil {
		t.Fatal(err)
	}
	for i := range pr.Records {
		r := &pr.Records[i]
		r.OutputTokens = int(math.Round(float64(r.OutputTokens) * ratio))
	}
	extra := map[string]any{}
	if w.IgnoreEOS {
		extra["ignore_eos"] = true
	}
	res := &bundle.Results{
		Schema:     bundle.Schema,
		Provenance: bundle.Provenance{Model: bundle.Model{ID: "Qwen/Qwen2.5-1.5B-Instruct"}},
		Workload: bundle.Workload{Kind: contract.ModeClosed, Concurrencies: w.Concurrencies, Repeats: w.Repeats, Prompts: w.Prompts,
			MaxTokens: w.MaxTokens, TimeoutS: w.TimeoutS, ExtraBody: extra},
		Servers: []bundle.Server{{Name: server, LaunchArgv: argv}},
		Waves:   pr.Waves,
		Records: pr.Records,
	}
	res.Recompute()
	return res
}

func TestFitRecoversASerialProfile(t *testing.T) {
	truth, err := engine.BuiltinProfile("t4-qwen2.5-1.5b-serial")
	if err != nil {
		t.Fatal(err)
	}
	truth.DecodeStepS = [][2]float64{{1, 0.025}}
	truth.RequestOverheadS, truth.PrefillBaseS, truth.PrefillPerTokenS = 0.004, 0, 0
	w := predict.ClosedWorkload{Concurrencies: []int{1, 8, 32}, Repeats: 2, Prompts: fitPrompts, MaxTokens: 128, TimeoutS: 60, IgnoreEOS: true}
	res := syntheticBundle(t, truth, w, "naive", []string{"python3", "naive_server.py"}, 1.05)

	f, err := Profile(res, Options{Server: "naive", Engine: engine.Serial, FitConcurrencies: []int{32, 1}})
	if err != nil {
		t.Fatal(err)
	}
	p := f.Profile
	if got := p.DecodeStepS; len(got) != 1 || !near(got[0][1], 0.025, 1e-6) {
		t.Errorf("decode_step_s %v, want [[1, 0.025]]", got)
	}
	if !near(p.RequestOverheadS, 0.004, 1e-6) {
		t.Errorf("request_overhead_s %g, want 0.004", p.RequestOverheadS)
	}
	if p.MaxNumSeqs != 1 || p.Engine != engine.Serial || p.DefaultSystemPrompt != qwenSystemPrompt || !reflect.DeepEqual(p.OutputTokens, []int{128}) {
		t.Errorf("profile %+v: want one sequence, Qwen's system prompt, 128 output tokens", p)
	}
	// 128 generated tokens were counted round(128 · 1.05) = 134 times.
	if !near(f.CountedPerGeneratedToken, 134.0/128, 1e-9) {
		t.Errorf("counted per generated token %g, want %g", f.CountedPerGeneratedToken, 134.0/128)
	}
	if len(f.Unexplained) != 0 {
		t.Errorf("a profile's own records left unexplained: %q", f.Unexplained)
	}
	cmp, err := Compare(res, f, "naive", []int{1, 32}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cmp.Rows) != 3 {
		t.Fatalf("%d comparison rows, want 3", len(cmp.Rows))
	}
	for _, r := range cmp.Rows {
		if r.Fitted != (r.Concurrency != 8) {
			t.Errorf("%d clients marked fitted=%v", r.Concurrency, r.Fitted)
		}
		g := RelErr(r.Predicted.Goodput.Median, r.Measured.Goodput.Median)
		p95 := RelErr(r.Predicted.TTFT.P95, r.Measured.TTFT.P95)
		if g == nil || p95 == nil || math.Abs(*g) > 1e-6 || math.Abs(*p95) > 1e-6 || r.Predicted.Failures.Count != r.Measured.Failures.Count {
			t.Errorf("%d clients: goodput error %v, p95 TTFT error %v, failures %d against %d: the recovered profile should predict its own records",
				r.Concurrency, deref(g), deref(p95), r.Predicted.Failures.Count, r.Measured.Failures.Count)
		}
	}
	if cmp.Rows[2].Measured.Failures.Count == 0 {
		t.Errorf("32 clients at 3.2 s a request: the case should have timeouts")
	}
}

func TestFitRecoversABatchingProfile(t *testing.T) {
	truth, err := engine.BuiltinProfile("t4-qwen2.5-1.5b-batching")
	if err != nil {
		t.Fatal(err)
	}
	truth.DecodeStepS = [][2]float64{{1, 0.020}, {64, 0.030}}
	truth.RequestOverheadS, truth.FrontendSPerRequest = 0.002, 0.005
	truth.PrefillBaseS, truth.PrefillPerTokenS, truth.MaxNumBatchedTokens = 0, 0, 0
	truth.MaxNumSeqs = 64
	truth.MaxModelLen = 32768
	w := predict.ClosedWorkload{Concurrencies: []int{1, 8, 64}, Repeats: 1, Prompts: fitPrompts, MaxTokens: 128, TimeoutS: 60, IgnoreEOS: true}
	res := syntheticBundle(t, truth, w, "batching", []string{"python3", "batching_server.py", "--max-num-seqs=64"}, 1)

	f, err := Profile(res, Options{Server: "batching", Engine: engine.Batching, FitConcurrencies: []int{1, 64}})
	if err != nil {
		t.Fatal(err)
	}
	p := f.Profile
	if p.MaxNumSeqs != 64 {
		t.Errorf("max_num_seqs %d, want 64 from --max-num-seqs=64", p.MaxNumSeqs)
	}
	if len(p.DecodeStepS) != 2 || p.DecodeStepS[0][0] != 1 || p.DecodeStepS[1][0] != 64 {
		t.Fatalf("decode_step_s %v, want points at batch 1 and 64", p.DecodeStepS)
	}
	// The 64-client TPOT includes the steps at smaller batches while the
	// frontend admits the wave, so the point lands a little under 0.030.
	for i, want := range []float64{0.020, 0.030} {
		if got := p.DecodeStepS[i][1]; math.Abs(got-want) > 0.03*want {
			t.Errorf("decode step %d: %.5f s, want %.3f within 3 %%", i, got, want)
		}
	}
	// The median first token at 64 clients also waits for a step boundary
	// and for larger steps than at 1, so the estimate runs high.
	if p.FrontendSPerRequest < 0.005 || p.FrontendSPerRequest > 1.2*0.005 {
		t.Errorf("frontend_s_per_request %.5f, want 0.005 to 20 %% above", p.FrontendSPerRequest)
	}
	cmp, err := Compare(res, f, "batching", []int{1, 64}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range cmp.Rows {
		if g := RelErr(r.Predicted.Goodput.Median, r.Measured.Goodput.Median); g == nil || math.Abs(*g) > 0.03 {
			t.Errorf("%d clients: goodput error %v, want within 3 %%", r.Concurrency, deref(g))
		}
	}
}

func TestFitNaturalOutputLengths(t *testing.T) {
	truth, err := engine.BuiltinProfile("t4-qwen2.5-1.5b-serial")
	if err != nil {
		t.Fatal(err)
	}
	w := predict.ClosedWorkload{Concurrencies: []int{1, 8}, Repeats: 1, Prompts: fitPrompts, MaxTokens: 128, TimeoutS: 600}
	res := syntheticBundle(t, truth, w, "naive", nil, 1)
	f, err := Profile(res, Options{Server: "naive", Engine: engine.Serial, FitConcurrencies: []int{8}})
	if err != nil {
		t.Fatal(err)
	}
	for i, text := range fitPrompts {
		want := truth.NaturalOutputTokens(0, text)
		got := f.Profile.NaturalOutputTokens(0, text)
		if want >= 128 {
			want = 1 << 20 // never stopped within max_tokens
		}
		if got != want {
			t.Errorf("prompt %d: natural length %d, want %d", i, got, want)
		}
	}
}

func TestFitErrorsNameWhatIsWrong(t *testing.T) {
	truth, err := engine.BuiltinProfile("t4-qwen2.5-1.5b-serial")
	if err != nil {
		t.Fatal(err)
	}
	w := predict.ClosedWorkload{Concurrencies: []int{1}, Repeats: 1, Prompts: fitPrompts, MaxTokens: 16, TimeoutS: 60}
	res := syntheticBundle(t, truth, w, "naive", nil, 1)
	for _, tc := range []struct {
		o    Options
		edit func(*bundle.Results)
		want string
	}{
		{Options{Server: "vllm", Engine: engine.Serial, FitConcurrencies: []int{1}}, nil, `no server "vllm" (have: naive)`},
		{Options{Server: "naive", Engine: "paged", FitConcurrencies: []int{1}}, nil, `engine "paged"`},
		{Options{Server: "naive", Engine: engine.Serial, FitConcurrencies: []int{1, 64}}, nil, "no recorded closed-loop wave at 64 clients"},
		{Options{Server: "naive", Engine: engine.Serial}, nil, "no fit concurrencies"},
		{Options{Server: "naive", Engine: engine.Serial, FitConcurrencies: []int{1}}, func(r *bundle.Results) { r.Workload.Sessions = []bundle.Session{{Turns: []int{0, 1}}} }, "multi-turn sessions"},
		{Options{Server: "naive", Engine: engine.Serial, FitLoads: []contract.Key{{Mode: contract.ModeOpen, RequestRateRPS: 2}}}, nil, "no recorded wave at 2 req/s"},
		{Options{Server: "naive", Engine: engine.Serial, FitConcurrencies: []int{1}}, func(r *bundle.Results) {
			for i := range r.Records {
				r.Records[i].OK = false
			}
		}, "no successful request with more than one token at 1 client"},
		{Options{Server: "naive", Engine: engine.Serial, FitConcurrencies: []int{1}}, func(r *bundle.Results) {
			r.Workload.ExtraBody = map[string]any{"ignore_eos": "yes"}
		}, "extra_body.ignore_eos = yes"},
	} {
		r := *res
		r.Records = append([]contract.Record(nil), res.Records...)
		if tc.edit != nil {
			tc.edit(&r)
		}
		_, err := Profile(&r, tc.o)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one containing %q", tc.o, err, tc.want)
		}
	}
}

func TestProfileEncodeRoundTrips(t *testing.T) {
	for _, n := range engine.ProfileNames() {
		p, err := engine.BuiltinProfile(n)
		if err != nil {
			t.Fatal(err)
		}
		data, err := p.Encode()
		if err != nil {
			t.Fatal(err)
		}
		q, err := engine.ParseProfile(data, "encoded")
		if err != nil {
			t.Fatalf("%s: %v\n%s", n, err, data)
		}
		q.Source = p.Source
		if !reflect.DeepEqual(p, q) {
			t.Errorf("%s: encoded and parsed again, the profile changed:\n%+v\n%+v", n, p, q)
		}
		if !strings.Contains(string(data), `"decode_step_s": [[`) {
			t.Errorf("%s: decode_step_s not on one line:\n%s", n, data)
		}
	}
}

// committedBundle is the H200 rehearsal the built-in H200 profiles were
// fitted to.
var committedBundle = filepath.Join("..", "..", "..", "rehearsals", "h200-qwen2.5-1.5b")

// TestH200ProfilesAreTheCommittedBundlesFit fits both servers of the
// committed H200 rehearsal as the derivations' command does and holds the
// built-in profiles to the result, and the held-out waves to the errors the
// derivations report.
func TestH200ProfilesAreTheCommittedBundlesFit(t *testing.T) {
	res, err := bundle.ReadResults(committedBundle)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		server, engine, profile string
		// Bounds on the held-out errors, a little above the derivation's.
		goodputTol, ttftTol float64
	}{
		{"naive", engine.Serial, "h200-qwen2.5-1.5b-transformers-serial", 0.10, 0.10},
		{"batching", engine.Batching, "h200-qwen2.5-1.5b-transformers-batching", 0.06, 0.50},
	} {
		t.Run(tc.profile, func(t *testing.T) {
			builtin, err := engine.BuiltinProfile(tc.profile)
			if err != nil {
				t.Fatal(err)
			}
			f, err := Profile(res, Options{Server: tc.server, Engine: tc.engine, FitConcurrencies: []int{1, 64}, Name: builtin.Name, Description: builtin.Description})
			if err != nil {
				t.Fatal(err)
			}
			f.Profile.Source = builtin.Source
			if !reflect.DeepEqual(f.Profile, builtin) {
				t.Errorf("the built-in profile is not what rehearse sim fit gives for the committed bundle:\nbuilt-in %+v\nfit      %+v", builtin, f.Profile)
			}
			cmp, err := Compare(res, f, tc.server, []int{1, 64}, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range cmp.Rows {
				if r.Fitted {
					continue
				}
				g := RelErr(r.Predicted.Goodput.Median, r.Measured.Goodput.Median)
				p95 := RelErr(r.Predicted.TTFT.P95, r.Measured.TTFT.P95)
				if g == nil || math.Abs(*g) > tc.goodputTol {
					t.Errorf("held out %d clients: goodput error %+.1f %%, want within %.0f %%", r.Concurrency, 100*deref(g), 100*tc.goodputTol)
				}
				if p95 == nil || math.Abs(*p95) > tc.ttftTol {
					t.Errorf("held out %d clients: p95 TTFT error %+.1f %%, want within %.0f %%", r.Concurrency, 100*deref(p95), 100*tc.ttftTol)
				}
			}
		})
	}
}

// TestH200BatchingProfileAgainstTheEarlierBench predicts an independent
// measurement, the rehearse bench run the previous profile was fitted to
// (internal/sim/profiles/measure/h200-2026-11-30: another lease, no --max-num-seqs cap,
// also 128 clients), with the profile fitted to the committed rehearsal.
func TestH200BatchingProfileAgainstTheEarlierBench(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "profiles", "measure", "h200-2026-11-30", "batching-journal.jsonl.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	bench, err := bundle.DecodeJournal(zr)
	if err != nil {
		t.Fatal(err)
	}
	res, err := bundle.ReadResults(committedBundle)
	if err != nil {
		t.Fatal(err)
	}
	fit, err := Profile(res, Options{Server: "batching", Engine: engine.Batching, FitConcurrencies: []int{1, 64}})
	if err != nil {
		t.Fatal(err)
	}
	cmp, err := Compare(bench, fit, "batching", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	table.WriteString("| clients | goodput measured | predicted | error | p95 TTFT measured | predicted | error |\n|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range cmp.Rows {
		g := RelErr(r.Predicted.Goodput.Median, r.Measured.Goodput.Median)
		p95 := RelErr(r.Predicted.TTFT.P95, r.Measured.TTFT.P95)
		fmt.Fprintf(&table, "| %d | %.1f | %.1f | %+.1f %% | %.3f s | %.3f s | %+.1f %% |\n", r.Concurrency,
			*r.Measured.Goodput.Median, *r.Predicted.Goodput.Median, 100*deref(g), *r.Measured.TTFT.P95, *r.Predicted.TTFT.P95, 100*deref(p95))
		if r.Concurrency <= fit.Profile.MaxNumSeqs && (g == nil || math.Abs(*g) > 0.06) {
			t.Errorf("%d clients: goodput error %+.1f %%, want within 6 %% up to the profile's max_num_seqs", r.Concurrency, 100*deref(g))
		}
	}
	t.Logf("the H200 batching profile against measure/h200-2026-11-30:\n%s", table.String())
}
