package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
)

// loraLog is a server that lists the model m and the LoRA adapters it was
// given in GET /v1/models, logs every POST (body, x-request-id, arrival)
// and answers it with a stream of the completions API: a request of
// max_tokens 1 (a probe) at once, any other in three chunks 30 ms apart,
// so that probes go while the load is in flight.
type loraLog struct {
	*httptest.Server
	mu  sync.Mutex
	got []loraReq
}

// loraReq is one POST loraLog received.
type loraReq struct {
	model, prompt, requestID string
	maxTokens                int
	arrival                  time.Time
}

func newLoRALog(t *testing.T, adapters ...string) *loraLog {
	t.Helper()
	l := &loraLog{}
	l.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			var data []string
			for _, m := range append([]string{"m"}, adapters...) {
				data = append(data, fmt.Sprintf(`{"id":%q}`, m))
			}
			fmt.Fprintf(w, `{"data":[%s]}`, strings.Join(data, ","))
			return
		}
		now := time.Now()
		var b struct {
			Model     string `json:"model"`
			Prompt    string `json:"prompt"`
			MaxTokens int    `json:"max_tokens"`
		}
		json.NewDecoder(r.Body).Decode(&b)
		l.mu.Lock()
		l.got = append(l.got, loraReq{model: b.Model, prompt: b.Prompt, requestID: r.Header.Get("X-Request-Id"), maxTokens: b.MaxTokens, arrival: now})
		l.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		n := 3
		if b.MaxTokens == 1 {
			n = 1
		}
		for i := range n {
			if i > 0 {
				time.Sleep(30 * time.Millisecond)
			}
			io.WriteString(w, "data: {\"choices\":[{\"text\":\"w \"}]}\n\n")
			rc.Flush()
		}
		io.WriteString(w, "data: {\"choices\":[{\"text\":\"\",\"finish_reason\":\"length\"}]}\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(l.Close)
	return l
}

// requests are the POSTs received, in arrival order.
func (l *loraLog) requests() []loraReq {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := slices.Clone(l.got)
	slices.SortFunc(out, func(a, b loraReq) int { return a.arrival.Compare(b.arrival) })
	return out
}

// run runs rehearse bench serve against l with args, a bundle in a
// temporary folder; it fails the test unless the exit is 0 and rehearse
// verify passes on the bundle.
func (l *loraLog) run(t *testing.T, args ...string) (string, *bundle.Results) {
	t.Helper()
	t.Chdir(t.TempDir())
	all := append([]string{"bench", "serve", "--base-url", l.URL, "--tokenizer", "qwen2.5", "-o", "bundle"}, args...)
	code, out, errs := runMain(context.Background(), all...)
	if code != 0 {
		t.Fatalf("%q: exit %d\n%s\n%s", args, code, out, errs)
	}
	if code, vout, verrs := runMain(context.Background(), "verify", "bundle"); code != 0 {
		t.Fatalf("rehearse verify: exit %d\n%s\n%s", code, vout, verrs)
	}
	res, err := bundle.ReadResults("bundle")
	if err != nil {
		t.Fatal(err)
	}
	return out, res
}

// promptOf is the prompt index an x-request-id of bench serve names.
func promptOf(t *testing.T, id string) int {
	t.Helper()
	i, err := strconv.Atoi(id[strings.LastIndex(id, "-")+1:])
	if err != nil {
		t.Fatalf("x-request-id %q", id)
	}
	return i
}

// --lora-modules with --lora-assignment round-robin: each request asks for
// its prompt's adapter (prompt i, adapter i mod 2), the warm-ups and
// probes for --model; each record keeps its adapter, the aggregate and
// the summary break the load down per adapter. --probe-request-rate: the
// probes (prompt Hi, max_tokens 1, no x-request-id) go one at a time
// beside the load, outside --max-concurrency, at least 1/rate apart, until
// the load has ended; their records are a side_probe wave, apart from the
// load's figures, and vLLM's probe keys and block report them. rehearse
// verify passes on the bundle.
func TestServeLoRAAndProbes(t *testing.T) {
	l := newLoRALog(t, "sql-lora", "chat-lora")
	out, res := l.run(t, "--model", "m", "--lora-modules", "sql-lora", "chat-lora", "--lora-assignment", "round-robin",
		"--random-input-len", "16", "--random-output-len", "4", "--num-prompts", "8", "--max-concurrency", "2", "--num-warmups", "2",
		"--probe-request-rate", "40", "--save-result", "--result-filename", "r.json")
	adapters := []string{"sql-lora", "chat-lora"}
	var warmups, main, probes []loraReq
	for _, r := range l.requests() {
		switch {
		case r.maxTokens == 1:
			probes = append(probes, r)
		case r.requestID == "":
			warmups = append(warmups, r)
		default:
			main = append(main, r)
		}
	}
	if len(warmups) != 2 || len(main) != 8 || len(probes) < 2 {
		t.Fatalf("%d warm-ups, %d requests, %d probes: want 2, 8 and some", len(warmups), len(main), len(probes))
	}
	for _, r := range warmups {
		if r.model != "m" {
			t.Errorf("a warm-up asked for %q, want --model (vLLM's warm-up is its test request)", r.model)
		}
	}
	for _, r := range main {
		if want := adapters[promptOf(t, r.requestID)%2]; r.model != want {
			t.Errorf("request %s asked for %q, want %q (round-robin)", r.requestID, r.model, want)
		}
	}
	first, last := main[0].arrival, main[len(main)-1].arrival
	for k, p := range probes {
		if p.model != "m" || p.prompt != "Hi" || p.requestID != "" {
			t.Errorf("probe %d: %+v, want --model, prompt Hi and no request id", k, p)
		}
		if p.arrival.Before(first.Add(-20*time.Millisecond)) || p.arrival.After(last.Add(200*time.Millisecond)) {
			t.Errorf("probe %d came at %v, outside the load (%v to %v)", k, p.arrival, first, last)
		}
		if k > 0 && p.arrival.Sub(probes[k-1].arrival) < 25*time.Millisecond {
			t.Errorf("probes %d and %d came %v apart, under 1/40 s", k-1, k, p.arrival.Sub(probes[k-1].arrival))
		}
	}

	var recorded, side []contract.Record
	for _, r := range res.Records {
		switch r.Kind {
		case contract.KindRecorded:
			recorded = append(recorded, r)
			if r.Model != adapters[r.Prompt%2] {
				t.Errorf("the record of prompt %d keeps model %q", r.Prompt, r.Model)
			}
		case contract.KindSideProbe:
			side = append(side, r)
		}
	}
	if len(recorded) != 8 || len(side) != len(probes) {
		t.Errorf("%d recorded and %d side-probe records, for 8 requests and %d probes", len(recorded), len(side), len(probes))
	}
	a := res.Aggregates[0]
	if len(res.Aggregates) != 1 || a.Failures.Total != 8 || len(a.Models) != 2 || a.Models[0].Model != "chat-lora" || a.Models[0].Requests != 4 || a.Models[1].Requests != 4 {
		t.Errorf("aggregates %d, attempts %d, models %+v: want 8 attempts, 4 per adapter", len(res.Aggregates), a.Failures.Total, a.Models)
	}
	if sp := a.SideProbes; sp == nil || sp.Requests != len(probes) || sp.Failures != 0 || sp.E2E.N != len(probes) {
		t.Errorf("side probes %+v", sp)
	}
	if m := res.Workload.Models; m == nil || m.Assignment != "round-robin" || len(res.Workload.PromptModels) != 8 {
		t.Errorf("workload models %+v, prompt models %q", m, res.Workload.PromptModels)
	}
	for _, want := range []string{"------------------Probe Requests------------------\nProbe requests completed:                " + strconv.Itoa(len(probes)),
		"Per LoRA adapter:", "sql-lora", "Side probes (beside the load, not in its figures):"} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}
	saved, keys := savedResult(t, "r.json")
	if saved["probe_completed"] != float64(len(probes)) || saved["probe_failed"] != 0.0 || !slices.Contains(keys, "probe_p99_e2el_ms") {
		t.Errorf("the result's probe keys: %v", keys)
	}
}

// --lora-assignment random (vLLM's default) draws each prompt's adapter
// with --seed as vLLM's random.choice does after random.seed(seed): on the
// random dataset, the adapters vLLM gives its requests (CPython's
// "random.seed(12345); [random.choice('abc') for _ in range(10)]").
func TestServeLoRARandomIsVLLMs(t *testing.T) {
	l := newLoRALog(t, "a", "b", "c")
	_, res := l.run(t, "--model", "m", "--lora-modules", "a", "b", "c", "--seed", "12345",
		"--random-input-len", "8", "--random-output-len", "2", "--num-prompts", "10")
	got := make([]string, 10)
	for _, r := range l.requests() {
		got[promptOf(t, r.requestID)] = r.model
	}
	if strings.Join(got, "") != "bcabbabcba" || strings.Join(res.Workload.PromptModels, "") != "bcabbabcba" {
		t.Errorf("adapters %q, recorded %q; want CPython's bcabbabcba", got, res.Workload.PromptModels)
	}
	for _, r := range res.Records {
		if r.Model != got[r.Prompt] {
			t.Errorf("the record of prompt %d keeps %q, its request asked for %q", r.Prompt, r.Model, got[r.Prompt])
		}
	}
	if res.Workload.SideProbes != nil || len(res.Waves) != 1 {
		t.Errorf("side probes %+v, waves %+v: want none beside the load", res.Workload.SideProbes, res.Waves)
	}
}

// Bad values of the three flags are refused with one line naming the
// flag, exit 2, before any request; --probe-request-rate 0 is vLLM's
// default, no probes.
func TestServeLoRAAndProbeErrors(t *testing.T) {
	l := newLoRALog(t, "a")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--lora-modules", "a", ""}, "--lora-modules: name 2 of 2 is empty"},
		{[]string{"--lora-modules", " a"}, `--lora-modules: " a" begins or ends with space`},
		{[]string{"--lora-modules", "a", "--lora-assignment", "weighted"}, `--lora-assignment "weighted": want random or round-robin`},
		{[]string{"--probe-request-rate", "-1"}, "--probe-request-rate: -1: want a finite rate above 0"},
		{[]string{"--probe-request-rate", "inf"}, "--probe-request-rate: +Inf: want a finite rate above 0"},
		{[]string{"--probe-request-rate", "2", "--segment", "0/2"}, "--probe-request-rate: a split plan's workers would each send probes"},
		{[]string{"--lora-modules", "zzz"}, "zzz"},
	} {
		t.Chdir(t.TempDir())
		args := append([]string{"bench", "serve", "--base-url", l.URL, "--model", "m", "--tokenizer", "qwen2.5", "--num-prompts", "2", "--random-input-len", "8", "-o", "b"}, c.args...)
		code, _, errs := runMain(context.Background(), args...)
		if code != 2 || !strings.Contains(errs, c.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("%q: exit %d, %q; want 2 and one line with %q", c.args, code, errs, c.want)
		}
	}
	code, _, errs := runMain(context.Background(), "bench", "--base-url", l.URL, "--model", "m", "--tokenizer", "qwen2.5",
		"--dataset-name", "random", "--random-input-len", "8", "--multi-turn", "--max-turns", "2", "--lora-modules", "a", "-o", "b2")
	if code != 2 || !strings.Contains(errs, "--lora-modules: each prompt has its own model, and a multi-turn session") {
		t.Errorf("--lora-modules with --multi-turn: exit %d, %q", code, errs)
	}
	if n := len(l.requests()); n != 0 {
		t.Errorf("%d requests sent by refused command lines", n)
	}
	_, res := l.run(t, "--model", "m", "--probe-request-rate", "0", "--random-input-len", "8", "--random-output-len", "2", "--num-prompts", "2")
	if res.Workload.SideProbes != nil || len(res.Waves) != 1 {
		t.Errorf("--probe-request-rate 0: side probes %+v, waves %d", res.Workload.SideProbes, len(res.Waves))
	}
}
