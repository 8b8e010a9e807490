package fit

import (
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/sim/engine"
	"github.com/rehearse/rehearse/internal/sim/predict"
)

func TestParseLoads(t *testing.T) {
	got, err := ParseLoads("1, 64,2.5rps,closed,sustained,open")
	if err != nil {
		t.Fatal(err)
	}
	want := []Load{
		{Mode: contract.ModeClosed, Concurrency: 1}, {Mode: contract.ModeClosed, Concurrency: 64},
		{Mode: contract.ModeOpen, RateRPS: 2.5},
		{Mode: contract.ModeClosed}, {Mode: contract.ModeSustained}, {Mode: contract.ModeOpen},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("loads %+v, want %+v", got, want)
	}
	if s := got[2].String() + " " + got[0].String() + " " + got[4].String(); s != "2.5rps 1 sustained" {
		t.Errorf("labels %q", s)
	}
	for _, tc := range []struct{ in, want string }{
		{"", "no loads"},
		{"1,,64", `load ""`},
		{"0", `load "0"`},
		{"-3", `load "-3"`},
		{"eight", `load "eight"`},
		{"0rps", `load "0rps": a rate is a number above 0`},
		{"infrps", `load "infrps"`},
		{"8,8", `load "8" is named twice`},
		{"open-loop", `load "open-loop"`},
	} {
		_, err := ParseLoads(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseLoads(%q): %v, want one line with %q", tc.in, err, tc.want)
		}
	}
}

// validateBundle is a synthetic bundle of the batching T4 profile at 1, 4,
// 8 and 16 clients, its records re-tokenized 1.06 times longer than
// generated, as random-weight text is.
func validateTruth(t *testing.T) (*engine.Profile, predict.ClosedWorkload) {
	t.Helper()
	truth, err := engine.BuiltinProfile("t4-qwen2.5-1.5b-batching")
	if err != nil {
		t.Fatal(err)
	}
	truth.PrefillBaseS, truth.PrefillPerTokenS, truth.FrontendSPerRequest, truth.RequestOverheadS = 0, 0, 0.0005, 0.004
	truth.MaxNumSeqs = 64
	truth.DecodeStepS = [][2]float64{{1, 0.02}, {64, 0.05}} // linear: the fit's points interpolate it exactly
	return truth, predict.ClosedWorkload{Concurrencies: []int{1, 4, 8, 16}, Repeats: 2, Prompts: fitPrompts, MaxTokens: 32, TimeoutS: 60, IgnoreEOS: true}
}

func TestValidateTablesTheHeldOutLoads(t *testing.T) {
	truth, w := validateTruth(t)
	res := syntheticBundle(t, truth, w, "batching", []string{"vllm", "serve", "--max-num-seqs", "64"}, 1.06)
	v, err := Validate(res, ValidateOptions{Server: "batching", Engine: engine.Batching,
		FitOn:   []Load{{Mode: contract.ModeClosed, Concurrency: 1}, {Mode: contract.ModeClosed, Concurrency: 16}},
		HoldOut: []Load{{Mode: contract.ModeClosed, Concurrency: 8}, {Mode: contract.ModeClosed, Concurrency: 4}}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(v.FitOn, []int{1, 16}) || !slices.Equal(v.HoldOut, []int{4, 8}) || !slices.Equal(v.Workload.Concurrencies, []int{4, 8}) {
		t.Fatalf("fit on %v, hold out %v, workload %v", v.FitOn, v.HoldOut, v.Workload.Concurrencies)
	}
	if len(v.Rows) != 2*len(ValidateMetrics) {
		t.Fatalf("%d rows, want %d (one per metric and held-out load)", len(v.Rows), 2*len(ValidateMetrics))
	}
	for i, r := range v.Rows {
		if r.Source != SourcePredictor || r.Server != "batching" || r.Metric != ValidateMetrics[i%len(ValidateMetrics)] {
			t.Fatalf("row %d %+v", i, r)
		}
		if want := []string{"4 clients", "8 clients"}[i/len(ValidateMetrics)]; r.Load != want {
			t.Fatalf("row %d load %q, want %q", i, r.Load, want)
		}
		if r.Predicted == nil || r.Measured == nil || r.Error == nil || r.AbsError == nil {
			t.Fatalf("row %d %+v: a missing figure", i, r)
		}
		if !near(*r.Error, (*r.Predicted-*r.Measured) / *r.Measured, 1e-12) {
			t.Errorf("row %d error %g is not relative", i, *r.Error)
		}
		// The bundle is the truth's own prediction, re-tokenized 1.06 times:
		// counted in generated tokens, the fit reproduces goodput and TPOT.
		switch r.Metric {
		case "goodput_tok_s", "tpot_p50_s", "e2e_p50_s":
			if r.WithinGoal == nil || !*r.WithinGoal || math.Abs(*r.Error) > 0.03 {
				t.Errorf("%s %s: error %+.2f %%, want within 3 %% (the re-tokenization ratio must not leak in)", r.Load, r.Metric, 100**r.Error)
			}
		case "ttft_p50_s", "ttft_p95_s":
			if *r.Measured < SmallTTFTS && r.JudgedBy != "absolute" {
				t.Errorf("%s %s: measured %.3f s judged %s, want absolute", r.Load, r.Metric, *r.Measured, r.JudgedBy)
			}
			if r.WithinGoal != nil {
				t.Errorf("%s: TTFT is not a goal metric", r.Metric)
			}
		}
	}

	// The rows as JSON: the fields the table promises.
	data, err := json.Marshal(v.Rows[0])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"source", "server", "load", "metric", "predicted", "measured", "error", "abs_error", "judged_by", "within_goal"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON row %s lacks %q", data, k)
		}
	}
	if m["source"] != "predictor" || m["metric"] != "goodput_tok_s" || m["load"] != "4 clients" {
		t.Errorf("JSON row %s", data)
	}

	// A live run of the same plan: the predictor's own records stand for
	// it here (the CLI's test runs the simulator); they give the same rows.
	pr, err := predict.Closed(v.Fit.Profile, v.Workload, predict.Options{Server: "live"})
	if err != nil {
		t.Fatal(err)
	}
	// As a simulator at time scale 4 would run it: a quarter of the time,
	// read back in simulated time.
	fastW, fastR := SlowedDown(pr.Waves, pr.Records, 0.25)
	if err := v.AddLive(fastW, fastR, "live", 4); err != nil {
		t.Fatal(err)
	}
	n := len(ValidateMetrics) * 2
	if len(v.Rows) != 2*n {
		t.Fatalf("%d rows after the live ones, want %d", len(v.Rows), 2*n)
	}
	for i, r := range v.Rows[n:] {
		p := v.Rows[i]
		if r.Source != SourceLive || r.Server != "batching" || r.Load != p.Load || r.Metric != p.Metric || !near(*r.Predicted, *p.Predicted, 1e-9) {
			t.Errorf("live row %+v against the predictor's %+v", r, p)
		}
	}
	if err := v.AddLive(pr.Waves, pr.Records, "other", 1); err == nil {
		t.Error("a live run without the server's waves was accepted")
	}
}

func TestValidateRefusesWhatItCannotFit(t *testing.T) {
	truth, w := validateTruth(t)
	res := syntheticBundle(t, truth, w, "batching", nil, 1)
	c := func(n int) Load { return Load{Mode: contract.ModeClosed, Concurrency: n} }
	for _, tc := range []struct {
		name      string
		fit, hold []Load
		want      string
	}{
		{"ramp", []Load{c(1)}, []Load{{Mode: contract.ModeOpen, Shape: LoadRamp}}, "--hold-out ramp: server batching of the bundle has no recorded open-loop ramp-up wave"},
		{"rate", []Load{c(1)}, []Load{{Mode: contract.ModeOpen, RateRPS: 2}}, "--hold-out 2rps: server batching of the bundle has no recorded open-loop wave at 2 req/s (have: 1, 4, 8, 16)"},
		{"no sustained", []Load{c(1)}, []Load{{Mode: contract.ModeSustained}}, "--hold-out sustained: server batching of the bundle has no recorded sustained wave"},
		{"sustained", []Load{{Mode: contract.ModeSustained}}, []Load{c(8)}, "--fit-on sustained: server batching of the bundle has no recorded sustained wave"},
		{"fit on a rate", []Load{{Mode: contract.ModeOpen, RateRPS: 2}}, []Load{c(8)}, "--fit-on 2rps: server batching of the bundle has no recorded open-loop wave at 2 req/s"},
		{"overlap", []Load{c(1), c(8)}, []Load{c(8)}, "8 clients is both fitted on and held out"},
		{"whole mode both ways", []Load{{Mode: contract.ModeClosed}}, []Load{c(4)}, "4 clients is both fitted on and held out"},
		{"absent", []Load{c(1)}, []Load{c(32)}, "no recorded closed-loop wave at 32 clients (have: 1, 4, 8, 16)"},
		{"none", nil, []Load{c(4)}, "--fit-on names no load"},
	} {
		_, err := Validate(res, ValidateOptions{Server: "batching", Engine: engine.Batching, FitOn: tc.fit, HoldOut: tc.hold})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
