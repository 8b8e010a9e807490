package compare

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/bundle/bundletest"
	"github.com/rehearse/rehearse/internal/export"
	"github.com/rehearse/rehearse/internal/report"
)

// vllmRun is a result as vllm bench serve --save-result writes it
// (vllm/benchmarks/serve.py at 009e6d4a1cd6ba3fb2a9fc00f4ec06f5297232a1):
// --request-rate inf --max-concurrency 8 --num-prompts 8, default
// percentiles (p99 only).
const vllmRun = `{"date": "20261101-101500", "endpoint_type": "openai-chat", "backend": "openai-chat", "label": null, "model_id": "Qwen/Qwen2.5-1.5B-Instruct", "tokenizer_id": "Qwen/Qwen2.5-1.5B-Instruct", "num_prompts": 8, "request_rate": "inf", "burstiness": 1.0, "max_concurrency": 8, "duration": 2.5, "completed": 7, "failed": 1, "total_input_tokens": 700, "total_output_tokens": 896, "request_throughput": 2.8, "request_goodput": null, "output_throughput": 358.4, "total_token_throughput": 638.4, "latencies": [], "queue_times": [], "max_output_tokens_per_s": 400.0, "max_concurrent_requests": 8, "rtfx": 0.0, "mean_ttft_ms": 40.0, "median_ttft_ms": 38.0, "std_ttft_ms": 3.0, "p99_ttft_ms": 55.0, "mean_tpot_ms": 20.0, "median_tpot_ms": 19.5, "std_tpot_ms": 1.0, "p99_tpot_ms": 25.0, "mean_itl_ms": 20.0, "median_itl_ms": 19.0, "std_itl_ms": 2.0, "p99_itl_ms": 30.0}`

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCompareAgainstVLLMRun(t *testing.T) {
	bdir := t.TempDir()
	res := bundletest.SeedLike()
	if err := bundle.WriteResults(bdir, res); err != nil {
		t.Fatal(err)
	}
	for _, s := range res.Servers {
		os.WriteFile(filepath.Join(bdir, s.Log), []byte("log\n"), 0o644)
	}
	if err := report.Write(bdir, res); err != nil {
		t.Fatal(err)
	}
	vfile := writeFile(t, "openai-chat-infqps-concurrency8-Qwen2.5-1.5B-Instruct-20261101-101500.json", []byte(vllmRun))
	var out bytes.Buffer
	r, err := Run(context.Background(), Options{A: vfile, B: bdir, Gates: mustGates(t, "ttft_p99>+1000%", "ttft_p95>+10%")}, &out)
	if err != nil {
		t.Fatal(err)
	}
	// The vLLM run names no server: its 8-client load stands against
	// both servers' (inf with 8 prompts at concurrency 8 is one closed wave).
	if len(r.Rows) != 2 || r.Rows[0].Load != "8 clients" || r.Rows[1].Load != "8 clients" {
		t.Fatalf("rows %+v", r.Rows)
	}
	row := r.Rows[0]
	if *row.A.Goodput.Median != 358.4 || *row.A.TTFT.P99 != 0.055 || row.A.TTFT.P95 != nil || row.A.Failures.Count != 1 || row.A.Failures.Total != 8 {
		t.Fatalf("vLLM side %+v", row.A)
	}
	text := out.String()
	for _, want := range []string{"358.4 [358.4–358.4]", "—", "A is a vLLM result JSON", "only in B: naive at 1 client"} {
		if !strings.Contains(text, want) {
			t.Errorf("comparison lacks %q:\n%s", want, text)
		}
	}
	if g := r.Gates[0]; g.Evaluated != 2 {
		t.Errorf("ttft_p99 gate evaluated on %d rows, want 2: %+v", g.Evaluated, g)
	}
	if g := r.Gates[1]; g.Evaluated != 0 || len(g.Skipped) != 2 || !strings.Contains(g.Skipped[0], "A has no ttft_p95") {
		t.Errorf("ttft_p95 gate: %+v", g)
	}
	if strings.Contains(text, "max_tokens differ") {
		t.Errorf("a workload the vLLM file does not record is said to differ:\n%s", text)
	}
}

func TestCompareBundleWithItsOwnVLLMExport(t *testing.T) {
	res := bundletest.SeedLike()
	bdir := t.TempDir()
	bundle.WriteResults(bdir, res)
	for _, s := range res.Servers {
		os.WriteFile(filepath.Join(bdir, s.Log), []byte("log\n"), 0o644)
	}
	report.Write(bdir, res)
	ex, err := export.Export("vllm", res, export.Options{Percentiles: []float64{50, 95, 99}})
	if err != nil {
		t.Fatal(err)
	}
	vfile := writeFile(t, "all.json", ex.Data)
	var out bytes.Buffer
	r, err := Run(context.Background(), Options{A: bdir, B: vfile, Gates: mustGates(t, "ttft_p95>+0.0001%", "ttft_p95<-0.0001%")}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Rows) != len(res.Aggregates) || len(r.OnlyA)+len(r.OnlyB) != 0 {
		t.Fatalf("%d rows for %d loads; only A %v, only B %v", len(r.Rows), len(res.Aggregates), r.OnlyA, r.OnlyB)
	}
	for _, row := range r.Rows {
		// The same records: the same p95 TTFT, exactly the failures.
		if row.TTFTP95Ratio == nil || *row.TTFTP95Ratio < 1-1e-9 || *row.TTFTP95Ratio > 1+1e-9 || row.A.Failures.Count != row.B.Failures.Count {
			t.Errorf("%s at %s: p95 TTFT ratio %v, failures %d vs %d", row.Server, row.Load, row.TTFTP95Ratio, row.A.Failures.Count, row.B.Failures.Count)
		}
	}
	if tripped := r.Tripped(); len(tripped) != 0 {
		t.Errorf("gates tripped comparing a bundle with its own export: %q", tripped)
	}
}

func TestCompareTwoVLLMRunsAndBadFiles(t *testing.T) {
	a := writeFile(t, "a.json", []byte(vllmRun))
	b := writeFile(t, "b.json", []byte(strings.Replace(vllmRun, `"output_throughput": 358.4`, `"output_throughput": 300.0`, 1)))
	var out bytes.Buffer
	r, err := Run(context.Background(), Options{A: a, B: b, Gates: mustGates(t, "goodput<-5%")}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Rows) != 1 || r.Rows[0].Server != "openai-chat" || len(r.Tripped()) != 1 {
		t.Fatalf("rows %+v, tripped %q", r.Rows, r.Tripped())
	}
	for _, tc := range []struct{ data, want string }{
		{"", "empty"},
		{`{"completed": 3}`, "no completed or duration"},
		{`{"completed": 3, "duration": 1, "request_rate": true}`, "request_rate true"},
		{`[1, 2]`, "not a JSON array of vLLM results"},
		{`{"completed": 3, "duration": 1, "request_rate": "nan"}`, "request_rate nan: not a positive rate"},
	} {
		_, err := Run(context.Background(), Options{A: writeFile(t, "x.json", []byte(tc.data)), B: b}, &out)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.data, err, tc.want)
		}
	}
}

// FuzzVLLMResult: whatever a file holds, reading it as a vLLM result
// either fails with an error or gives aggregates, never a panic.
func FuzzVLLMResult(f *testing.F) {
	f.Add([]byte(vllmRun))
	f.Add([]byte(`[{"completed": 1, "duration": 1, "request_rate": 2.5, "load": "3 clients, sustained"}]`))
	f.Add([]byte(`{"completed": 1e300, "duration": -1, "request_rate": "nan", "max_concurrency": -5}` + "\n" + `{"completed": 0}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, err := vllmObjects(data)
		if err != nil {
			return
		}
		for _, o := range objs {
			vllmAggregate(o)
		}
	})
}
