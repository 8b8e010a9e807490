package sim

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/sim/engine"
)

// FuzzChatRequest: no request body makes the handler panic or answer
// anything but a complete response or a 4xx error.
func FuzzChatRequest(f *testing.F) {
	for _, seed := range []string{
		chatBody("hello", 5, ""),
		`{"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"max_tokens":3,"stream":false}`,
		`{"messages":[{"role":"user","content":"x"}],"max_tokens":-1}`,
		`{"messages":[{"role":"","content":null}]}`,
		`{"messages":[{"role":"user","content":"x"}],"min_tokens":2,"max_completion_tokens":2,"ignore_eos":true,"n":1,"temperature":0}`,
		`[]`, `null`, `{"messages":{}}`,
	} {
		f.Add(seed)
	}
	s, err := New(Options{Engine: engine.Batching, TimeScale: 1e5})
	if err != nil {
		f.Fatal(err)
	}
	defer s.Close()
	f.Fuzz(func(t *testing.T, body string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		w := httptest.NewRecorder()
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
		s.Handler().ServeHTTP(w, req)
		if w.Code != http.StatusOK && (w.Code < 400 || w.Code > 499) {
			t.Fatalf("status %d for %q: %s", w.Code, body, w.Body)
		}
		if w.Code == http.StatusOK && ctx.Err() == nil && !strings.Contains(w.Body.String(), `"finish_reason":"`) {
			t.Fatalf("a 200 without a finish_reason for %q: %s", body, w.Body)
		}
	})
}

func FuzzParseFault(f *testing.F) {
	for _, s := range []string{"http500:0.1", "crash:1", "stall:", ":", "x:0.5", "stall:1e-400"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		flt, err := ParseFault(s)
		if err == nil && (flt.Rate < 0 || flt.Rate > 1) {
			t.Fatalf("ParseFault(%q) = %v: rate outside [0, 1]", s, flt)
		}
	})
}
