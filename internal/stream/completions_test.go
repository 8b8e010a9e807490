package stream

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// To /v1/completions the prompt goes as "prompt", with the same
// max_tokens, stream, stream_options and extra body as a chat request, and
// no messages.
func TestPrepareCompletionsBody(t *testing.T) {
	p, err := Prepare(Request{BaseURL: "http://h", Endpoint: "/v1/completions", Model: "m", Prompt: "Say hi", MaxTokens: 7,
		IncludeUsage: true, ExtraBody: map[string]any{"ignore_eos": true}})
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal(p.Body(), &body); err != nil {
		t.Fatal(err)
	}
	if body["prompt"] != "Say hi" || body["max_tokens"] != 7.0 || body["stream"] != true || body["ignore_eos"] != true || body["model"] != "m" {
		t.Fatalf("body %s", p.Body())
	}
	if _, ok := body["messages"]; ok {
		t.Fatalf("completions body carries messages: %s", p.Body())
	}
	if so, _ := body["stream_options"].(map[string]any); so["include_usage"] != true {
		t.Fatalf("stream_options: %s", p.Body())
	}
	if _, err := Prepare(Request{BaseURL: "http://h", Endpoint: "/v1/completions", Messages: []Message{{Role: "user", Content: "x"}}}); err == nil || !strings.Contains(err.Error(), "completions API") {
		t.Fatalf("messages to completions: %v", err)
	}
	if _, err := NewTemplate(Request{BaseURL: "http://h", Endpoint: "/v1/completions"}); err == nil || !strings.Contains(err.Error(), "multi-turn") {
		t.Fatalf("a session template to completions: %v", err)
	}
}

// A completions stream is read from choices[0].text, timed as chat
// content is, and ends on its finish_reason.
func TestCompletionsStreamIsRead(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		rw.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(rw)
		for _, piece := range []string{"Hello", " there", ""} {
			io.WriteString(rw, `data: {"object":"text_completion","choices":[{"index":0,"text":"`+piece+`","logprobs":null,"finish_reason":null}]}`+"\n\n")
			rc.Flush()
			time.Sleep(time.Millisecond)
		}
		io.WriteString(rw, `data: {"object":"text_completion","choices":[{"index":0,"text":"","finish_reason":"length"}]}`+"\n\n")
		io.WriteString(rw, `data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}`+"\n\ndata: [DONE]\n\n")
	}))
	defer srv.Close()
	c := NewClient(nil)
	defer c.Close()
	res := c.Do(context.Background(), Request{BaseURL: srv.URL, Endpoint: "/v1/completions", Prompt: "p", MaxTokens: 2, IncludeUsage: true})
	if !res.OK || res.Text != "Hello there" || res.FinishReason != "length" || len(res.ChunkTimes) != 2 || res.FirstContent.IsZero() {
		t.Fatalf("result %+v", res)
	}
	if res.UsageCompletionTokens == nil || *res.UsageCompletionTokens != 2 {
		t.Fatalf("usage %v", res.UsageCompletionTokens)
	}
}
