package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
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
	t.Helper()
	l := &vllmLog{}
	l.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
	args := append([]string{"bench", "serve", "--base-url", l.URL}, strings.Fields(line)...)
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
	out, _, _, res := serveRun(t, l, "--model m --num-prompts 6")
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
}
