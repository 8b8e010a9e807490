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
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/spf13/pflag"

	"github.com/rehearse/rehearse/internal/benchcmd"
	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
)

// vllmTableRow is one row of the README's table of vllm bench serve's
// flags.
type vllmTableRow struct{ flag, rehearse string }

var tableRow = regexp.MustCompile("^\\| `--([a-z0-9-]+)` \\| ([^|]*) \\|")

func readVLLMTable(t *testing.T) []vllmTableRow {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "### `vllm bench serve` flags")
	if !ok {
		t.Fatal("README.md has no section \"### `vllm bench serve` flags\"")
	}
	section, _, _ = strings.Cut(section, "\n#")
	var rows []vllmTableRow
	for _, line := range strings.Split(section, "\n") {
		if m := tableRow.FindStringSubmatch(line); m != nil {
			rows = append(rows, vllmTableRow{m[1], strings.TrimSpace(m[2])})
		}
	}
	if len(rows) < 90 {
		t.Fatalf("the table has %d rows: not vLLM's flags", len(rows))
	}
	return rows
}

// Every flag of the README's table is accepted by bench, or refused by
// name (exit 2, naming it) when the table says refused; and every flag
// bench refuses or takes for vLLM is in the table.
func TestVLLMFlagTable(t *testing.T) {
	rows := readVLLMTable(t)
	flags := newBenchCmd(&State{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: io.Discard}).Flags()
	refused := map[string]bool{}
	for name := range benchcmd.Refused() {
		refused[name] = true
	}
	inTable := map[string]bool{}
	for _, r := range rows {
		inTable[r.flag] = true
		switch {
		case r.rehearse == "refused":
			fl := flags.Lookup(r.flag)
			if fl == nil || !refused[r.flag] {
				t.Errorf("--%s: the table says refused, and bench does not refuse it by name", r.flag)
				continue
			}
			args := []string{"bench", "--base-url", "http://127.0.0.1:1", "--" + r.flag}
			if fl.Value.Type() != "bool" {
				args = append(args, "x")
			}
			code, _, errs := runMain(context.Background(), args...)
			if code != 2 || !strings.Contains(errs, "--"+r.flag+" (vllm bench serve's): ") {
				t.Errorf("--%s: exit %d, %q; want 2, naming the flag", r.flag, code, errs)
			}
		default:
			if flags.Lookup(r.flag) == nil || refused[r.flag] {
				t.Errorf("--%s: the table says %q, and bench does not take it", r.flag, r.rehearse)
			}
		}
	}
	for name := range refused {
		if !inTable[name] {
			t.Errorf("bench refuses --%s, and the README's table does not list it", name)
		}
	}
	fs := pflag.NewFlagSet("vllm", pflag.ContinueOnError)
	benchcmd.VLLMFlags(fs)
	fs.VisitAll(func(f *pflag.Flag) {
		if !inTable[f.Name] {
			t.Errorf("bench takes --%s for vllm bench serve, and the README's table does not list it", f.Name)
		}
	})
}

// vLLM's flags given values bench cannot honour are refused, naming the
// flag, before any request.
func TestVLLMFlagErrors(t *testing.T) {
	base := []string{"bench", "--base-url", "http://127.0.0.1:1", "--model", "m"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--backend", "openai", "--endpoint", "/v1/chat/completions"}, "--backend openai sends the completions API, and --endpoint /v1/chat/completions is a chat path"},
		{[]string{"--backend", "openai-chat", "--endpoint", "/v1/completions"}, "--backend openai-chat sends the chat API, and --endpoint /v1/completions is a completions path"},
		{[]string{"--backend", "openai-embeddings"}, "--backend openai-embeddings: rehearse rehearses text generation"},
		{[]string{"--backend", "tgi"}, `--backend "tgi": want openai or vllm`},
		{[]string{"--backend", "openai", "--endpoint-type", "openai-chat"}, "give one"},
		{[]string{"--host", "localhost"}, "--base-url and --host/--port: give one"},
		{[]string{"--goodput", "ttft:500", "--slo", "ttft<=1s"}, "--goodput and --slo: give one"},
		{[]string{"--goodput", "itl:50"}, "the key is ttft, tpot or e2el"},
		{[]string{"--goodput", "ttft=500"}, "want KEY:VALUE"},
		{[]string{"--goodput", "ttft:-1"}, "non-negative"},
		{[]string{"--percentile-metrics", "ttft,client_queue_time"}, "--percentile-metrics client_queue_time: not yet"},
		{[]string{"--percentile-metrics", "latency"}, `--percentile-metrics "latency"`},
		{[]string{"--metric-percentiles", "0,50"}, "--metric-percentiles"},
		{[]string{"--metric-percentiles", "101"}, "--metric-percentiles"},
		{[]string{"--metadata", "novalue"}, `--metadata "novalue": want KEY=VALUE`},
		{[]string{"--label", "a", "--name", "b"}, "--label and --name: give one"},
		{[]string{"--input-len", "8"}, "--input-len applies to --dataset-name random"},
		{[]string{"--output-len", "8"}, "--output-len applies to"},
		{[]string{"--custom-output-len", "8"}, "--custom-output-len applies to --dataset-name custom"},
		{[]string{"--num-warmups", "2", "--warmup-waves", "1"}, "--num-warmups and --warmup-waves/--warmup-requests: give one"},
		{[]string{"--tokenizer-mode", "mistral"}, `--tokenizer-mode "mistral"`},
		{[]string{"--skip-tokenizer-init", "--tokenizer", "qwen3"}, "give one"},
		{[]string{"--dataset-name", "prefix_repetition", "--disable-shuffle"}, "--disable-shuffle"},
		{[]string{"--disable-tqdm", "--progress", "always"}, "--disable-tqdm and --progress always"},
		{[]string{"--ready-check-timeout-sec", "5", "--ready", "models"}, "give one"},
		{[]string{"--dataset-name", "hf"}, "--dataset-name hf: vllm bench serve's dataset that rehearse does not read"},
		{[]string{"--backend", "openai", "--dataset-name", "random", "--multi-turn", "--max-turns", "2"}, "--multi-turn: multi-turn sessions need the chat API, and the endpoint \"/v1/completions\" is the completions API"},
		{[]string{"--endpoint", "/v1/completions", "--dataset-name", "chat", "--dataset-path", "c.jsonl"}, "--dataset-name chat: chat_jsonl prompts are chat messages, and the endpoint"},
		{[]string{"--served-model-name", "x", "--model", ""}, "--served-model-name needs --model"},
		{[]string{"--temperature", "-1"}, "--temperature: -1: must be 0 or more"},
		{[]string{"--max-concurrency", "0"}, "--max-concurrency 0: want at least 1"},
		{[]string{"--request-rate", "4", "--burstiness", "0"}, "--burstiness 0: want a positive gamma shape"},
		{[]string{"--dataset-name", "random", "--random-range-ratio", "1"}, "range_ratio 1: want 0 ≤ r < 1"},
	} {
		code, _, errs := runMain(context.Background(), append(slices.Clone(base), c.args...)...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("%q: exit %d, %q; want 2 and %q", c.args, code, errs, c.want)
		}
	}
}

// captureServer answers every POST with a short stream of the API its path
// names and keeps the bodies; GET /v1/models lists model m.
func captureServer(t *testing.T) (*httptest.Server, func() []map[string]any) {
	t.Helper()
	var mu sync.Mutex
	var bodies []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			io.WriteString(w, `{"data":[{"id":"m"}]}`)
			return
		}
		var b map[string]any
		json.NewDecoder(r.Body).Decode(&b)
		mu.Lock()
		bodies = append(bodies, b)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		piece := `{"delta":{"content":"w "}}`
		if strings.HasSuffix(r.URL.Path, "/v1/completions") {
			piece = `{"text":"w "}`
		}
		for range 3 {
			fmt.Fprintf(w, "data: {\"choices\":[%s]}\n\n", piece)
		}
		io.WriteString(w, "data: {\"choices\":[{\"text\":\"\",\"delta\":{},\"finish_reason\":\"length\"}]}\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv, func() []map[string]any {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(bodies)
	}
}

// --backend openai sends completions bodies to /v1/completions with the
// sampling flags (--extra-body wins), and the load flags keep vLLM's
// meaning: --max-concurrency alone is the sustained loop, --request-rate
// inf alone one closed wave of --num-prompts clients, --burstiness gamma
// arrivals, --num-prompts the bound, in one repeat.
func TestVLLMMeanings(t *testing.T) {
	srv, bodies := captureServer(t)
	u := strings.TrimPrefix(srv.URL, "http://")
	host, port, _ := strings.Cut(u, ":")
	run := func(args ...string) *bundle.Results {
		t.Helper()
		dir := filepath.Join(t.TempDir(), "b")
		all := append([]string{"bench", "--host", host, "--port", port, "--tokenizer", "qwen2.5", "--dataset-name", "random",
			"--random-input-len", "8", "--random-output-len", "3", "-o", dir}, args...)
		code, out, errs := runMain(context.Background(), all...)
		if code != 0 {
			t.Fatalf("%q: exit %d\n%s\n%s", args, code, out, errs)
		}
		res, err := bundle.ReadResults(dir)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	recorded := func(res *bundle.Results) (n int, modes []string) {
		for _, w := range res.Waves {
			if w.Kind == contract.KindRecorded {
				modes = append(modes, w.Mode)
			}
		}
		for _, r := range res.Records {
			if r.Kind == contract.KindRecorded {
				n++
			}
		}
		return n, modes
	}

	res := run("--backend", "openai", "--max-concurrency", "2", "--num-prompts", "6", "--num-warmups", "1",
		"--top-p", "0.9", "--top-k", "5", "--temperature", "0.7", "--logprobs", "2", "--extra-body", `{"top_p":0.5}`, "--metadata", "tp=1", "version=0.6")
	if n, modes := recorded(res); n != 6 || !slices.Equal(modes, []string{"sustained"}) {
		t.Errorf("--max-concurrency 2 --num-prompts 6: %d recorded requests in %q, want 6 in one sustained wave", n, modes)
	}
	b := bodies()[len(bodies())-1]
	if _, chat := b["messages"]; chat || b["prompt"] == nil || b["top_p"] != 0.5 || b["top_k"] != 5.0 || b["temperature"] != 0.7 || b["logprobs"] != 2.0 || b["stream"] != true {
		t.Errorf("completions body %v", b)
	}
	if res.Workload.Endpoint != "/v1/completions" || !slices.Contains(res.Notes, "metadata tp=1") || !slices.Contains(res.Notes, "metadata version=0.6") {
		t.Errorf("endpoint %q, notes %q", res.Workload.Endpoint, res.Notes)
	}

	res = run("--backend", "openai-chat", "--request-rate", "inf", "--num-prompts", "5")
	if n, modes := recorded(res); n != 5 || !slices.Equal(modes, []string{"closed"}) || res.Waves[len(res.Waves)-1].Concurrency != 5 {
		t.Errorf("--request-rate inf --num-prompts 5: %d recorded requests in %q, want 5 in one closed wave of 5", n, modes)
	}
	if b := bodies()[len(bodies())-1]; b["messages"] == nil || b["prompt"] != nil || b["temperature"] != 0.0 {
		t.Errorf("chat body %v", b)
	}

	res = run("--request-rate", "200", "--burstiness", "0.5", "--num-prompts", "4", "--seed", "2")
	last := res.Waves[len(res.Waves)-1]
	if n, modes := recorded(res); n != 4 || !slices.Equal(modes, []string{"open"}) || last.Arrival != "gamma" || last.Burstiness != 0.5 {
		t.Errorf("--request-rate 200 --burstiness 0.5 --num-prompts 4: %d in %q, wave %+v", n, modes, last)
	}
}

// Done when: a vllm bench serve command line as vLLM's docs write it
// (random dataset, request rate, max concurrency, save result) runs
// unchanged as rehearse bench against the simulator.
func TestVLLMDocsCommandRunsUnchanged(t *testing.T) {
	const model = "meta-llama/Llama-3.1-8B-Instruct"
	// The model's tokenizer.json comes from the Hub, as vLLM's would: here a
	// fake Hub serving the file the simulator counts its tokens with.
	_, asked := serveHub(t, map[string][]byte{model: qwenJSON(t)}, nil, "")
	url, _, _ := startSim(t, "--model", model, "--engine", "batching", "--time-scale", "1000", "--seed", "1")
	port := url[strings.LastIndex(url, ":")+1:]
	t.Chdir(t.TempDir()) // the bundle goes to rehearse-bench-<time> in the working folder
	line := "bench --backend vllm --model " + model + " --endpoint /v1/completions --host 127.0.0.1 --port " + port +
		" --dataset-name random --random-input-len 64 --random-output-len 16 --num-prompts 24 --request-rate 40 --max-concurrency 4" +
		" --seed 12345 --ignore-eos --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 90,99" +
		" --goodput ttft:500 tpot:50 --trust-remote-code --disable-tqdm --label sim --save-result"
	code, out, errs := runMain(context.Background(), strings.Fields(line)...)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	for _, want := range []string{"P90 TTFT (ms):", "P99 TPOT (ms):", "Median ITL (ms):", "Mean E2EL (ms):", "40 req/s"} {
		if !strings.Contains(out, want) {
			t.Errorf("the summary lacks %q:\n%s", want, out)
		}
	}
	_, dir, ok := strings.Cut(out, "\nbundle: ")
	if !ok {
		t.Fatalf("no bundle in:\n%s", out)
	}
	dir, _, _ = strings.Cut(dir, " ")
	res, err := bundle.ReadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range res.Records {
		if r.Kind != contract.KindRecorded {
			continue
		}
		n++
		// The simulator makes exactly 16 tokens (ignore_eos); they are
		// re-counted with the tokenizer the model id resolves to, which is
		// the one that built the 64-token prompts.
		if !r.OK || r.Text == "" || r.OutputTokens < 1 || r.InputTokens == nil || *r.InputTokens != 64 {
			t.Errorf("record %+v: want ok, 64 tokens in and text out", r)
			break
		}
	}
	if n != 24 || len(res.Aggregates) != 1 || res.Workload.Endpoint != "/v1/completions" || res.Servers[0].Name != "sim" {
		t.Fatalf("%d recorded requests, %d aggregates, endpoint %q, servers %+v", n, len(res.Aggregates), res.Workload.Endpoint, res.Servers)
	}
	// Two requests: tokenizer.json, and tokenizer_config.json beside it
	// (this Hub has none).
	if tok := res.Provenance.Tokenizer; asked.Load() != 2 || !strings.Contains(tok.Source, filepath.Join("models--meta-llama--Llama-3.1-8B-Instruct", "snapshots", hubCommit)) {
		t.Errorf("the Hub asked %d times, tokenizer %+v: want the model's own, downloaded once", asked.Load(), tok)
	}
	if !slices.ContainsFunc(res.Notes, func(n string) bool {
		return strings.HasPrefix(n, "tokenizer.json of "+model+" at commit "+hubCommit+" was downloaded from")
	}) {
		t.Errorf("no note says the tokenizer was downloaded: %q", res.Notes)
	}
	a := res.Aggregates[0]
	var o contract.Objectives
	if res.SLO != nil {
		o = res.SLO.Objectives
	}
	// --save-result's file, beside the bundle under vLLM's name (its
	// --label first), holds the percentiles the command asked for.
	files, _ := filepath.Glob("sim-40.0qps-concurrency4-Llama-3.1-8B-Instruct-*.json")
	if len(files) != 1 {
		entries, _ := os.ReadDir(".")
		t.Fatalf("--save-result files %q in %v", files, entries)
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var saved map[string]any
	if err := json.Unmarshal(data, &saved); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"p90_ttft_ms", "p99_ttft_ms", "p90_e2el_ms", "request_goodput", "completed"} {
		if _, ok := saved[k]; !ok {
			t.Errorf("the saved result lacks %q", k)
		}
	}
	if saved["completed"] != 24.0 || saved["backend"] != "vllm" {
		t.Errorf("completed %v, backend %v", saved["completed"], saved["backend"])
	}
	if a.RequestRateRPS != 40 || a.SLO == nil || res.SLO == nil || o.TTFTMS == nil || *o.TTFTMS != 500 || o.TPOTMS == nil || *o.TPOTMS != 50 || o.E2ELMS != nil {
		t.Fatalf("aggregate %+v, slo %+v", a, res.SLO)
	}
}

// --ready full sends the tiny request of the workload's API, and a server
// without it at that path fails readiness with a message naming the
// mismatch (exit 1: the server, not the command line).
func TestVLLMReadyNamesTheAPIMismatch(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/health", "/v1/models":
			io.WriteString(w, `{"data":[{"id":"m"}]}`)
		case "/v1/chat/completions":
			io.WriteString(w, `{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"x"},"finish_reason":"length"}]}`)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()
	dir := filepath.Join(t.TempDir(), "b")
	code, out, errs := runMain(context.Background(), "bench", "--base-url", srv.URL, "--model", "m", "--backend", "openai",
		"--ready-check-timeout-sec", "5", "--tokenizer", "usage", "--concurrency", "1", "--repeats", "1", "-o", dir)
	if code != 1 || !strings.Contains(errs, "POST /v1/completions (one tiny request): HTTP 404") || !strings.Contains(errs, "sends the completions API") || !strings.Contains(errs, "--backend openai-chat") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	t.Log(errs)
}

// vllmFlagList is the pinned copy of vllm bench serve's flags
// (testdata/vllm-bench-serve-flags.txt).
func vllmFlagList(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "vllm-bench-serve-flags.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		if line = strings.TrimSpace(line); strings.HasPrefix(line, "--") {
			out = append(out, strings.TrimPrefix(line, "--"))
		}
	}
	if len(out) < 100 {
		t.Fatalf("%d flags: not vLLM's list", len(out))
	}
	return out
}

// Every flag of vLLM main's parser is taken by rehearse bench serve with
// vLLM's meaning, or refused by name with its reason (exit 2, one line,
// before any request), and the README's table gives each its verdict: a
// flag the next vLLM adds fails here until it is one or the other.
func TestVLLMFlagList(t *testing.T) {
	cmd := benchCommand(&State{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: io.Discard}, true)
	refused := benchcmd.Refused()
	verdict := map[string]string{}
	for _, r := range readVLLMTable(t) {
		verdict[r.flag] = r.rehearse
	}
	for _, name := range vllmFlagList(t) {
		fl := cmd.Flags().Lookup(name)
		switch {
		case fl == nil:
			t.Errorf("--%s: vLLM's flag is neither taken nor refused by name by rehearse bench serve", name)
		case verdict[name] == "":
			t.Errorf("--%s: the README's table does not list it", name)
		case refused[name] != "":
			if verdict[name] != "refused" {
				t.Errorf("--%s: refused, and the README's table says %q", name, verdict[name])
			}
			args := []string{"bench", "serve", "--base-url", "http://127.0.0.1:1", "--" + name}
			if fl.Value.Type() != "bool" {
				args = append(args, "x")
			}
			code, _, errs := runMain(context.Background(), args...)
			if want := "--" + name + " (vllm bench serve's): " + refused[name]; code != 2 || strings.TrimSpace(errs) != "rehearse: "+want {
				t.Errorf("--%s: exit %d, %q; want 2 and one line %q", name, code, errs, want)
			}
		case verdict[name] == "refused":
			t.Errorf("--%s: the README's table says refused, and bench serve takes it", name)
		}
	}
	var same, mapped, no int
	all := vllmFlagList(t)
	for _, name := range all {
		switch verdict[name] {
		case "same":
			same++
		case "refused":
			no++
		default:
			mapped++
		}
	}
	readme, _ := os.ReadFile(filepath.Join("..", "..", "README.md"))
	text := strings.Join(strings.Fields(string(readme)), " ")
	want := fmt.Sprintf("Of vLLM main's %d flags, %d are taken with vLLM's meaning (%d under their own name, %d mapped onto rehearse's own: the second column) and %d are refused by name.",
		len(all), same+mapped, same, mapped, no)
	if !strings.Contains(text, want) {
		t.Errorf("the README's count of verdicts is not %q", want)
	}
}
