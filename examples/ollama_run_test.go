package examples_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/tokenizer"
)

// ollamaVersion is the ollama scripts/install-ollama.sh builds.
const ollamaVersion = "v0.24.0"

// skipOrFail skips with msg, or fails where REHEARSE_REQUIRE_OLLAMA=1 (CI).
func skipOrFail(t *testing.T, msg string) {
	t.Helper()
	if os.Getenv("REHEARSE_REQUIRE_OLLAMA") == "1" {
		t.Fatal(msg + " (REHEARSE_REQUIRE_OLLAMA=1 makes this a failure)")
	}
	t.Skip(msg)
}

// ollamaBin is the folder of the ollama binary install-ollama.sh builds.
func ollamaBin(t *testing.T) string {
	t.Helper()
	cache := os.Getenv("REHEARSE_CACHE")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			skipOrFail(t, "no home folder to find ollama's cache in: "+err.Error())
		}
		cache = filepath.Join(home, ".cache", "rehearse")
	}
	bin := filepath.Join(cache, "ollama-"+ollamaVersion, "bin")
	if _, err := os.Stat(filepath.Join(bin, "ollama")); err != nil {
		skipOrFail(t, "ollama is not installed at "+bin+"; bash scripts/install-ollama.sh builds it (4-6 minutes on 2 cores)")
	}
	return bin
}

// ollamaSmall is ollama.yaml at a CI's size: its closed waves at 1 and 4
// clients, one repeat, 16 tokens, batching 4 sequences, and its mechanism
// check (on the client's records, 4 clients); no capacity search (its
// probes take minutes on 2 cores).
func ollamaSmall(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile("ollama.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	for old, new := range map[string]string{
		"concurrencies: [1, 2, 4, 8]": "concurrencies: [1, 4]",
		"repeats: 3":                  "repeats: 1",
		"max_tokens: 32":              "max_tokens: 16",
		`OLLAMA_NUM_PARALLEL: "8"`:    `OLLAMA_NUM_PARALLEL: "4"`,
	} {
		if strings.Count(text, old) != 1 {
			t.Fatalf("ollama.yaml no longer holds %q once", old)
		}
		text = strings.Replace(text, old, new, 1)
	}
	start, end := strings.Index(text, "\nslo:"), strings.Index(text, "\ntokenizer:")
	if start < 0 || end < start || !strings.Contains(text[start:end], "\ncapacity:") {
		t.Fatal("ollama.yaml no longer holds its slo: and capacity: before tokenizer:")
	}
	return []byte(text[:start] + text[end:])
}

// TestOllamaRehearsalEndToEnd rehearses a real engine rehearse did not
// write: examples/ollama.yaml at a small size, through the rehearse binary
// (`run`, then `verify`). ollama serves a model rehearse writes; every
// record must succeed, run to max_tokens, and re-tokenize to exactly the
// server's usage.completion_tokens.
func TestOllamaRehearsalEndToEnd(t *testing.T) {
	if raceEnabled {
		t.Skip("the end-to-end ollama rehearsal runs without the race detector, after the race suite (scripts/test.sh)")
	}
	bin := ollamaBin(t)
	start := time.Now()
	dir := t.TempDir()
	exe := filepath.Join(dir, "rehearse")
	if out, err := exec.Command("go", "build", "-o", exe, "github.com/rehearse/rehearse/cmd/rehearse").CombinedOutput(); err != nil {
		t.Fatalf("building rehearse: %v\n%s", err, out)
	}
	if err := os.MkdirAll(filepath.Join(dir, "ollama"), 0o755); err != nil {
		t.Fatal(err)
	}
	modelfile, err := os.ReadFile(filepath.Join("ollama", "Modelfile"))
	if err != nil {
		t.Fatal(err)
	}
	must(t, os.WriteFile(filepath.Join(dir, "ollama", "Modelfile"), modelfile, 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "ollama.yaml"), ollamaSmall(t), 0o644))
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	bundleDir := filepath.Join(dir, "bundle")
	built := time.Since(start)
	out, err := exec.CommandContext(ctx, exe, "run", "-f", filepath.Join(dir, "ollama.yaml"), "-o", bundleDir).CombinedOutput()
	t.Logf("rehearse run (%.1f s):\n%s", time.Since(start).Seconds()-built.Seconds(), out)
	if err != nil {
		t.Fatalf("rehearse run: %v", err)
	}
	if out, err := exec.CommandContext(ctx, exe, "verify", bundleDir).CombinedOutput(); err != nil {
		t.Fatalf("rehearse verify: %v\n%s", err, out)
	}
	res, err := bundle.ReadResults(bundleDir)
	if err != nil {
		t.Fatal(err)
	}
	checkExact(t, res)
	checkServers(t, res, bundleDir)
	checkMechanism(t, res)
	t.Logf("end to end in %.1f s (building rehearse %.1f s)", time.Since(start).Seconds(), built.Seconds())
}

// checkMechanism: ollama has no /metrics, so the mechanism check read no
// metric and rests on the client's records of its 4-client wave on the
// batching server, which streamed several requests at once.
func checkMechanism(t *testing.T, res *bundle.Results) {
	t.Helper()
	m := res.MechanismCheck
	if m == nil || m.Server != "batching" || m.Concurrency != 4 || !m.RestsOnClient() || m.Metric != "" || m.Max != nil || m.Client == nil {
		t.Fatalf("mechanism check: %+v", m)
	}
	if m.Client.InFlightMax != 4 || m.Client.StreamingMax < 2 {
		t.Errorf("batching 4 sequences at 4 clients: %d in flight, %d streaming at once", m.Client.InFlightMax, m.Client.StreamingMax)
	}
	t.Logf("mechanism check: %s", m.Finding())
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// checkExact: every recorded request succeeded with max_tokens tokens, and
// its text re-counted here equals the server's usage and output_tokens.
func checkExact(t *testing.T, res *bundle.Results) {
	t.Helper()
	tok, err := tokenizer.Default()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, rec := range res.Records {
		if rec.Kind != contract.KindRecorded {
			continue
		}
		n++
		if !rec.OK || rec.UsageCompletionTokens == nil {
			t.Errorf("%s %d clients: ok %v (%s: %s), usage %v", rec.Server, rec.Concurrency, rec.OK, rec.ErrorKind, rec.Error, rec.UsageCompletionTokens)
			continue
		}
		usage, recount := *rec.UsageCompletionTokens, tok.Count(rec.Text)
		if recount != usage || rec.OutputTokens != usage || usage != rec.MaxTokens {
			t.Errorf("%s %d clients: re-counted %d, output_tokens %d, usage %d, max_tokens %d; text %q",
				rec.Server, rec.Concurrency, recount, rec.OutputTokens, usage, rec.MaxTokens, rec.Text)
		}
	}
	if want := 2 * (1 + 4); n != want { // the mechanism check's records are not recorded
		t.Errorf("%d recorded requests; want %d", n, want)
	}
	var table strings.Builder
	for _, a := range res.Aggregates {
		fmt.Fprintf(&table, "\n  %-9s %d clients: goodput %s tok/s, p95 TTFT %s s", a.Server, a.Concurrency, number(a.Goodput.Median, 1), number(a.TTFT.P95, 3))
	}
	t.Logf("%d records, every one re-counted to its usage.completion_tokens:%s", n, table.String())
}

func number(v *float64, digits int) string {
	if v == nil {
		return "—"
	}
	return fmt.Sprintf("%.*f", digits, *v)
}

// checkServers: both servers stopped by rehearse, each prepared (the
// model written and created) and its scratch folder gone.
func checkServers(t *testing.T, res *bundle.Results, dir string) {
	t.Helper()
	scratchRE := regexp.MustCompile(`prepare: running \S*cp \S+ (\S+)/Modelfile`)
	for _, s := range res.Servers {
		if !strings.HasPrefix(s.Exit, "stopped by rehearse") || len(s.Prepare) != 3 {
			t.Errorf("%s: exit %q, prepare %q", s.Name, s.Exit, s.Prepare)
		}
		log, err := os.ReadFile(filepath.Join(dir, s.Log))
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Count(string(log), "exited with status 0 after"); got != 3 {
			t.Errorf("%s.log: %d prepare commands exited 0; want 3", s.Name, got)
		}
		m := scratchRE.FindSubmatch(log)
		if m == nil {
			t.Errorf("%s.log names no scratch folder", s.Name)
			continue
		}
		if _, err := os.Stat(string(m[1])); !os.IsNotExist(err) {
			t.Errorf("%s: its scratch folder %s is still there (%v)", s.Name, m[1], err)
		}
	}
}
