package cli

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/tokenizer"
)

// TestBenchTraceReplay: --dataset-name mooncake replays the trace: record
// i sends prompt i at the scaled traced offset, with its traced lengths,
// and the bundle records the arrivals and the source.
func TestBenchTraceReplay(t *testing.T) {
	srv, _ := benchServer(t, 2, time.Millisecond)
	trace := filepath.Join(t.TempDir(), "t.jsonl")
	if err := os.WriteFile(trace, []byte(`{"timestamp": 1000, "input_length": 40, "output_length": 3, "hash_ids": [7]}
{"timestamp": 1100, "input_length": 50, "output_length": 4, "hash_ids": [7, 8]}
{"timestamp": 1300, "input_length": 20, "output_length": 5, "hash_ids": [9]}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "b")
	code, out, errs := runMain(context.Background(), "bench", "--base-url", srv.URL, "--repeats", "1", "--tokenizer", "qwen2.5",
		"--dataset-name", "mooncake", "--dataset-path", trace, "--trace-time-scale", "0.5", "--trace-block-size", "16", "-o", dir)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	res, err := bundle.ReadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	wl := res.Workload
	if wl.Kind != "open" || wl.Open == nil || wl.Open.Arrival != contract.ArrivalTrace || len(wl.ArrivalsS) != 3 ||
		wl.PromptSource == nil || wl.PromptSource.Name != "trace" || wl.PromptSource.Params["time_scale"] != 0.5 || wl.PromptSource.Params["block_size"] != float64(16) {
		t.Fatalf("workload %+v, open %+v, source %+v", wl, wl.Open, wl.PromptSource)
	}
	tok, err := tokenizer.Embedded("qwen2.5")
	if err != nil {
		t.Fatal(err)
	}
	wantAt, wantIn, wantOut := []float64{0, 0.05, 0.15}, []int{40, 50, 20}, []int{3, 4, 5}
	if len(res.Records) != 3 {
		t.Fatalf("%d records", len(res.Records))
	}
	for _, r := range res.Records {
		i := r.Prompt
		if r.IntendedStartS != wantAt[i] || r.Client != i || r.MaxTokens != wantOut[i] || tok.Count(wl.Prompts[i]) != wantIn[i] {
			t.Errorf("record of prompt %d: intended %v, client %d, max_tokens %d, %d tokens; want %v, %d, %d", i, r.IntendedStartS, r.Client, r.MaxTokens, tok.Count(wl.Prompts[i]), wantAt[i], wantOut[i], wantIn[i])
		}
	}
	if !strings.HasPrefix(wl.Prompts[1], wl.Prompts[0][:len(wl.Prompts[0])/3]) {
		t.Error("prompts sharing hash id 7 do not share its block")
	}
	if a := res.Aggregates; len(a) != 1 || a[0].LoadLabel() != "trace replay" {
		t.Errorf("aggregates %+v", a)
	}
	if !strings.Contains(out, "trace replay") {
		t.Errorf("summary does not name the trace replay:\n%s", out)
	}
}

// TestBenchRamp: --ramp-up-* flags make one ramp wave per repeat.
func TestBenchRamp(t *testing.T) {
	srv, _ := benchServer(t, 1, time.Millisecond)
	dir := filepath.Join(t.TempDir(), "b")
	code, out, errs := runMain(context.Background(), "bench", "--base-url", srv.URL, "--tokenizer", "qwen3", "--repeats", "1", "--arrival", "fixed",
		"--ramp-up-strategy", "linear", "--ramp-up-start-rps", "20", "--ramp-up-end-rps", "60", "--num-requests", "12", "-o", dir)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	res, err := bundle.ReadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := contract.Ramp{Strategy: "linear", StartRPS: 20, EndRPS: 60}
	if o := res.Workload.Open; o == nil || o.Ramp == nil || *o.Ramp != want || len(o.RequestRatesRPS) != 0 {
		t.Fatalf("open loop %+v", o)
	}
	if len(res.Waves) != 1 || res.Waves[0].Ramp == nil || *res.Waves[0].Ramp != want || len(res.Records) != 12 {
		t.Fatalf("%d waves %+v, %d records", len(res.Waves), res.Waves, len(res.Records))
	}
	if !strings.Contains(out, "ramp 20→60 req/s") {
		t.Errorf("summary does not name the ramp:\n%s", out)
	}
	// Gaps shrink as the rate rises. Records come in the order their
	// requests ended, which a loaded machine may change: the schedule is
	// their intended starts, in order.
	var starts []float64
	for _, r := range res.Records {
		starts = append(starts, r.IntendedStartS)
	}
	slices.Sort(starts)
	first, last := starts[1]-starts[0], starts[11]-starts[10]
	if !(first > last) {
		t.Errorf("first gap %v, last %v: the rate did not rise", first, last)
	}
}

func TestBenchRampAndTraceFlagErrors(t *testing.T) {
	trace := filepath.Join(t.TempDir(), "t.csv")
	if err := os.WriteFile(trace, []byte("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:45.0,3,4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--ramp-up-start-rps", "1"}, "--ramp-up-start-rps needs --ramp-up-strategy"},
		{[]string{"--ramp-up-strategy", "step", "--ramp-up-end-rps", "2", "--duration", "1s"}, `ramp strategy "step"`},
		{[]string{"--ramp-up-strategy", "linear", "--ramp-up-end-rps", "2", "--num-prompts", "0"}, "--ramp-up-strategy: needs num_requests or duration"},
		{[]string{"--ramp-up-strategy", "linear", "--ramp-up-end-rps", "2", "--request-rate", "3", "--duration", "1s"}, "--ramp-up-strategy replaces --request-rate"},
		{[]string{"--ramp-up-strategy", "exponential", "--ramp-up-end-rps", "2", "--duration", "1s"}, "an exponential ramp needs a positive start rate"},
		{[]string{"--dataset-name", "mooncake"}, "--dataset-name mooncake needs --dataset-path"},
		{[]string{"--dataset-name", "azure_trace", "--dataset-path", trace, "--request-rate", "2", "--duration", "1s"}, "--request-rate: --dataset-name azure_trace replays the trace's own arrival times"},
		{[]string{"--dataset-name", "azure_trace", "--dataset-path", trace, "--arrival", "fixed"}, "--arrival: --dataset-name azure_trace replays"},
		{[]string{"--dataset-name", "azure_trace", "--dataset-path", trace, "--ramp-up-strategy", "linear", "--ramp-up-end-rps", "3"}, "--ramp-up-strategy: --dataset-name azure_trace replays"},
		{[]string{"--dataset-name", "azure_trace", "--dataset-path", trace, "--trace-time-scale", "-1"}, "--trace-time-scale: -1: want a positive number"},
		{[]string{"--dataset-name", "azure_trace", "--dataset-path", trace, "--trace-block-size", "0"}, "--trace-block-size 0"},
		{[]string{"--dataset-name", "random", "--trace-time-scale", "2"}, "--trace-time-scale applies to --dataset-name mooncake or azure_trace"},
		{[]string{"--model", "m", "--tokenizer", "qwen2.5", "--dataset-name", "azure_trace", "--dataset-path", trace}, "t.csv:3: timestamp"},
		// --max-model-len bounds a traced length before its prompt is built.
		{[]string{"--model", "m", "--tokenizer", "qwen2.5", "--max-model-len", "400", "--dataset-name", "azure_trace", "--dataset-path", trace},
			"--dataset-name azure_trace: " + trace + ":2: ContextTokens 374 + GeneratedTokens 44 = 418 tokens: over max_model_len 400"},
	}
	for _, c := range cases {
		code, _, errs := runMain(context.Background(), append([]string{"bench", "--base-url", "http://127.0.0.1:9"}, c.args...)...)
		if code != 2 || !strings.Contains(errs, c.want) || strings.Count(strings.TrimSpace(errs), "\n") > 0 {
			t.Errorf("%v: exit %d, stderr %q, want 2 and one line with %q", c.args, code, errs, c.want)
		}
	}
}

// TestRunRefusesABadTraceBeforeAnyRequest: `rehearse run` of a trace
// whose timestamps go backwards, or whose header lacks a column, exits 2
// with one line naming file:line, and the server hears nothing.
func TestRunRefusesABadTraceBeforeAnyRequest(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	for name, c := range map[string]struct{ content, want string }{
		"t.jsonl": {"{\"timestamp\": 5, \"input_length\": 3, \"output_length\": 1}\n{\"timestamp\": 2, \"input_length\": 3, \"output_length\": 1}\n",
			"t.jsonl:2: timestamp 2 is before 5 of line 1"},
		"a.csv": {"TIMESTAMP,Context,GeneratedTokens\n2023-11-16 18:15:46.6805900,3,4\n", "a.csv:1: the header lacks the ContextTokens column"},
		// A length past the ceiling is refused before its prompt is built
		// (it crashed the process out of memory).
		"big.jsonl": {"{\"timestamp\": 0, \"input_length\": 2000000000, \"output_length\": 1}\n",
			"big.jsonl:1: input_length: 2000000000: more than 1048576 tokens"},
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(c.content), 0o644); err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(dir, "r.yaml")
		yaml := "model: {id: m}\nservers: [{name: s, base_url: \"" + srv.URL + "\"}]\ntokenizer: {variant: qwen2.5}\n" +
			"workload: {concurrencies: [], prompts: {source: trace, path: " + name + "}, open_loop: {arrival: trace}}\n"
		if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		code, _, errs := runMain(context.Background(), "run", "-f", file, "-o", filepath.Join(dir, "out-"+name))
		if code != 2 || !strings.Contains(errs, c.want) || strings.Count(strings.TrimSpace(errs), "\n") > 0 {
			t.Errorf("%s: exit %d, stderr %q; want 2 and one line with %q", name, code, errs, c.want)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the server got %d requests", n)
	}
}

// TestBenchAzureTrace replays the Azure CSV sample, 100 times faster.
func TestBenchAzureTrace(t *testing.T) {
	srv, _ := benchServer(t, 1, time.Millisecond)
	dir := filepath.Join(t.TempDir(), "b")
	code, out, errs := runMain(context.Background(), "bench", "--base-url", srv.URL, "--repeats", "1", "--tokenizer", "qwen2.5",
		"--dataset-name", "azure_trace", "--dataset-path", filepath.Join("..", "workload", "testdata", "azure-sample.csv"),
		"--trace-time-scale", "0.01", "--num-prompts", "0", "-o", dir)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	res, err := bundle.ReadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	// 2023-11-16 18:15:46.6805900 is the first; 18:15:50.9951690 is 4.314579 s later.
	want := []float64{0, 0.04314579, 0.04541877, 0.04541877}
	if len(res.Records) != 4 || res.Workload.PromptSource.Params["format"] != "azure" {
		t.Fatalf("%d records, source %+v", len(res.Records), res.Workload.PromptSource)
	}
	for _, r := range res.Records {
		if d := r.IntendedStartS - want[r.Prompt]; d > 1e-9 || d < -1e-9 || *r.InputTokens != []int{374, 396, 879, 12}[r.Prompt] {
			t.Errorf("record of prompt %d: intended %v (want %v), input tokens %d", r.Prompt, r.IntendedStartS, want[r.Prompt], *r.InputTokens)
		}
	}
}
