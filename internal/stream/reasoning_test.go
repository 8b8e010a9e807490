package stream

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

func reasoningChunk(field, s string) string {
	return fmt.Sprintf(`data: {"choices":[{"index":0,"delta":{%q:%q},"finish_reason":null}]}`+"\n\n", field, s)
}

func toolChunk(args string) string {
	return fmt.Sprintf(`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":%q}}]},"finish_reason":null}]}`+"\n\n", args)
}

// The reasoning channel, under either name, is kept apart from content and
// stamps FirstToken; content alone stamps FirstContent and chunk times.
func TestReasoningChannel(t *testing.T) {
	for _, field := range []string{"reasoning", "reasoning_content"} {
		t.Run(field, func(t *testing.T) {
			var contentAt atomic.Int64
			srv := scripted(t, w(roleChunk), w(reasoningChunk(field, " think")), w(reasoningChunk(field, " more")),
				pause(200*time.Millisecond), mark(&contentAt), w(content("Hi")), w(finishChunk("stop")), w(usageChunk), w(done))
			res := do(t, request(srv))
			if !res.OK {
				t.Fatalf("%s: %s", res.ErrorKind, res.Error)
			}
			if res.Text != "Hi" || res.Reasoning != " think more" || res.ToolCallText != "" {
				t.Fatalf("text %q reasoning %q tools %q", res.Text, res.Reasoning, res.ToolCallText)
			}
			if len(res.ChunkTimes) != 1 || !res.ChunkTimes[0].Equal(res.FirstContent) {
				t.Fatalf("reasoning chunks entered the content chunk times: %v", res.ChunkTimes)
			}
			// Causal, not timed: the first token was stamped before the
			// server wrote any content, so by a reasoning chunk.
			if written := time.Unix(0, contentAt.Load()); res.FirstToken.IsZero() || !res.FirstToken.Before(written) || !res.FirstContent.After(written) {
				t.Fatalf("first token %v, content written %v, first content %v: the reasoning phase was not seen first", res.FirstToken, written, res.FirstContent)
			}
		})
	}
}

// vLLM versions between the rename and the removal of reasoning_content
// send both names with the same text: it counts once.
func TestReasoningBothNamesCountOnce(t *testing.T) {
	both := `data: {"choices":[{"index":0,"delta":{"reasoning_content":" a","reasoning":" a"}}]}` + "\n\n"
	srv := scripted(t, w(both), w(both), w(content("x")), w(finishChunk("stop")), w(done))
	res := do(t, request(srv))
	if !res.OK || res.Reasoning != " a a" {
		t.Fatalf("ok=%v %s, reasoning %q, want \" a a\"", res.OK, res.Error, res.Reasoning)
	}
}

// Tool-call arguments are kept, and stamp FirstToken; a stream of tool
// calls alone has no content and no first content.
func TestToolCallArguments(t *testing.T) {
	srv := scripted(t, w(roleChunk), w(toolChunk(`{"city":`)), w(toolChunk(`"Paris"}`)), w(finishChunk("tool_calls")), w(done))
	res := do(t, request(srv))
	if !res.OK || res.FinishReason != "tool_calls" {
		t.Fatalf("ok=%v %s finish %q", res.OK, res.Error, res.FinishReason)
	}
	if res.ToolCallText != `{"city":"Paris"}` || res.Text != "" || res.Reasoning != "" {
		t.Fatalf("tools %q text %q reasoning %q", res.ToolCallText, res.Text, res.Reasoning)
	}
	if res.FirstToken.IsZero() || !res.FirstContent.IsZero() || len(res.ChunkTimes) != 0 {
		t.Fatalf("first token %v first content %v chunks %d", res.FirstToken, res.FirstContent, len(res.ChunkTimes))
	}
}

// A plain content stream's first token is its first content.
func TestFirstTokenIsFirstContentWithoutReasoning(t *testing.T) {
	srv := scripted(t, w(roleChunk), w(content("a")), w(content("b")), w(finishChunk("stop")), w(done))
	res := do(t, request(srv))
	if !res.OK || !res.FirstToken.Equal(res.FirstContent) || res.Reasoning != "" {
		t.Fatalf("ok=%v first token %v first content %v reasoning %q", res.OK, res.FirstToken, res.FirstContent, res.Reasoning)
	}
}
