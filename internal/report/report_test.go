package report

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/golden"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/bundle/bundletest"
	"github.com/rehearse/rehearse/internal/contract"
)

func TestMarkdownGolden(t *testing.T) {
	res := bundletest.WithInputTokens(bundletest.SeedLike())
	digests := []bundle.Digest{
		{File: "batching.log", SHA256: strings.Repeat("b", 64)},
		{File: "naive.log", SHA256: strings.Repeat("a", 64)},
		{File: "results.json", SHA256: strings.Repeat("c", 64)},
	}
	figs := []FigureRef{{File: "goodput.svg", Title: "Goodput against clients", Caption: "Median with min–max range."}}
	golden.Check(t, "seedlike.README.md", Markdown(res, figs, digests))
}

func TestMarkdownSimulatedAndOpenLoop(t *testing.T) {
	res := bundletest.SeedLike()
	res.Provenance.Simulation = &bundle.Simulation{TimeScale: 10, Profiles: map[string]string{"naive": "t4-serial", "batching": "t4-batching"}}
	res.Provenance.Model.RandomWeights = true
	res.Workload.Open = &bundle.OpenLoop{RequestRatesRPS: []float64{2.5}, Arrival: "gamma", Burstiness: 0.5, Seed: 42, NumRequests: 3}
	id := len(res.Waves)
	res.Waves = append(res.Waves, contract.Wave{ID: id, Server: "batching", Kind: contract.KindRecorded, Mode: contract.ModeOpen, RequestRateRPS: 2.5})
	one := 0.3
	for i := 0; i < 3; i++ {
		res.Records = append(res.Records, contract.Record{Kind: contract.KindRecorded, Server: "batching", Wave: id,
			IntendedStartS: 0.4 * float64(i), StartS: 0.4*float64(i) + 0.002, FirstContentS: &one, EndS: 2, OutputTokens: 10, OK: true})
	}
	bundle.FixWaveTimes(res)
	res.Recompute()
	md := string(Markdown(res, nil, nil))
	for _, want := range []string{
		"**Simulated servers.** No figure below is a GPU measurement",
		"time scale 10",
		"`t4-serial` (naive)",
		"**Random weights.**",
		"## Open-loop arrivals",
		"| batching | 2.5 |",
		"gamma schedule (burstiness 0.5), seed 42, 3 requests",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

func TestFormats(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	goodput, _ := contract.MetricNamed("goodput")
	ttft, _ := contract.MetricNamed("ttft_p95")
	failures, _ := contract.MetricNamed("failure_rate")
	tests := []struct{ got, want string }{
		{Goodput(contract.Spread{Median: f(19.7), Min: f(10.2), Max: f(20.2)}), "19.7 [10.2–20.2]"},
		{Goodput(contract.Spread{}), "—"},
		{Speedup(f(48.55)), "48.5×"},
		{Speedup(f(81.1)), "81.1×"},
		{Speedup(nil), "—"},
		{Seconds(f(0.2249)), "0.225 s"},
		{Seconds(nil), "—"},
		{FailureCount(contract.Failures{Count: 54, Total: 96}), "54/96 (56.3%)"},
		{FailureCount(contract.Failures{Count: 0, Total: 3}), "0/3 (0%)"},
		{FailureCount(contract.Failures{Count: 154, Total: 192}), "154/192 (80.2%)"},
		{FailureCount(contract.Failures{Count: 5, Total: 5}), "5/5 (100%)"},
		{FailureCount(contract.Failures{Count: 1, Total: 20000}), "1/20000 (<0.1%)"},
		{FailureCount(contract.Failures{Count: 19999, Total: 20000}), "19999/20000 (>99.9%)"},
		{FailureCount(contract.Failures{Count: 1, Total: 1000}), "1/1000 (0.1%)"},
		{FailureCount(contract.Failures{Count: 999, Total: 1000}), "999/1000 (99.9%)"},
		{Goodput(contract.Spread{Median: f(1)}), "—"},
		{Argv([]string{"vllm", "serve", "a b", "it's"}), `vllm serve 'a b' 'it'\''s'`},
		{Ratio(f(0.8234)), "0.82×"},
		{Ratio(f(math.Inf(1))), "—"},
		{Ratio(nil), "—"},
		{Change(f(-0.1771)), "-17.7%"},
		{Change(f(0.013)), "+1.3%"},
		{Change(nil), "—"},
		{Value(goodput, 66.2), "66.2 tok/s"},
		{Value(ttft, 0.1564), "0.156 s"},
		{Value(failures, 0.052), "5.2%"},
		{Difference(goodput, -12), "-12.0 tok/s"},
		{Difference(ttft, 0.004), "+0.004 s"},
		{Difference(failures, 0.015), "+1.5 pp"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

func TestWriteBundle(t *testing.T) {
	dir := t.TempDir()
	res := bundletest.SeedLike()
	if err := bundle.WriteResults(dir, res); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "naive.log"), []byte("hello\n"), 0o644)
	if err := Write(dir, res); err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(dir, bundle.ReadmeFile))
	if err != nil {
		t.Fatal(err)
	}
	sum, _ := bundletest.HashFile(filepath.Join(dir, "naive.log"))
	if !strings.Contains(string(readme), "| `naive.log` | complete log of server `naive` | `"+sum+"` |") {
		t.Errorf("README's integrity table lacks naive.log's digest")
	}
	if probs := bundletest.Verify(dir); len(probs) != 0 {
		t.Fatalf("written bundle does not verify: %v", probs)
	}
}

func TestMarkdownNamesDroppedNonFiniteScrapes(t *testing.T) {
	res := bundletest.SeedLike()
	res.MechanismCheck.Errors = 2
	res.MechanismCheck.NonFinite = 3
	md := string(Markdown(res, nil, nil))
	if want := ", 2 failed scrapes, 3 non-finite values (NaN or ±Inf) left out)"; !strings.Contains(md, want) {
		t.Errorf("the mechanism check does not say %q", want)
	}
}

func TestWriteTwiceStillVerifies(t *testing.T) {
	// Write reuses the digests it listed in README.md for SHA256SUMS; a
	// second render must not reuse the first README's or report.html's.
	dir := t.TempDir()
	res := bundletest.SeedLike()
	if err := bundle.WriteResults(dir, res); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "naive.log"), []byte("hello\n"), 0o644)
	for i := range 2 {
		if err := Write(dir, res); err != nil {
			t.Fatal(err)
		}
		if probs := bundletest.Verify(dir); len(probs) != 0 {
			t.Fatalf("render %d: %v", i+1, probs)
		}
		res.Notes = append(res.Notes, "changed between renders")
	}
}
