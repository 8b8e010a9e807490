package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/rehearse/rehearse/internal/sim/engine"
)

// memWriter is an in-memory streaming http.ResponseWriter that stamps every
// write with the simulated time, for handler tests on the fake clock.
type memWriter struct {
	clk    *engine.Clock
	header http.Header
	mu     sync.Mutex
	status int
	writes []stampedWrite
}

type stampedWrite struct {
	atS  float64
	data []byte
}

func newMemWriter(clk *engine.Clock) *memWriter { return &memWriter{clk: clk, header: http.Header{}} }

func (m *memWriter) Header() http.Header { return m.header }
func (m *memWriter) WriteHeader(code int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.status == 0 {
		m.status = code
	}
}
func (m *memWriter) Write(b []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.status == 0 {
		m.status = http.StatusOK
	}
	m.writes = append(m.writes, stampedWrite{atS: m.clk.Now(), data: bytes.Clone(b)})
	return len(b), nil
}
func (m *memWriter) Flush() {}

// streamResult is a parsed chat completions stream.
type streamResult struct {
	status     int
	roleFirst  bool
	contents   []string
	contentAtS []float64
	// reasoning holds the reasoning pieces under either field name, and
	// reasoningField the name last seen.
	reasoning      []string
	reasoningAtS   []float64
	reasoningField string
	finish         string
	usage          *usage
	done           bool
	errorEvent     bool
	malformed      int
	afterDone      int
	chunksBefore   int // content chunks before an error event or the end
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

func (r *streamResult) text() string { return strings.Join(r.contents, "") }

// parseSSE parses a body of server-sent events; atS gives the time of each
// event (nil for none).
func parseSSE(t *testing.T, status int, events []string, atS []float64) *streamResult {
	t.Helper()
	res := &streamResult{status: status}
	for i, ev := range events {
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok {
			t.Fatalf("event %d does not start with \"data: \": %q", i, ev)
		}
		if res.done {
			res.afterDone++
			continue
		}
		if data == "[DONE]" {
			res.done = true
			continue
		}
		var chunk struct {
			Object  string          `json:"object"`
			Error   json.RawMessage `json:"error"`
			Choices []struct {
				Delta struct {
					Role             *string `json:"role"`
					Content          *string `json:"content"`
					Reasoning        *string `json:"reasoning"`
					ReasoningContent *string `json:"reasoning_content"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage *usage `json:"usage"`
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			res.malformed++
			continue
		}
		if chunk.Error != nil {
			res.errorEvent = true
			continue
		}
		if chunk.Object != "chat.completion.chunk" {
			t.Fatalf("event %d: object %q, want chat.completion.chunk", i, chunk.Object)
		}
		if chunk.Usage != nil {
			res.usage = chunk.Usage
		}
		for _, c := range chunk.Choices {
			if c.Delta.Role != nil && len(res.contents) == 0 && i == 0 {
				res.roleFirst = *c.Delta.Role == "assistant" && c.Delta.Content != nil && *c.Delta.Content == ""
			}
			if c.Delta.Content != nil && *c.Delta.Content != "" {
				res.contents = append(res.contents, *c.Delta.Content)
				if atS != nil {
					res.contentAtS = append(res.contentAtS, atS[i])
				}
			}
			for name, r := range map[string]*string{"reasoning": c.Delta.Reasoning, "reasoning_content": c.Delta.ReasoningContent} {
				if r != nil && *r != "" {
					if len(res.contents) > 0 {
						t.Fatalf("event %d: reasoning after content", i)
					}
					res.reasoning, res.reasoningField = append(res.reasoning, *r), name
					if atS != nil {
						res.reasoningAtS = append(res.reasoningAtS, atS[i])
					}
				}
			}
			if c.FinishReason != nil {
				res.finish = *c.FinishReason
			}
		}
	}
	res.chunksBefore = len(res.contents)
	return res
}

// splitEvents cuts an SSE body into events.
func splitEvents(body string) []string {
	var out []string
	for _, ev := range strings.Split(body, "\n\n") {
		if ev != "" {
			out = append(out, ev)
		}
	}
	return out
}

// serveMem runs one request through the handler on the fake clock.
func serveMem(t *testing.T, s *Server, ctx context.Context, body string) *streamResult {
	t.Helper()
	w := newMemWriter(s.clk)
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
	s.Handler().ServeHTTP(w, req)
	w.mu.Lock()
	defer w.mu.Unlock()
	var events []string
	var atS []float64
	for _, wr := range w.writes {
		for _, ev := range splitEvents(string(wr.data)) {
			events = append(events, ev)
			atS = append(atS, wr.atS)
		}
	}
	return parseSSE(t, w.status, events, atS)
}

func chatBody(prompt string, maxTokens int, extra string) string {
	p, _ := json.Marshal(prompt)
	return fmt.Sprintf(`{"model":"","messages":[{"role":"user","content":%s}],"max_tokens":%d,"temperature":0,"stream":true,"stream_options":{"include_usage":true}%s}`, p, maxTokens, extra)
}

// testProfile is the built-in T4 profile of the engine.
func testProfile(t *testing.T, kind string) *engine.Profile {
	t.Helper()
	p, err := engine.BuiltinProfile("t4-qwen2.5-1.5b-" + kind)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
