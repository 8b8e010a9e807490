package cli

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/sim"
	"github.com/rehearse/rehearse/internal/sim/engine"
)

// TestBenchWarnsOfRecountsThatDifferFromUsage pins what a user sees when
// the re-counted output tokens and the server's usage differ (SPEC §2):
// one warning line for the server on the terminal, with the count and the
// largest difference; the same in the bundle (each aggregate's
// usage_disagreement) and its README; and the bundle verifies.
func TestBenchWarnsOfRecountsThatDifferFromUsage(t *testing.T) {
	// Each reply is "w0 w1 w2 w3 ": 9 tokens for Qwen's tokenizer, 4 by
	// the server's usage.
	srv, _ := benchServer(t, 4, 0)
	dir := filepath.Join(t.TempDir(), "b")
	code, out, errs := runMain(context.Background(), "bench", "--base-url", srv.URL, "--name", "local", "--model", "test-model",
		"--concurrency", "1,2", "--repeats", "1", "--max-tokens", "4", "--tokenizer", "qwen3", "-o", dir)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	want := "rehearse: warning: local: 3 of 3 records' re-counted output tokens differ from the server's usage.completion_tokens (largest difference +5 tokens, re-count minus usage)"
	if n := strings.Count(errs, "rehearse: warning: local: "); n != 1 || !strings.Contains(errs, want) {
		t.Errorf("stderr has %d warning lines for the server, want one with %q:\n%s", n, want, errs)
	}
	res, err := bundle.ReadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range res.Aggregates {
		if u := a.UsageDisagreement; u == nil || *u != (contract.UsageDisagreement{Compared: a.Concurrency, Count: a.Concurrency, LargestDiff: 5}) {
			t.Errorf("%s: usage_disagreement %+v, want every record 5 tokens over", a.LoadLabel(), u)
		}
	}
	readme, _ := os.ReadFile(filepath.Join(dir, bundle.ReadmeFile))
	if !strings.Contains(string(readme), "- `local`: 3 of 3 records' re-counted output tokens differ") {
		t.Errorf("README.md does not warn of the disagreement:\n%s", readme)
	}
	if code, out, errs := runMain(context.Background(), "verify", dir); code != 0 {
		t.Fatalf("verify: exit %d\n%s%s", code, out, errs)
	}
}

// TestBenchAgainstTheSimulatorRecountsExactly: the simulator's words are
// one token each, so its usage and the re-count agree on every record; the
// bundle says so and the terminal warns of nothing.
func TestBenchAgainstTheSimulatorRecountsExactly(t *testing.T) {
	s, err := sim.New(sim.Options{Engine: engine.Batching, TimeScale: 1000, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	dir := filepath.Join(t.TempDir(), "b")
	code, out, errs := runMain(context.Background(), "bench", "--base-url", srv.URL, "--name", "sim",
		"--concurrency", "2", "--repeats", "2", "--max-tokens", "8", "--tokenizer", "qwen3", "-o", dir)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	if strings.Contains(errs, "warning") {
		t.Errorf("a warning though usage and re-count agree:\n%s", errs)
	}
	res, err := bundle.ReadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	if u := res.Aggregates[0].UsageDisagreement; u == nil || *u != (contract.UsageDisagreement{Compared: 4}) {
		t.Errorf("usage_disagreement %+v, want 4 records compared, none differing", u)
	}
	readme, _ := os.ReadFile(filepath.Join(dir, bundle.ReadmeFile))
	if !strings.Contains(string(readme), "`sim` equal on all 4 records that carry usage") {
		t.Errorf("README.md does not say the re-counts agree")
	}
}
