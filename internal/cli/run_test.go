package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle/bundletest"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/report"
)

func TestRunBadRehearsalFileListsEveryProblem(t *testing.T) {
	file := filepath.Join(t.TempDir(), "bad.yaml")
	bad := `
servers:
  - name: naive
    launch: []
  - name: naive
    base_url: localhost:8000
workload:
  concurrencies: [0, 8]
  max_tokens: -1
baseline: vllm
`
	if err := os.WriteFile(file, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := run(t, "run", "-f", file, "-o", filepath.Join(t.TempDir(), "out"))
	if code != 2 {
		t.Fatalf("exit %d, want 2; stderr:\n%s", code, stderr)
	}
	for _, want := range []string{
		file + ": ",
		"servers[0].launch: empty",
		`servers[1].name: "naive" already names servers[0]`,
		`servers[1].base_url: "localhost:8000" is not an http(s) URL`,
		"workload.concurrencies[0]: 0: must be at least 1",
		"workload.max_tokens: -1: must be at least 1",
		`baseline: "vllm" names no server`,
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if stdout != "" {
		t.Errorf("stdout: %q", stdout)
	}
}

func TestRunAndDemoFlags(t *testing.T) {
	if code, _, stderr := run(t, "run"); code != 2 || !strings.Contains(stderr, "-f REHEARSAL.yaml is required") {
		t.Errorf("run without -f: %d %s", code, stderr)
	}
	if code, _, stderr := run(t, "run", "-f", filepath.Join(t.TempDir(), "none.yaml")); code != 2 || !strings.Contains(stderr, "none.yaml: no such rehearsal file") {
		t.Errorf("run of a missing file: %d %s", code, stderr)
	}
	if code, _, stderr := run(t, "demo", "--time-scale", "0"); code != 2 || !strings.Contains(stderr, "--time-scale 0: want a positive number") {
		t.Errorf("demo --time-scale 0: %d %s", code, stderr)
	}
}

func TestResultsTableIsTheSeeds(t *testing.T) {
	res := bundletest.SeedLike()
	var b bytes.Buffer
	report.ResultsTable(res).Text(&b)
	out := b.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 1+len(res.Workload.Concurrencies) {
		t.Fatalf("want a header and one row per concurrency:\n%s", out)
	}
	for _, h := range []string{"clients", "naive tok/s", "batching tok/s", "batching speed-up", "naive p95 TTFT", "batching failures"} {
		if !strings.Contains(lines[0], h) {
			t.Errorf("header lacks %q: %s", h, lines[0])
		}
	}
	for _, a := range res.Aggregates {
		if !strings.Contains(out, report.Goodput(a.Goodput)) || !strings.Contains(out, report.FailureCount(a.Failures)) {
			t.Errorf("%s at %d: %s or %s missing:\n%s", a.Server, a.Concurrency, report.Goodput(a.Goodput), report.FailureCount(a.Failures), out)
		}
	}
}

// A server that exits at start: exit status 1, and the closing summary names
// the server once and points at the log lines printed above it.
func TestRunServerThatExitsAtStart(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "r.yaml")
	cfg := `model: {id: Qwen/Qwen2.5-1.5B-Instruct}
servers:
  - name: boom
    launch: [sh, -c, "echo no GPU found on port $0 >&2; exit 3", "{port}"]
    ready: {timeout: 20s}
workload: {concurrencies: [1], repeats: 1, max_tokens: 8}
`
	if err := os.WriteFile(file, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := run(t, "run", "-f", file, "-o", filepath.Join(dir, "out"))
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", code, stderr)
	}
	for _, want := range []string{
		"no GPU found",
		"1 server(s) failed:\n  boom: not ready: the process exited with status 3 during GET /health; last lines of " + filepath.Join(dir, "out", "boom.log") + " (shown above)",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "boom: boom:") {
		t.Errorf("the server is named twice:\n%s", stderr)
	}
}

// TestResultsTableHasOpenLoopRows: a rehearsal with only open-loop waves
// still prints its results, one row per request rate.
func TestResultsTableHasOpenLoopRows(t *testing.T) {
	res := bundletest.SeedLike()
	var open []contract.Aggregate
	for _, a := range res.Aggregates {
		a.Mode, a.RequestRateRPS, a.Concurrency = contract.ModeOpen, float64(a.Concurrency)/2, 0
		open = append(open, a)
	}
	res.Aggregates = open
	var b bytes.Buffer
	report.ResultsTable(res).Text(&b)
	out := b.String()
	if strings.Contains(out, "No recorded waves") {
		t.Fatalf("open-loop waves finished, yet:\n%s", out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 1+len(res.Workload.Concurrencies) || !strings.Contains(lines[0], "req/s") || strings.Contains(lines[0], "speed-up") {
		t.Fatalf("want a req/s header and one row per rate:\n%s", out)
	}
	if !strings.HasPrefix(strings.TrimSpace(lines[1]), "0.5 ") {
		t.Errorf("first row is not the lowest rate:\n%s", out)
	}
	for _, a := range res.Aggregates {
		if !strings.Contains(out, report.Goodput(a.Goodput)) || !strings.Contains(out, report.Seconds(a.TTFT.P95)) {
			t.Errorf("%s at %v req/s missing:\n%s", a.Server, a.RequestRateRPS, out)
		}
	}
}
