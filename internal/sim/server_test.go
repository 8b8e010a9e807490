package sim

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/rehearse/rehearse/internal/sim/engine"
)

// newTestServer starts a simulator over real loopback at a high time scale.
func newTestServer(t *testing.T, opts Options) (*Server, *httptest.Server) {
	t.Helper()
	if opts.TimeScale == 0 {
		opts.TimeScale = 1000
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		s.Close()
		ts.Close()
	})
	return s, ts
}

// post sends a chat completions request and reads the whole stream.
func post(t *testing.T, ctx context.Context, url, body string) (*streamResult, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, resp.Body)
		return &streamResult{status: resp.StatusCode}, nil
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q, want text/event-stream", ct)
	}
	var events []string
	sc := bufio.NewScanner(resp.Body)
	var cur strings.Builder
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if cur.Len() > 0 {
				events = append(events, cur.String())
				cur.Reset()
			}
			continue
		}
		cur.WriteString(line)
	}
	res := parseSSE(t, resp.StatusCode, events, nil)
	return res, sc.Err()
}

func TestStreamingContract(t *testing.T) {
	s, ts := newTestServer(t, Options{Engine: engine.Batching})
	for _, tc := range []struct {
		name       string
		maxTokens  int
		extra      string
		wantTokens int
		wantFinish string
	}{
		{"ignore_eos emits max_tokens", 40, `,"ignore_eos":true`, 40, "length"},
		{"max_tokens caps the output", 3, ``, 3, "length"},
		{"min_tokens lengthens the output", 300, `,"min_tokens":250`, 250, "stop"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := post(t, context.Background(), ts.URL, chatBody("Tell me about the sea.", tc.maxTokens, tc.extra))
			if err != nil {
				t.Fatal(err)
			}
			if !res.roleFirst {
				t.Error("the first chunk is not a role-only chunk (role assistant, content \"\")")
			}
			if len(res.contents) != tc.wantTokens || res.finish != tc.wantFinish {
				t.Errorf("%d content chunks, finish %q; want %d and %q", len(res.contents), res.finish, tc.wantTokens, tc.wantFinish)
			}
			if !res.done || res.afterDone != 0 {
				t.Errorf("stream done=%v, %d events after [DONE]", res.done, res.afterDone)
			}
			if got := s.counter.Count(res.text()); got != len(res.contents) {
				t.Errorf("the text re-tokenizes to %d tokens, the stream had %d content chunks", got, len(res.contents))
			}
			if res.usage == nil {
				t.Fatal("no usage chunk although include_usage was set")
			}
			if res.usage.CompletionTokens != len(res.contents) || res.usage.TotalTokens != res.usage.PromptTokens+res.usage.CompletionTokens {
				t.Errorf("usage %+v disagrees with %d content chunks", *res.usage, len(res.contents))
			}
			want := s.counter.Count(s.prof.RenderChat([]engine.Message{{Role: "user", Content: "Tell me about the sea."}}))
			if res.usage.PromptTokens != want {
				t.Errorf("usage prompt_tokens %d, want %d (the rendered chat template, counted)", res.usage.PromptTokens, want)
			}
		})
	}

	t.Run("natural length is per prompt and the same every time", func(t *testing.T) {
		a, _ := post(t, context.Background(), ts.URL, chatBody("Why is the sky blue?", 128, ""))
		b, _ := post(t, context.Background(), ts.URL, chatBody("Why is the sky blue?", 128, ""))
		if a.text() != b.text() {
			t.Error("the same prompt gave different outputs")
		}
		natural := s.prof.NaturalOutputTokens(0, "Why is the sky blue?")
		want, finish := min(natural, 128), "stop"
		if natural >= 128 {
			finish = "length"
		}
		if len(a.contents) != want || a.finish != finish {
			t.Errorf("%d tokens, finish %q; want %d, %q", len(a.contents), a.finish, want, finish)
		}
	})

	t.Run("no usage chunk unless asked", func(t *testing.T) {
		body := `{"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"stream":true}`
		res, _ := post(t, context.Background(), ts.URL, body)
		if res.usage != nil {
			t.Error("usage chunk sent without stream_options.include_usage")
		}
	})
}

func TestNonStreamingCompletion(t *testing.T) {
	s, ts := newTestServer(t, Options{Engine: engine.Serial})
	body := `{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"Say "},{"type":"text","text":"something."}]}],"max_tokens":17,"ignore_eos":true}`
	resp, err := http.Post(ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Object  string `json:"object"`
		Model   string `json:"model"`
		Choices []struct {
			Message struct {
				Role, Content string
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage usage `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if out.Object != "chat.completion" || out.Model != s.Model() || len(out.Choices) != 1 {
		t.Fatalf("unexpected completion: %+v", out)
	}
	c := out.Choices[0]
	if c.Message.Role != "assistant" || c.FinishReason != "length" || s.counter.Count(c.Message.Content) != 17 || out.Usage.CompletionTokens != 17 {
		t.Errorf("completion %+v, usage %+v; want 17 tokens, finish length", c, out.Usage)
	}
	want := s.counter.Count("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nSay something.<|im_end|>\n<|im_start|>assistant\n")
	if out.Usage.PromptTokens != want {
		t.Errorf("prompt_tokens %d, want %d (a system message replaces the default one)", out.Usage.PromptTokens, want)
	}
}

func TestBadRequestsGetClearErrors(t *testing.T) {
	_, ts := newTestServer(t, Options{Engine: engine.Batching})
	for _, tc := range []struct {
		body   string
		status int
		want   string
	}{
		{`{`, 400, "not a chat completions request"},
		{`{"messages":[]}`, 400, "messages is empty"},
		{`{"model":"other","messages":[{"role":"user","content":"x"}]}`, 404, "does not exist"},
		{`{"messages":[{"role":"user","content":"x"}],"max_tokens":0}`, 400, "max_tokens = 0"},
		{`{"messages":[{"role":"user","content":"x"}],"max_tokens":5000}`, 400, "maximum context length is 2048"},
		{`{"messages":[{"role":"user","content":"x"}],"max_tokens":5,"min_tokens":9}`, 400, "min_tokens = 9"},
		{`{"messages":[{"role":"user","content":"x"}],"n":2}`, 400, "n = 2"},
		{`{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}`, 400, "messages[0].content"},
	} {
		resp, err := http.Post(ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		var e struct {
			Error struct {
				Message string `json:"message"`
				Code    int    `json:"code"`
			} `json:"error"`
		}
		err = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if err != nil || resp.StatusCode != tc.status || e.Error.Code != tc.status || !strings.Contains(e.Error.Message, tc.want) {
			t.Errorf("%s: status %d, error %+v (decode err %v); want %d with %q", tc.body, resp.StatusCode, e.Error, err, tc.status, tc.want)
		}
	}
}

func TestModelsAndHealth(t *testing.T) {
	s, ts := newTestServer(t, Options{Engine: engine.Batching, Model: "sim/qwen"})
	resp, err := http.Get(ts.URL + "/health")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/health: %v %v", resp, err)
	}
	resp.Body.Close()
	resp, err = http.Get(ts.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m struct {
		Object string `json:"object"`
		Data   []struct {
			ID          string `json:"id"`
			MaxModelLen int    `json:"max_model_len"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	if m.Object != "list" || len(m.Data) != 1 || m.Data[0].ID != "sim/qwen" || s.Model() != "sim/qwen" || m.Data[0].MaxModelLen != 2048 {
		t.Errorf("/v1/models: %+v", m)
	}
}

// TestLoRAModulesAreServed: adapters given as vLLM's --lora-modules are
// listed in /v1/models with the model as parent and answered; another
// name still gets vLLM's 404.
func TestLoRAModulesAreServed(t *testing.T) {
	_, ts := newTestServer(t, Options{Engine: engine.Batching, Model: "sim/qwen", LoRAModules: []string{"a1", "a2"}})
	resp, err := http.Get(ts.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Data []struct{ ID, Parent string } `json:"data"`
	}
	err = json.NewDecoder(resp.Body).Decode(&m)
	resp.Body.Close()
	if err != nil || len(m.Data) != 3 || m.Data[1].ID != "a1" || m.Data[2].ID != "a2" || m.Data[2].Parent != "sim/qwen" {
		t.Fatalf("/v1/models: %+v (%v)", m, err)
	}
	for model, status := range map[string]int{"a2": http.StatusOK, "sim/qwen": http.StatusOK, "a3": http.StatusNotFound} {
		body := `{"model":"` + model + `","prompt":"hi","max_tokens":2,"stream":false}`
		resp, err := http.Post(ts.URL+"/v1/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != status {
			t.Errorf("model %s: status %d, want %d", model, resp.StatusCode, status)
		}
	}
}

// scrape reads /metrics with expfmt.
func scrape(t *testing.T, h http.Handler) map[string]float64 {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(w.Body)
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	out := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.Metric {
			var labelOK bool
			for _, l := range m.Label {
				labelOK = labelOK || l.GetName() == "model_name"
			}
			if !labelOK {
				t.Errorf("%s has no model_name label", name)
			}
			switch {
			case m.Gauge != nil:
				out[name] = m.Gauge.GetValue()
			case m.Counter != nil:
				out[name] = m.Counter.GetValue()
			case m.Histogram != nil:
				out[name+"_count"] = float64(m.Histogram.GetSampleCount())
				out[name+"_sum"] = m.Histogram.GetSampleSum()
				for _, b := range m.Histogram.Bucket {
					if b.GetUpperBound() == 0.25 {
						out[name+"_le_0.25"] = float64(b.GetCumulativeCount())
					}
				}
			}
		}
	}
	return out
}

func TestMetricsParseWithExpfmt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := New(Options{Engine: engine.Serial})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		ctx, cancel := context.WithCancel(context.Background())
		results := make(chan *streamResult, 4)
		for i := range 4 {
			go func() {
				results <- serveMem(t, s, ctx, chatBody("prompt "+string(rune('a'+i)), 30, `,"ignore_eos":true`))
			}()
		}
		time.Sleep(time.Second) // one request holds the lock, three wait
		m := scrape(t, s.Handler())
		if m["vllm:num_requests_running"] != 1 || m["vllm:num_requests_waiting"] != 3 {
			t.Errorf("running %v, waiting %v; want 1 and 3", m["vllm:num_requests_running"], m["vllm:num_requests_waiting"])
		}
		var prompt, gen float64
		for range 4 {
			r := <-results
			prompt += float64(r.usage.PromptTokens)
			gen += float64(r.usage.CompletionTokens)
		}
		cancel()
		m = scrape(t, s.Handler())
		if m["vllm:prompt_tokens_total"] != prompt || m["vllm:generation_tokens_total"] != gen || gen != 120 {
			t.Errorf("prompt_tokens_total %v, generation_tokens_total %v; want %v and %v (= 120)", m["vllm:prompt_tokens_total"], m["vllm:generation_tokens_total"], prompt, gen)
		}
		if m["vllm:time_to_first_token_seconds_count"] != 4 {
			t.Errorf("TTFT histogram count %v, want 4", m["vllm:time_to_first_token_seconds_count"])
		}
		// The first request's TTFT is the overhead plus its prefill step;
		// the others queued behind 30-token requests, well over 0.25 s.
		if m["vllm:time_to_first_token_seconds_le_0.25"] != 1 {
			t.Errorf("%v TTFTs at or under 0.25 s, want 1", m["vllm:time_to_first_token_seconds_le_0.25"])
		}
		if m["vllm:num_requests_running"] != 0 || m["vllm:num_requests_waiting"] != 0 {
			t.Errorf("after the wave: running %v, waiting %v", m["vllm:num_requests_running"], m["vllm:num_requests_waiting"])
		}
	})
}

func TestClientDisconnectFreesTheSlot(t *testing.T) {
	_, ts := newTestServer(t, Options{Engine: engine.Serial, TimeScale: 50})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	// 2000 tokens at ~21 tok/s is ~95 s simulated, ~1.9 s wall at 50×.
	_, err := post(t, ctx, ts.URL, chatBody("a long one", 2000, `,"ignore_eos":true`))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want the client's deadline", err)
	}
	start := time.Now()
	res, err := post(t, context.Background(), ts.URL, chatBody("a short one", 3, `,"ignore_eos":true`))
	if err != nil || len(res.contents) != 3 {
		t.Fatalf("second request: %v, %+v", err, res)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("the second request took %v: the abandoned one still held the lock", d)
	}
}

func TestFaults(t *testing.T) {
	for _, kind := range FaultKinds {
		t.Run(string(kind), func(t *testing.T) {
			var crashes atomic.Int32
			s, ts := newTestServer(t, Options{
				Engine:  engine.Batching,
				Faults:  []Fault{{Kind: kind, Rate: 1}},
				OnCrash: func() { crashes.Add(1) },
			})
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			res, err := post(t, ctx, ts.URL, chatBody("fault me", 20, `,"ignore_eos":true`))
			switch kind {
			case FaultHTTP500, FaultHTTP429:
				want := map[FaultKind]int{FaultHTTP500: 500, FaultHTTP429: 429}[kind]
				if err != nil || res.status != want {
					t.Errorf("status %v, err %v; want %d", res, err, want)
				}
			case FaultErrorEvent:
				if err != nil || !res.errorEvent || !res.done || res.finish != "" || len(res.contents) < 1 || len(res.contents) >= 20 {
					t.Errorf("err %v, result %+v; want content, then an error event and [DONE], no finish_reason", err, res)
				}
			case FaultTruncate:
				if err != nil || res.done || res.finish != "" || len(res.contents) < 1 || len(res.contents) >= 20 {
					t.Errorf("err %v, result %+v; want content then the end of the body without [DONE]", err, res)
				}
			case FaultMalformed:
				if err != nil || res.malformed != 1 || !res.done || len(res.contents) != 20 {
					t.Errorf("err %v, result %+v; want one malformed chunk within an otherwise complete stream", err, res)
				}
			case FaultStall:
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("err %v; want the client to give up on a stalled stream", err)
				}
			case FaultOverrun:
				if err != nil || !res.done || res.finish != "length" || len(res.contents) != OverrunTimes*20 {
					t.Errorf("err %v, %d content chunks, finish %q; want %d chunks for max_tokens 20, then the finish", err, len(res.contents), res.finish, OverrunTimes*20)
				}
			case FaultCrash:
				if err == nil || crashes.Load() != 1 {
					t.Errorf("err %v, crash hook called %d times; want a dropped connection and one call", err, crashes.Load())
				}
			}
			// The engine is left with nothing running.
			deadline := time.Now().Add(2 * time.Second)
			for s.engine.Metrics().Running != 0 && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			if n := s.engine.Metrics().Running; n != 0 {
				t.Errorf("%d sequences still running after the fault", n)
			}
		})
	}
}

func TestFaultRatesAreSeeded(t *testing.T) {
	faults := []Fault{{Kind: FaultHTTP500, Rate: 0.1}, {Kind: FaultStall, Rate: 0.05}}
	count := func(seed int64) (a, b int) {
		for n := range uint64(2000) {
			switch planFault(faults, seed, n+1, 128).kind {
			case FaultHTTP500:
				a++
			case FaultStall:
				b++
			}
		}
		return
	}
	a1, b1 := count(7)
	a2, b2 := count(7)
	if a1 != a2 || b1 != b2 {
		t.Errorf("the same seed gave %d/%d then %d/%d", a1, b1, a2, b2)
	}
	// 2000 draws at 10%: 200 ± 3σ (40); the second fault fires on 5% of
	// the remaining 90%: 90 ± 30.
	if a1 < 160 || a1 > 240 || b1 < 60 || b1 > 120 {
		t.Errorf("http500 fired %d times and stall %d in 2000 requests; want about 200 and 90", a1, b1)
	}
}

func TestParseFault(t *testing.T) {
	good := map[string]Fault{
		"http500:0.05": {FaultHTTP500, 0.05},
		"crash:1":      {FaultCrash, 1},
		"stall:0":      {FaultStall, 0},
	}
	for in, want := range good {
		if got, err := ParseFault(in); err != nil || got != want {
			t.Errorf("ParseFault(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"http500", "boom:0.1", "stall:1.5", "stall:-0.1", "stall:x", "stall:NaN"} {
		if _, err := ParseFault(in); err == nil || !strings.Contains(err.Error(), in) {
			t.Errorf("ParseFault(%q): err %v; want an error naming the input", in, err)
		}
	}
}

func TestCloseEndsStreamsInFlight(t *testing.T) {
	s, ts := newTestServer(t, Options{Engine: engine.Batching, TimeScale: 1})
	done := make(chan *streamResult)
	go func() {
		res, _ := post(t, context.Background(), ts.URL, chatBody("long", 1000, `,"ignore_eos":true`))
		done <- res
	}()
	time.Sleep(200 * time.Millisecond)
	s.Close()
	select {
	case res := <-done:
		if !res.errorEvent || res.finish != "" {
			t.Errorf("after Close: %+v; want an error event and no finish_reason", res)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a stream in flight did not end after Close")
	}
}

func TestFaultsOnNonStreamingResponses(t *testing.T) {
	for _, kind := range []FaultKind{FaultErrorEvent, FaultTruncate, FaultMalformed, FaultHTTP429} {
		t.Run(string(kind), func(t *testing.T) {
			_, ts := newTestServer(t, Options{Engine: engine.Batching, Faults: []Fault{{Kind: kind, Rate: 1}}})
			body := `{"messages":[{"role":"user","content":"x"}],"max_tokens":10,"ignore_eos":true}`
			resp, err := http.Post(ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			b, readErr := io.ReadAll(resp.Body)
			resp.Body.Close()
			var v map[string]any
			jsonErr := json.Unmarshal(b, &v)
			switch kind {
			case FaultErrorEvent:
				if resp.StatusCode != 500 || jsonErr != nil || v["error"] == nil {
					t.Errorf("status %d, body %q; want 500 with a JSON error", resp.StatusCode, b)
				}
			case FaultHTTP429:
				if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "1" {
					t.Errorf("status %d, Retry-After %q; want 429 and 1", resp.StatusCode, resp.Header.Get("Retry-After"))
				}
			case FaultTruncate:
				if !errors.Is(readErr, io.ErrUnexpectedEOF) {
					t.Errorf("read error %v after %d bytes; want an unexpected EOF", readErr, len(b))
				}
			case FaultMalformed:
				if resp.StatusCode != 200 || readErr != nil || jsonErr == nil {
					t.Errorf("status %d, read %v, json %v; want 200 and a body that is not JSON", resp.StatusCode, readErr, jsonErr)
				}
			}
		})
	}
}
