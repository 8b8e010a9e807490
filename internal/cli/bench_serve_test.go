package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
)

// received is one request a vllmLog server received.
type received struct {
	path    string
	body    map[string]any
	header  http.Header
	arrival time.Time
}

// vllmLog is a server that logs what it receives (count, API, body,
// headers, arrival) and answers every POST with a short stream of the API
// its path names, usage included; GET /v1/models lists the model.
type vllmLog struct {
	*httptest.Server
	mu  sync.Mutex
	got []received
}

func newVLLMLog(t *testing.T, model string) *vllmLog {
	return newVLLMLogOf(t, model, httptest.NewServer)
}

func newVLLMLogOf(t *testing.T, model string, start func(http.Handler) *httptest.Server) *vllmLog {
	t.Helper()
	l := &vllmLog{}
	l.Server = start(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			fmt.Fprintf(w, `{"data":[{"id":%q,"root":%q}]}`, model, model)
			return
		}
		now := time.Now()
		var b map[string]any
		json.NewDecoder(r.Body).Decode(&b)
		l.mu.Lock()
		l.got = append(l.got, received{path: r.URL.Path, body: b, header: r.Header.Clone(), arrival: now})
		l.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		piece := `{"delta":{"content":"w "}}`
		if strings.HasSuffix(r.URL.Path, "/v1/completions") {
			piece = `{"text":"w "}`
		}
		for range 3 {
			fmt.Fprintf(w, "data: {\"choices\":[%s]}\n\n", piece)
		}
		io.WriteString(w, "data: {\"choices\":[{\"text\":\"\",\"delta\":{},\"finish_reason\":\"length\"}]}\n\n")
		io.WriteString(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":3}}\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(l.Close)
	return l
}

// requests are the POSTs received, in arrival order.
func (l *vllmLog) requests() []received {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := slices.Clone(l.got)
	slices.SortFunc(out, func(a, b received) int { return a.arrival.Compare(b.arrival) })
	return out
}

// serveRun runs a rehearse bench serve command line (vllm bench serve's,
// with --base-url of l, --tokenizer qwen2.5 and -o in a temporary folder
// added unless given) in its own working folder, and returns its output
// and bundle.
func serveRun(t *testing.T, l *vllmLog, line string) (out, errs, dir string, res *bundle.Results) {
	t.Helper()
	wd := t.TempDir()
	t.Chdir(wd)
	args := append([]string{"bench", "serve"}, strings.Fields(strings.ReplaceAll(line, "{port}", l.URL[strings.LastIndex(l.URL, ":")+1:]))...)
	if !strings.Contains(line, "--port") {
		args = append(args, "--base-url", l.URL)
	}
	if !strings.Contains(line, "--tokenizer") {
		args = append(args, "--tokenizer", "qwen2.5")
	}
	dir = filepath.Join(wd, "bundle")
	args = append(args, "-o", dir)
	code, out, errs := runMain(context.Background(), args...)
	if code != 0 {
		t.Fatalf("%s: exit %d\n%s\n%s", line, code, out, errs)
	}
	res, err := bundle.ReadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	return out, errs, dir, res
}

// recordedWaves are the modes and loads of a bundle's recorded waves.
func recordedWaves(res *bundle.Results) []string {
	var out []string
	for _, w := range res.Waves {
		if w.Kind == contract.KindRecorded {
			out = append(out, w.Mode+" "+contract.KeyOf(w).LoadLabel())
		}
	}
	return out
}

// With nothing but vLLM's required flags, bench serve sends what vllm bench
// serve sends by default: --num-prompts random prompts of 1024 tokens asking
// for 128 with ignore_eos, to /v1/completions in vLLM's body (no
// temperature, repetition_penalty 1.0, logprobs null), every request at
// time 0 with its x-request-id, then prints vLLM's block before rehearse's
// table.
func TestServeDefaults(t *testing.T) {
	l := newVLLMLog(t, "m")
	out, _, _, res := serveRun(t, l, "--model m --num-prompts 6 --save-result")
	got := l.requests()
	if len(got) != 6 {
		t.Fatalf("%d requests, want 6", len(got))
	}
	ids := map[string]bool{}
	for i, r := range got {
		b := r.body
		if _, has := b["temperature"]; has || r.path != "/v1/completions" || b["max_tokens"] != 128.0 || b["ignore_eos"] != true ||
			b["repetition_penalty"] != 1.0 || b["stream"] != true || b["model"] != "m" {
			t.Fatalf("request %d to %s: body %v", i, r.path, b)
		}
		if v, has := b["logprobs"]; !has || v != nil {
			t.Errorf("request %d: logprobs %v, want null", i, v)
		}
		id := r.header.Get("X-Request-Id")
		if !strings.HasPrefix(id, "bench-") || len(id) < len("bench-12345678-0") || ids[id] {
			t.Errorf("request %d: x-request-id %q, want bench-<8 hex>-<index>, each its own", i, id)
		}
		ids[id] = true
	}
	if spread := got[5].arrival.Sub(got[0].arrival); spread > time.Second {
		t.Errorf("the requests arrived over %v: vLLM sends them all at time 0", spread)
	}
	if w := recordedWaves(res); !slices.Equal(w, []string{"closed 6 clients"}) {
		t.Errorf("recorded waves %q, want one closed wave of the 6 requests", w)
	}
	if in := res.Records[0].InputTokens; in == nil || *in != 1024 {
		t.Errorf("input tokens %v, want 1024 (vLLM's --random-input-len)", in)
	}
	block := strings.Index(out, "============ Serving Benchmark Result ============\n")
	table := strings.Index(out, "goodput tok/s")
	if block != 0 || table < block {
		t.Errorf("vLLM's block at %d, rehearse's table at %d:\n%s", block, table, out)
	}
	for _, want := range []string{"Successful requests:                     6         \n", "Failed requests:                         0         \n",
		"Total input tokens:                      54        \n", "---------------Time to First Token----------------\n", "P99 ITL (ms):"} {
		if !strings.Contains(out, want) {
			t.Errorf("the block lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "E2EL") || strings.Contains(out, "Maximum request concurrency") || strings.Contains(out, "Request rate configured") {
		t.Errorf("the block has lines vLLM prints only when asked:\n%s", out)
	}
	// --request-rate inf alone: no -concurrency in the name, max_concurrency null.
	m, _ := savedResult(t, "openai-infqps-m-*.json")
	if v, ok := m["max_concurrency"]; !ok || v != nil || m["request_rate"] != "inf" || m["burstiness"] != 1.0 || m["label"] != nil || m["num_prompts"] != 6.0 {
		t.Errorf("result %v", m)
	}
}

// shareGPTFile writes a ShareGPT file of n conversations and returns its
// path.
func shareGPTFile(t *testing.T, n int) string {
	t.Helper()
	var entries []string
	for i := range n {
		entries = append(entries, fmt.Sprintf(`{"conversations":[{"from":"human","value":"Question %d: tell me about the sea and its tides."},{"from":"gpt","value":"The sea rises and falls twice a day, pulled by the moon, number %d."}]}`, i, i))
	}
	path := filepath.Join(t.TempDir(), "ShareGPT_V3_unfiltered_cleaned_split.json")
	if err := os.WriteFile(path, []byte("["+strings.Join(entries, ",")+"]"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// savedResult reads the one result file matching pattern (vLLM's name) in
// the working folder, and its keys in order.
func savedResult(t *testing.T, pattern string) (map[string]any, []string) {
	t.Helper()
	files, _ := filepath.Glob(pattern)
	if len(files) != 1 {
		entries, _ := os.ReadDir(filepath.Dir(pattern))
		t.Fatalf("result files %q for %s, in %v", files, pattern, entries)
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("%s: %v\n%s", files[0], err, data)
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	var keys []string
	dec.Token()
	for dec.More() {
		tok, _ := dec.Token()
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		dec.Decode(&skip)
	}
	return m, keys
}

// The examples of vLLM's docs/benchmarking/cli.md, as rehearse bench serve
// command lines (vllm replaced by rehearse; the tokenizer given, there
// being no Hub here): the same requests (count, API, body) as vLLM sends.
func TestServeDocsExamplesOnline(t *testing.T) {
	sg := shareGPTFile(t, 12)
	for _, c := range []struct {
		name, line string
		check      func(t *testing.T, got []received, res *bundle.Results)
	}{
		{"online benchmark", "--backend vllm --model NousResearch/Hermes-3-Llama-3.1-8B --endpoint /v1/completions --dataset-name sharegpt --dataset-path " + sg + " --num-prompts 10",
			func(t *testing.T, got []received, res *bundle.Results) {
				if len(got) != 10 || got[0].path != "/v1/completions" || got[0].body["ignore_eos"] != nil || got[0].body["max_tokens"] == 128.0 ||
					!strings.HasPrefix(got[0].body["prompt"].(string), "Question ") {
					t.Errorf("%d requests, first %s %v: want 10 completions, the first human turn, max_tokens the reply's length", len(got), got[0].path, got[0].body)
				}
				// vLLM's sample: CPython's shuffle of the 12 entries with --seed 0
				// is 1 9 8 5 10 2 3 7 4 0 11 6; the first 10 are sent.
				if p := res.Workload.Prompts; len(p) != 10 || !strings.HasPrefix(p[0], "Question 1:") || !strings.HasPrefix(p[1], "Question 9:") || !strings.HasPrefix(p[9], "Question 0:") {
					t.Errorf("prompts %q: want vLLM's sample of the file", p)
				}
			}},
		{"sampling parameters", "--backend vllm --model NousResearch/Hermes-3-Llama-3.1-8B --endpoint /v1/completions --dataset-name sharegpt --dataset-path " + sg + " --top-k 10 --top-p 0.9 --temperature 0.5 --num-prompts 10",
			func(t *testing.T, got []received, res *bundle.Results) {
				b := got[0].body
				if len(got) != 10 || b["top_k"] != 10.0 || b["top_p"] != 0.9 || b["temperature"] != 0.5 || b["min_p"] != nil {
					t.Errorf("%d requests, body %v: want 10 with top_k 10, top_p 0.9, temperature 0.5 and no other sampling field", len(got), b)
				}
			}},
		{"prefix repetition", "--backend openai --model meta-llama/Llama-2-7b-chat-hf --dataset-name prefix_repetition --num-prompts 100 --prefix-repetition-prefix-len 512 --prefix-repetition-suffix-len 128 --prefix-repetition-num-prefixes 5 --prefix-repetition-output-len 128",
			func(t *testing.T, got []received, res *bundle.Results) {
				prefixes := map[string]bool{}
				for _, r := range got {
					prefixes[r.body["prompt"].(string)[:200]] = true
				}
				if len(got) != 100 || got[0].body["max_tokens"] != 128.0 || got[0].body["ignore_eos"] != nil || len(prefixes) != 5 {
					t.Errorf("%d requests, %d prefixes, body %v: want 100 at once over 5 prefixes, max_tokens 128", len(got), len(prefixes), got[0].body)
				}
				if in := res.Records[0].InputTokens; in == nil || *in != 640 {
					t.Errorf("input tokens %v, want 512 + 128", in)
				}
				if w := recordedWaves(res); !slices.Equal(w, []string{"closed 100 clients"}) {
					t.Errorf("waves %q: vLLM sends the 100 at time 0", w)
				}
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			model, _, _ := strings.Cut(strings.SplitN(c.line, "--model ", 2)[1], " ")
			l := newVLLMLog(t, model)
			_, _, _, res := serveRun(t, l, c.line)
			c.check(t, l.requests(), res)
		})
	}
}

// The custom-dataset example of cli.md: 80 requests of the file's prompts,
// one at a time (--max-concurrency 1), the sampling flags in the body,
// max_tokens vLLM's --custom-output-len 256, and the detailed result in
// ./log/ under vLLM's name.
func TestServeDocsExampleCustom(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data.jsonl")
	os.WriteFile(data, []byte(`{"prompt": "What is the capital of India?"}
{"prompt": "What is the capital of Iran?"}
{"prompt": "What is the capital of China?"}
`), 0o644)
	l := newVLLMLog(t, "meta-llama/Llama-3.1-8B-Instruct")
	line := "--port {port} --save-result --save-detailed --backend vllm --model meta-llama/Llama-3.1-8B-Instruct --endpoint /v1/completions" +
		" --dataset-name custom --dataset-path " + data + " --skip-chat-template --num-prompts 80 --max-concurrency 1 --temperature=0.3 --top-p=0.75 --result-dir ./log/"
	_, _, _, res := serveRun(t, l, line)
	got := l.requests()
	b := got[0].body
	if len(got) != 80 || b["max_tokens"] != 256.0 || b["temperature"] != 0.3 || b["top_p"] != 0.75 || b["prompt"] != "What is the capital of India?" {
		t.Fatalf("%d requests, body %v", len(got), b)
	}
	if w := recordedWaves(res); !slices.Equal(w, []string{"sustained 1 client, sustained"}) {
		t.Errorf("waves %q: want at most one request in flight", w)
	}
	m, _ := savedResult(t, "log/vllm-infqps-concurrency1-Llama-3.1-8B-Instruct-*.json")
	if m["max_concurrency"] != 1.0 || m["label"] != nil || m["request_rate"] != "inf" || m["burstiness"] != 1.0 || m["num_prompts"] != 80.0 ||
		m["completed"] != 80.0 || len(m["output_lens"].([]any)) != 80 || m["backend"] != "vllm" || m["endpoint_type"] != "vllm" {
		t.Errorf("result %v", m)
	}
}

// serve.py's docstring, with a rate: the requests are paced as vLLM paces
// them (the last at num-prompts/rate), and the result carries the label,
// max_concurrency null and the default percentile keys only.
func TestServeDocstringExample(t *testing.T) {
	l := newVLLMLog(t, "m")
	_, _, dir, res := serveRun(t, l, "--backend openai --label mylabel --model m --dataset-name random --input-len 64 --output-len 16 --request-rate 5 --num-prompts 10 --save-result --metadata gpu=none tp=1")
	got := l.requests()
	if len(got) != 10 || got[0].body["max_tokens"] != 16.0 || got[0].body["ignore_eos"] != true {
		t.Fatalf("%d requests, body %v", len(got), got[0].body)
	}
	var last float64
	for _, r := range res.Records {
		last = max(last, r.IntendedStartS)
	}
	if w := recordedWaves(res); len(w) != 1 || !strings.HasPrefix(w[0], "open 5 req/s") || last != 2 {
		t.Errorf("waves %q, last intended send %v s: want one open wave at 5 req/s whose 10th request goes at 10/5 = 2 s", w, last)
	}
	if res.Workload.Open == nil || res.Workload.Open.Pacing != "vllm" || res.Workload.VLLM == nil || !res.Workload.VLLM.Serve {
		t.Errorf("workload %+v", res.Workload.Open)
	}
	m, keys := savedResult(t, "mylabel-5.0qps-m-*.json")
	// The file is a pure function of the bundle: export writes the same bytes.
	files, _ := filepath.Glob("mylabel-5.0qps-m-*.json")
	saved, _ := os.ReadFile(files[0])
	folder := filepath.Join(t.TempDir(), "exported")
	if code, _, errs := runMain(context.Background(), "export", dir, "--format", "vllm", "-o", folder); code != 0 {
		t.Fatalf("export: exit %d %s", code, errs)
	}
	if exported, err := os.ReadFile(filepath.Join(folder, filepath.Base(files[0]))); err != nil || string(exported) != string(saved) {
		t.Errorf("export -o DIR: %v\n%s\nsaved\n%s", err, exported, saved)
	}
	want := []string{"date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id", "num_prompts", "gpu", "tp",
		"request_rate", "burstiness", "max_concurrency", "duration", "completed", "failed", "total_input_tokens", "total_output_tokens",
		"request_throughput", "request_goodput", "output_throughput", "total_token_throughput", "latencies", "queue_times",
		"max_output_tokens_per_s", "max_concurrent_requests", "rtfx",
		"mean_ttft_ms", "median_ttft_ms", "std_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "median_tpot_ms", "std_tpot_ms", "p99_tpot_ms",
		"mean_itl_ms", "median_itl_ms", "std_itl_ms", "p99_itl_ms"}
	if !slices.Equal(keys, want) {
		t.Errorf("keys\n got %q\nwant %q", keys, want)
	}
	if m["label"] != "mylabel" || m["gpu"] != "none" || m["tp"] != "1" || m["request_rate"] != 5.0 || m["max_concurrency"] != nil || m["tokenizer_id"] != "qwen2.5" {
		t.Errorf("result %v", m)
	}
}

// A ramp-up as cli.md describes it: one open wave whose rate climbs by
// request index, vLLM's ramp-up file name and keys, and its
// rps_change_events from the start rate up.
func TestServeRampUp(t *testing.T) {
	l := newVLLMLog(t, "m")
	_, _, _, res := serveRun(t, l, "--model m --random-input-len 16 --random-output-len 4 --ramp-up-strategy linear --ramp-up-start-rps 10 --ramp-up-end-rps 40 --num-prompts 20 --label mylabel --save-result")
	if got := l.requests(); len(got) != 20 {
		t.Fatalf("%d requests, want 20", len(got))
	}
	if w := recordedWaves(res); len(w) != 1 || !strings.HasPrefix(w[0], "open ") {
		t.Errorf("waves %q: want one open ramp wave", w)
	}
	m, keys := savedResult(t, "mylabel-ramp-up-linear-10qps-40qps-m-*.json")
	if m["ramp_up_strategy"] != "linear" || m["ramp_up_start_rps"] != 10.0 || m["ramp_up_end_rps"] != 40.0 || m["request_rate"] != "inf" {
		t.Errorf("result %v", m)
	}
	i := slices.Index(keys, "max_concurrency")
	if i < 0 || !slices.Equal(keys[i+1:i+4], []string{"ramp_up_strategy", "ramp_up_start_rps", "ramp_up_end_rps"}) {
		t.Errorf("keys %q: the ramp-up keys follow max_concurrency", keys)
	}
	events, _ := m["rps_change_events"].([]any)
	if len(events) != 31 || events[0].(map[string]any)["rps"] != 10.0 || events[30].(map[string]any)["rps"] != 40.0 {
		t.Errorf("rps_change_events %v: want 10 to 40, one per whole rate", events)
	}
}

// --num-warmups, --max-concurrency, --header and --request-id-prefix as
// vLLM sends them: the warm-ups first, under the same gate and with no
// request id; every request with the header, whose value is never written
// or shown.
func TestServeWarmupsHeadersAndIDs(t *testing.T) {
	l := newVLLMLog(t, "m")
	const secret = "s3cr3t-tenant-value"
	out, errs, dir, res := serveRun(t, l, "--model m --random-input-len 16 --random-output-len 4 --num-prompts 4 --max-concurrency 2 --num-warmups 3"+
		" --header x-tenant="+secret+" x-other=1 --request-id-prefix run7- --save-result --append-result --result-filename r.json")
	got := l.requests()
	if len(got) != 7 {
		t.Fatalf("%d requests, want 3 warm-ups and 4", len(got))
	}
	var ids []string
	for i, r := range got {
		if r.header.Get("X-Tenant") != secret || r.header.Get("X-Other") != "1" {
			t.Errorf("request %d headers %v", i, r.header)
		}
		if i < 3 && r.header.Get("X-Request-Id") != "" {
			t.Errorf("warm-up %d has x-request-id %q", i, r.header.Get("X-Request-Id"))
		}
		if i >= 3 {
			ids = append(ids, r.header.Get("X-Request-Id"))
		}
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"run7-0", "run7-1", "run7-2", "run7-3"}) {
		t.Errorf("request ids %q", ids)
	}
	var modes []string
	for _, w := range res.Waves {
		modes = append(modes, w.Kind+" "+w.Mode+" "+fmt.Sprint(w.Concurrency))
	}
	if !slices.Equal(modes, []string{"warmup sustained 2", "recorded sustained 2"}) {
		t.Errorf("waves %q: want the 3 warm-ups, then the 4, at most 2 in flight", modes)
	}
	files := []string{"r.json"}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	for _, f := range files {
		if data, _ := os.ReadFile(f); strings.Contains(string(data), secret) {
			t.Errorf("%s holds the header's value", f)
		}
	}
	if strings.Contains(out+errs, secret) {
		t.Error("the output shows the header's value")
	}
	m, _ := savedResult(t, "r.json")
	if m["max_concurrency"] != 2.0 {
		t.Errorf("max_concurrency %v", m["max_concurrency"])
	}
}

// --append-result writes a newline and the object after what the file
// holds, as vLLM's mode a+ does: two runs, two lines, no newline at the end.
func TestServeAppendResult(t *testing.T) {
	l := newVLLMLog(t, "m")
	path := filepath.Join(t.TempDir(), "results.jsonl")
	for range 2 {
		code, out, errs := runMain(context.Background(), "bench", "serve", "--base-url", l.URL, "--model", "m", "--tokenizer", "qwen2.5",
			"--random-input-len", "8", "--random-output-len", "2", "--num-prompts", "2", "--append-result", "--result-filename", path,
			"-o", filepath.Join(t.TempDir(), "b"))
		if code != 0 {
			t.Fatalf("exit %d\n%s\n%s", code, out, errs)
		}
	}
	data, _ := os.ReadFile(path)
	lines := strings.Split(string(data), "\n")
	if len(lines) != 2 || strings.HasSuffix(string(data), "\n") || !strings.HasPrefix(lines[1], `{"date": "`) {
		t.Fatalf("%q: want two objects, one per line, as json.dump writes them", data)
	}
}

// --insecure reaches a server whose certificate is self-signed, as vLLM's
// does; without it the certificate is verified and the run stops before
// any request.
func TestServeInsecure(t *testing.T) {
	l := newVLLMLogOf(t, "m", httptest.NewTLSServer)
	dir := filepath.Join(t.TempDir(), "b")
	code, out, errs := runMain(context.Background(), "bench", "serve", "--base-url", l.URL, "--model", "m", "--tokenizer", "qwen2.5",
		"--random-input-len", "8", "--random-output-len", "2", "--num-prompts", "2", "--ready-timeout", "1s", "-o", dir)
	if code == 0 || len(l.requests()) != 0 {
		t.Fatalf("without --insecure: exit %d, %d requests\n%s\n%s", code, len(l.requests()), out, errs)
	}
	_, _, _, res := serveRun(t, l, "--model m --random-input-len 8 --random-output-len 2 --num-prompts 2 --insecure")
	if n := len(l.requests()); n != 2 || len(res.Records) != 2 || !res.Records[0].OK {
		t.Fatalf("with --insecure: %d requests, records %+v", n, res.Records)
	}
}

// TestHeadersOnEveryTurn: --header goes on every request, a multi-turn
// session's later turns too (their template was built without the
// headers, so turns went out without them).
func TestHeadersOnEveryTurn(t *testing.T) {
	l := newVLLMLog(t, "m")
	t.Chdir(t.TempDir())
	code, _, errs := runMain(context.Background(), "bench", "--base-url", l.URL, "--model", "m", "--tokenizer", "qwen2.5",
		"--dataset-name", "random", "--random-input-len", "8", "--random-output-len", "2", "--num-prompts", "2",
		"--multi-turn", "--max-turns", "2", "--concurrency", "1", "--repeats", "1", "--header", "x-tenant=t1", "-o", "b")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	got := l.requests()
	if len(got) < 2 {
		t.Fatalf("%d requests, want every turn of the sessions", len(got))
	}
	for i, r := range got {
		if v := r.header.Get("x-tenant"); v != "t1" {
			t.Errorf("request %d (%v): x-tenant %q, want t1", i, r.body["messages"], v)
		}
	}
}
