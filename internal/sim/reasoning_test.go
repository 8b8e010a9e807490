package sim

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/sim/engine"
)

// With ReasoningTokens the stream thinks first: that many tokens on the
// reasoning channel (under the field asked for), then the content; usage
// counts both, max_tokens bounds both, and each part re-tokenizes exactly.
func TestStreamReasoningPhase(t *testing.T) {
	for _, tc := range []struct {
		name, field, extra     string
		reasoning, maxTokens   int
		wantReasoning, wantAll int
		wantFinish             string
	}{
		{"default field", "", `,"ignore_eos":true`, 16, 40, 16, 40, "length"},
		{"reasoning_content", ReasoningFieldContent, `,"ignore_eos":true`, 16, 40, 16, 40, "length"},
		{"max_tokens cuts the reasoning", "", ``, 16, 10, 10, 10, "length"},
		{"min_tokens counts reasoning too", "", `,"min_tokens":20`, 16, 300, 16, -1, "stop"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(Options{Engine: engine.Batching, TimeScale: 1000, ReasoningTokens: tc.reasoning, ReasoningField: tc.field})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			res := serveMem(t, s, context.Background(), chatBody("Tell me about the sea.", tc.maxTokens, tc.extra))
			if !res.done || res.finish != tc.wantFinish || res.malformed != 0 {
				t.Fatalf("done %v finish %q malformed %d", res.done, res.finish, res.malformed)
			}
			want := tc.field
			if want == "" {
				want = ReasoningFieldReasoning
			}
			if len(res.reasoning) != tc.wantReasoning || res.reasoningField != want {
				t.Fatalf("%d reasoning chunks under %q, want %d under %q", len(res.reasoning), res.reasoningField, tc.wantReasoning, want)
			}
			total := len(res.reasoning) + len(res.contents)
			if tc.wantAll >= 0 && total != tc.wantAll {
				t.Fatalf("%d tokens in all, want %d", total, tc.wantAll)
			}
			if res.usage == nil || res.usage.CompletionTokens != total {
				t.Fatalf("usage %+v, want completion_tokens %d (reasoning and content)", res.usage, total)
			}
			if got := s.counter.Count(strings.Join(res.reasoning, "")); got != len(res.reasoning) {
				t.Errorf("reasoning re-tokenizes to %d, streamed %d", got, len(res.reasoning))
			}
			if got := s.counter.Count(res.text()); got != len(res.contents) {
				t.Errorf("content re-tokenizes to %d, streamed %d", got, len(res.contents))
			}
			// parseSSE fails on reasoning after content; the times of
			// writes may coalesce, so only their order is checked.
			if len(res.contents) > 0 && len(res.reasoning) > 0 && res.contentAtS[0] < res.reasoningAtS[0] {
				t.Errorf("first content at %v, before the first reasoning at %v", res.contentAtS[0], res.reasoningAtS[0])
			}
		})
	}
}

// The non-streaming answer carries the reasoning in the message's field.
func TestCompletionReasoning(t *testing.T) {
	s, ts := newTestServer(t, Options{Engine: engine.Batching, ReasoningTokens: 5, ReasoningField: ReasoningFieldContent})
	body := strings.Replace(chatBody("Hi", 12, `,"ignore_eos":true`), `"stream":true`, `"stream":false`, 1)
	resp, err := http.Post(ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var out struct {
		Choices []struct {
			Message map[string]string `json:"message"`
		} `json:"choices"`
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(data, &out); err != nil || len(out.Choices) != 1 {
		t.Fatalf("%v: %s", err, data)
	}
	m := out.Choices[0].Message
	if s.counter.Count(m["reasoning_content"]) != 5 || s.counter.Count(m["content"]) != 7 || out.Usage.CompletionTokens != 12 {
		t.Fatalf("message %q, usage %d", m, out.Usage.CompletionTokens)
	}
}

func TestReasoningOptionsChecked(t *testing.T) {
	if _, err := New(Options{ReasoningTokens: -1}); err == nil || !strings.Contains(err.Error(), "reasoning tokens -1") {
		t.Errorf("negative reasoning tokens: %v", err)
	}
	if _, err := New(Options{ReasoningField: "thinking"}); err == nil || !strings.Contains(err.Error(), `reasoning field "thinking"`) {
		t.Errorf("unknown field: %v", err)
	}
}

// With ToolCalls the non-streaming answer is a tool call with the text as
// its arguments, no content, and finish_reason tool_calls.
func TestCompletionToolCall(t *testing.T) {
	s, ts := newTestServer(t, Options{Engine: engine.Batching, ToolCalls: true})
	body := strings.Replace(chatBody("Hi", 300, ``), `"stream":true`, `"stream":false`, 1)
	resp, err := http.Post(ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Choices []struct {
			Message struct {
				Content   *string `json:"content"`
				ToolCalls []struct {
					Function struct{ Name, Arguments string } `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || len(out.Choices) != 1 {
		t.Fatal(err)
	}
	c := out.Choices[0]
	if c.Message.Content != nil || len(c.Message.ToolCalls) != 1 || c.Message.ToolCalls[0].Function.Name != ToolCallName || c.FinishReason != "tool_calls" {
		t.Fatalf("choice %+v", c)
	}
	if n := s.counter.Count(c.Message.ToolCalls[0].Function.Arguments); n != out.Usage.CompletionTokens || n == 0 {
		t.Fatalf("arguments of %d tokens, usage %d", n, out.Usage.CompletionTokens)
	}
}
