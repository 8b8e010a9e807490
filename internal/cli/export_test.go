package cli

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/bundle/bundletest"
)

func TestExportCommand(t *testing.T) {
	res := bundletest.SeedLike()
	dir := seedBundle(t, res)
	code, out, errs := run(t, "export", dir, "--format", "csv")
	if code != 0 {
		t.Fatalf("export csv: %d %s", code, errs)
	}
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || len(rows) != len(res.Records)+1 {
		t.Fatalf("csv: %d rows for %d records (%v)", len(rows), len(res.Records), err)
	}
	file := filepath.Join(t.TempDir(), "r.json")
	// Several loads are one file each, as vLLM writes one run per file:
	// into one file only with --append-result.
	if code, _, errs := run(t, "export", dir, "--format", "vllm", "-o", file); code != 2 || !strings.Contains(errs, "give -o a folder") {
		t.Fatalf("export vllm -o FILE of %d loads: %d %s", len(res.Aggregates), code, errs)
	}
	if code, _, errs := run(t, "export", dir, "--format", "vllm", "--save-detailed", "--metric-percentiles", "50,90", "--append-result", "-o", file); code != 0 || !strings.Contains(errs, "wrote "+file) {
		t.Fatalf("export vllm -o: %d %s", code, errs)
	}
	data, _ := os.ReadFile(file)
	lines := bytes.Split(data, []byte("\n"))
	if len(lines) != len(res.Aggregates) || bytes.HasSuffix(data, []byte("\n")) {
		t.Fatalf("%d vllm objects for %d loads", len(lines), len(res.Aggregates))
	}
	folder := filepath.Join(t.TempDir(), "results")
	if code, _, errs := run(t, "export", dir, "--format", "vllm", "-o", folder); code != 0 {
		t.Fatalf("export vllm -o DIR: %d %s", code, errs)
	}
	names, _ := filepath.Glob(filepath.Join(folder, "*-infqps-concurrency*-*.json"))
	if len(names) != len(res.Aggregates) {
		entries, _ := os.ReadDir(folder)
		t.Fatalf("%d files under vLLM's names for %d loads: %v", len(names), len(res.Aggregates), entries)
	}
	var first map[string]any
	if err := json.Unmarshal(lines[0], &first); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"p50_ttft_ms", "p90_e2el_ms", "ttfts", "generated_texts"} {
		if _, ok := first[k]; !ok {
			t.Errorf("vllm object lacks %s", k)
		}
	}
	if code, out, _ := run(t, "verify", dir); code != 0 {
		t.Fatalf("the bundle no longer verifies after export: %s", out)
	}
}

func TestExportRefusals(t *testing.T) {
	dir := seedBundle(t, bundletest.SeedLike())
	tampered := seedBundle(t, bundletest.SeedLike())
	res, _ := bundle.ReadResults(tampered)
	res.Records[0].OutputTokens += 7
	bundle.WriteResults(tampered, res)
	bundle.WriteSumsKnown(tampered, nil)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"export", dir}, 2, "--format is required"},
		{[]string{"export", dir, "--format", "parquet"}, 2, `--format: "parquet" is not a format (csv, jsonl, llmd-br, vllm)`},
		{[]string{"export", dir, "--format", "vllm", "--metric-percentiles", "101"}, 2, "--metric-percentiles"},
		{[]string{"export", dir, "--format", "vllm", "--percentile-metrics", "ttft,goodput"}, 2, `metric "goodput"`},
		{[]string{"export", dir, "--format", "csv", "-o", filepath.Join(dir, "x.csv")}, 2, "inside the bundle"},
		{[]string{"export", filepath.Join(t.TempDir(), "nope"), "--format", "csv"}, 2, "no such bundle directory"},
		{[]string{"export", tampered, "--format", "vllm"}, 1, "export refused: " + tampered + " does not verify"},
	} {
		code, out, errs := run(t, tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.want) || out != "" {
			t.Errorf("%v: exit %d (want %d), stdout %q, stderr %q (want %q)", tc.args, code, tc.code, out, errs, tc.want)
		}
		if tc.code == 1 && strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("%v: refusal is not one line: %q", tc.args, errs)
		}
	}
}

func TestBenchSaveResult(t *testing.T) {
	srv, _ := benchServer(t, 4, time.Millisecond)
	parent := t.TempDir()
	dir := filepath.Join(parent, "b")
	code, out, errs := runMain(context.Background(), "bench", "--base-url", srv.URL, "--tokenizer", "usage",
		"--request-rate", "inf", "--max-concurrency", "2", "--num-requests", "6", "--warmup-requests", "0", "--repeats", "1",
		"--max-tokens", "4", "--save-result", "-o", dir)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	matches, _ := filepath.Glob(filepath.Join(parent, "openai-chat-infqps-concurrency2-test-model-*.json"))
	if len(matches) != 1 || !strings.Contains(out, matches[0]) {
		t.Fatalf("result files %v beside the bundle; output:\n%s", matches, out)
	}
	data, _ := os.ReadFile(matches[0])
	var obj map[string]any
	if err := json.Unmarshal(data, &obj); err != nil {
		t.Fatal(err)
	}
	if obj["completed"] != 6.0 || obj["request_rate"] != "inf" || obj["max_concurrency"] != 2.0 || obj["total_output_tokens"] != 24.0 || obj["model_id"] != "test-model" {
		t.Fatalf("result %v", obj)
	}
	if _, ok := obj["ttfts"]; ok {
		t.Errorf("per-request arrays without --save-detailed")
	}
	// --result-dir and --result-filename, as vLLM's.
	rd := filepath.Join(t.TempDir(), "results")
	code, out, errs = runMain(context.Background(), "bench", "--base-url", srv.URL, "--tokenizer", "usage",
		"--concurrency", "1,2", "--repeats", "1", "--max-tokens", "4", "--save-result", "--save-detailed",
		"--result-dir", rd, "--result-filename", "mine.json", "--append-result", "-o", filepath.Join(t.TempDir(), "b2"))
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	data, err := os.ReadFile(filepath.Join(rd, "mine.json"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(data, []byte("\n")); n != 1 || !bytes.Contains(data, []byte(`"ttfts"`)) {
		t.Fatalf("mine.json: %d newlines (want the two loads' objects, one per line, as --append-result writes them), detailed %v", n, bytes.Contains(data, []byte(`"ttfts"`)))
	}
	code, _, errs = runMain(context.Background(), "bench", "--base-url", srv.URL, "--result-dir", rd)
	if code != 2 || !strings.Contains(errs, "--result-dir: only with --save-result") {
		t.Fatalf("--result-dir alone: exit %d %s", code, errs)
	}
}

// TestBenchSaveResultAgainstTheSimulator: an open-loop bench against the
// simulator, as vLLM's docs run vllm bench serve (a request rate, a
// dataset, --save-result --save-detailed), writes vLLM's file under
// vLLM's name with its per-request arrays, and export gives the same
// object from the bundle afterwards.
func TestBenchSaveResultAgainstTheSimulator(t *testing.T) {
	url, _, _ := startSim(t, "--engine", "batching", "--time-scale", "1000", "--seed", "5")
	parent := t.TempDir()
	dir := filepath.Join(parent, "b")
	code, out, errs := runMain(context.Background(), "bench", "--base-url", url, "--tokenizer", "usage",
		"--request-rate", "20", "--arrival", "poisson", "--seed", "1", "--num-requests", "10", "--repeats", "1",
		"--max-tokens", "8", "--progress", "never", "--save-result", "--save-detailed", "-o", dir)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	matches, _ := filepath.Glob(filepath.Join(parent, "openai-chat-20.0qps-*.json"))
	if len(matches) != 1 {
		t.Fatalf("result files %v; output:\n%s", matches, out)
	}
	saved, _ := os.ReadFile(matches[0])
	var obj map[string]any
	if err := json.Unmarshal(saved, &obj); err != nil {
		t.Fatal(err)
	}
	if obj["request_rate"] != 20.0 || obj["completed"].(float64)+obj["failed"].(float64) != 10 || obj["max_concurrency"] != nil {
		t.Fatalf("request_rate %v, completed %v, failed %v, max_concurrency %v", obj["request_rate"], obj["completed"], obj["failed"], obj["max_concurrency"])
	}
	for _, k := range []string{"input_lens", "output_lens", "ttfts", "itls", "start_times", "generated_texts", "errors", "p99_ttft_ms", "mean_itl_ms", "median_e2el_ms", "std_tpot_ms", "max_output_tokens_per_s"} {
		if _, ok := obj[k]; !ok {
			t.Errorf("saved result lacks %s", k)
		}
	}
	if n := len(obj["ttfts"].([]any)); n != 10 {
		t.Errorf("%d ttfts for 10 requests", n)
	}
	code, exported, errs := run(t, "export", dir, "--format", "vllm", "--save-detailed")
	if code != 0 || exported != string(saved)+"\n" {
		t.Fatalf("export after the run: exit %d %s\nexported %s\nsaved    %s", code, errs, exported, saved)
	}
}
