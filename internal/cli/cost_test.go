package cli

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
)

// capacity --gpu-hour-cost prices the answer: results.json keeps the price
// as provenance.cost and the cost per million output tokens at max_pass in
// its cost block, the sentence and README.md give it, and verify passes.
func TestCapacityCostAgainstTheSimulator(t *testing.T) {
	url, _, _ := startSim(t, "--engine", "batching", "--time-scale", "1000", "--seed", "5")
	dir := filepath.Join(t.TempDir(), "cap")
	code, out, errs := runMain(context.Background(), "capacity", "--base-url", url, "--tokenizer", "usage", "--max-tokens", "8",
		"--slo", "e2el<=60s", "--min-requests", "10", "--max-concurrency", "4", "--repeats", "0",
		"--gpu-hour-cost", "3.6", "--gpus", "2", "-o", dir)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	res, err := bundle.ReadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	if p := res.Provenance.Cost; p == nil || p.GPUHourUSD != 3.6 || p.GPUs != 2 {
		t.Fatalf("provenance.cost %+v", p)
	}
	if len(res.Capacity) != 1 || res.Cost == nil || len(res.Cost.Capacity) != 1 {
		t.Fatalf("capacity %+v, cost %+v", res.Capacity, res.Cost)
	}
	c, e := res.Capacity[0], res.Cost.Capacity[0]
	if c.MaxPass == nil || c.GoodputTokS == nil || e.USDPerMillionOutputTokens == nil {
		t.Fatalf("a 60 s end-to-end objective should pass: capacity %+v, cost %+v", c, e)
	}
	want := 3.6 * 2 / (*c.GoodputTokS * 3600) * 1e6
	if got := *e.USDPerMillionOutputTokens; math.Abs(got-want) > 1e-9*want {
		t.Errorf("$%v per million output tokens, want %v", got, want)
	}
	if !strings.Contains(out, "At $3.60 per GPU-hour × 2 GPUs, that is $") {
		t.Errorf("summary lacks the cost at the answer:\n%s", out)
	}
	readme, err := os.ReadFile(filepath.Join(dir, bundle.ReadmeFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"per million output tokens (of good requests", "## Cost", "![Capacity search: attainment against clients](capacity.svg)", "(capacity-latency.svg)"} {
		if !strings.Contains(string(readme), s) {
			t.Errorf("README.md lacks %q", s)
		}
	}
	if code, vout, verrs := runMain(context.Background(), "verify", dir); code != 0 {
		t.Errorf("verify: exit %d\n%s\n%s", code, vout, verrs)
	}
}

// bench --gpu-hour-cost prices every aggregate at its median goodput.
func TestBenchCost(t *testing.T) {
	url, _, _ := startSim(t, "--engine", "batching", "--time-scale", "1000", "--seed", "5")
	dir := filepath.Join(t.TempDir(), "b")
	code, out, errs := runMain(context.Background(), "bench", "--base-url", url, "--tokenizer", "usage", "--max-tokens", "8",
		"--concurrency", "1,2", "--repeats", "1", "--gpu-hour-cost", "2", "-o", dir)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	res, err := bundle.ReadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	if res.Cost == nil || len(res.Cost.Aggregates) != 2 || len(res.Cost.Capacity) != 0 {
		t.Fatalf("cost %+v", res.Cost)
	}
	for i, a := range res.Aggregates {
		e := res.Cost.Aggregates[i]
		if e.USDPerMillionOutputTokens == nil || a.Goodput.Median == nil {
			t.Fatalf("%s: no cost", e.Load)
		}
		if want := 2 / (*a.Goodput.Median * 3600) * 1e6; math.Abs(*e.USDPerMillionOutputTokens-want) > 1e-9*want {
			t.Errorf("%s: $%v, want %v", e.Load, *e.USDPerMillionOutputTokens, want)
		}
	}
	if !strings.Contains(out, "Cost per million output tokens at $2.00 per GPU-hour × 1 GPU (median goodput):") || !strings.Contains(out, "$/M tok") {
		t.Errorf("summary lacks the cost table:\n%s", out)
	}
	readme, _ := os.ReadFile(filepath.Join(dir, bundle.ReadmeFile))
	if !strings.Contains(string(readme), "Priced at $2.00 per GPU-hour × 1 GPU") {
		t.Errorf("README.md lacks the cost section")
	}
	if code, vout, verrs := runMain(context.Background(), "verify", dir); code != 0 {
		t.Errorf("verify: exit %d\n%s\n%s", code, vout, verrs)
	}
}

func TestCostFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "--base-url", "http://127.0.0.1:9", "--gpu-hour-cost", "-1"}, "--gpu-hour-cost -1: want a positive number of US dollars per GPU-hour"},
		{[]string{"bench", "--base-url", "http://127.0.0.1:9", "--gpu-hour-cost", "0"}, "--gpu-hour-cost 0: want a positive number"},
		{[]string{"bench", "--base-url", "http://127.0.0.1:9,http://127.0.0.1:10", "--gpus", "3"}, "--gpus 3 over 2 endpoints: give a multiple of 2"},
		{[]string{"bench", "--base-url", "http://127.0.0.1:9", "--base-url", "http://127.0.0.1:9/"}, `--base-url: "http://127.0.0.1:9" is given twice`},
		{[]string{"bench", "--base-url", "http://127.0.0.1:9", "--base-url", "ftp://x"}, `--base-url: "ftp://x" is not an http(s) URL`},
		{[]string{"bench", "--base-url", "http://127.0.0.1:9", "--balance", "round-robin"}, "--balance round-robin: give several --base-url"},
		{[]string{"bench", "--base-url", "http://127.0.0.1:9,http://127.0.0.1:10", "--balance", "random"}, `--balance: "random": want round-robin or least-outstanding`},
		{[]string{"bench", "--host", "127.0.0.1", "--port", "9", "--base-url", "http://127.0.0.1:10"}, "--base-url and --host/--port: give one"},
		{[]string{"capacity", "--base-url", "http://127.0.0.1:9", "--slo", "ttft<=1s", "--gpu-hour-cost", "3", "--gpus", "0"}, "--gpus 0: want at least 1"},
		{[]string{"capacity", "--base-url", "http://127.0.0.1:9", "--slo", "ttft<=1s", "--gpu-hour-cost", "NaN"}, "--gpu-hour-cost NaN"},
	} {
		code, _, errs := runMain(context.Background(), c.args...)
		if code != 2 || !strings.Contains(errs, c.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q, want 2 and one line with %q", c.args, code, errs, c.want)
		}
	}
}
