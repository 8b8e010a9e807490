package stream

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/rehearse/rehearse/internal/endpoint"
)

// The vLLM style sends the bodies of vllm bench serve's request functions,
// and every path of the client (its own HTTP/1.1 writer for http, net/http
// for a proxy or https) sends the request's headers after its own, with
// x-request-id last.
func TestVLLMBodyAndHeaders(t *testing.T) {
	var mu sync.Mutex
	var got []*http.Request
	var bodies []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b map[string]any
		json.NewDecoder(r.Body).Decode(&b)
		mu.Lock()
		got, bodies = append(got, r), append(bodies, b)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, content("ok")+finishChunk("stop")+done)
	}))
	defer srv.Close()
	c := NewClient(nil)
	base := Request{BaseURL: srv.URL, Model: "m", Prompt: "hi", MaxTokens: 7, Temperature: 0.5, IncludeUsage: true, Style: endpoint.StyleVLLM,
		Headers: []Header{{"x-tenant", "a"}, {"authorization", "Bearer from-header"}, {"X-Tenant", "b"}}, RequestID: "bench-1-3", APIKey: "key"}

	chat := base
	chat.Endpoint = endpoint.Default
	if r := c.Do(context.Background(), chat); !r.OK {
		t.Fatalf("chat: %+v", r)
	}
	comp := base
	comp.Endpoint, comp.ExtraBody = endpoint.Completions, map[string]any{"logprobs": 2, "temperature": 0.1}
	if r := c.Do(context.Background(), comp); !r.OK {
		t.Fatalf("completions: %+v", r)
	}
	cb, pb := bodies[0], bodies[1]
	msgs, _ := json.Marshal(cb["messages"])
	if _, has := cb["temperature"]; has || cb["max_completion_tokens"] != 7.0 || cb["max_tokens"] != nil ||
		string(msgs) != `[{"content":[{"text":"hi","type":"text"}],"role":"user"}]` || cb["stream"] != true {
		t.Errorf("chat body %v (messages %s)", cb, msgs)
	}
	if v, has := pb["logprobs"]; !has || v != 2.0 || pb["repetition_penalty"] != 1.0 || pb["max_tokens"] != 7.0 || pb["temperature"] != 0.1 || pb["prompt"] != "hi" {
		t.Errorf("completions body %v", pb)
	}
	plain := comp
	plain.ExtraBody = nil
	c.Do(context.Background(), plain)
	if v, has := bodies[2]["logprobs"]; !has || v != nil {
		t.Errorf("completions body without --logprobs: %v, want logprobs null", bodies[2])
	}
	for i, r := range got {
		if r.Header.Get("X-Tenant") != "b" || r.Header.Get("X-Request-Id") != "bench-1-3" || len(r.Header.Values("Authorization")) != 1 ||
			r.Header.Get("Authorization") != "Bearer from-header" || r.Header.Get("Accept") != "text/event-stream" {
			t.Errorf("request %d headers %v", i, r.Header)
		}
	}
}

func TestRequestHeaderRefusals(t *testing.T) {
	for _, c := range []struct {
		h    Header
		want string
	}{
		{Header{"bad name", "v"}, `header "bad name": not a header name`},
		{Header{"X-A", "secret\r\nvalue"}, "header X-A: its value holds"},
		{Header{"content-length", "3"}, "header Content-Length: the client sets it itself"},
	} {
		_, err := Prepare(Request{BaseURL: "http://127.0.0.1:1", Model: "m", Headers: []Header{c.h}})
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "secret") {
			t.Errorf("%+v: %v, want %q and no value", c.h, err, c.want)
		}
	}
	if _, err := Prepare(Request{BaseURL: "http://127.0.0.1:1", Model: "m", Style: "tgi"}); err == nil {
		t.Error("an unknown body style was taken")
	}
}
