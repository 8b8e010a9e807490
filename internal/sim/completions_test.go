package sim

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/sim/engine"
)

// /v1/completions streams text_completion chunks whose text is
// choices[0].text, with no role chunk, the finish and usage chunks, then
// [DONE]; the prompt is counted as sent, without the chat template.
func TestCompletionsStream(t *testing.T) {
	s, ts := newTestServer(t, Options{Engine: engine.Serial})
	body := `{"model":"` + s.Model() + `","prompt":"Tell me a story.","max_tokens":9,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`
	resp, err := http.Post(ts.URL+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), raw)
	}
	var text strings.Builder
	pieces, finish, done := 0, "", false
	var promptTokens, completionTokens int
	for _, ev := range splitEvents(string(raw)) {
		data := strings.TrimPrefix(ev, "data: ")
		if data == "[DONE]" {
			done = true
			continue
		}
		var c struct {
			Object  string `json:"object"`
			Choices []struct {
				Text         *string         `json:"text"`
				Delta        json.RawMessage `json:"delta"`
				FinishReason *string         `json:"finish_reason"`
			} `json:"choices"`
			Usage *usage `json:"usage"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		if c.Object != "text_completion" {
			t.Fatalf("object %q, want text_completion", c.Object)
		}
		if c.Usage != nil {
			promptTokens, completionTokens = c.Usage.PromptTokens, c.Usage.CompletionTokens
		}
		for _, ch := range c.Choices {
			if ch.Delta != nil || ch.Text == nil {
				t.Fatalf("a completions choice with a delta or no text: %s", data)
			}
			if *ch.Text != "" {
				text.WriteString(*ch.Text)
				pieces++
			}
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
	}
	if !done || finish != "length" || pieces != 9 || completionTokens != 9 || s.counter.Count(text.String()) != 9 {
		t.Fatalf("done %v, finish %q, %d pieces, usage %d, text %q", done, finish, pieces, completionTokens, text.String())
	}
	if want := s.counter.Count("Tell me a story."); promptTokens != want {
		t.Fatalf("prompt_tokens %d, want %d (the prompt as sent)", promptTokens, want)
	}
}

func TestCompletionsNonStreaming(t *testing.T) {
	s, ts := newTestServer(t, Options{Engine: engine.Serial})
	resp, err := http.Post(ts.URL+"/v1/completions", "application/json", strings.NewReader(`{"prompt":["Hi"],"max_tokens":3,"ignore_eos":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Object  string `json:"object"`
		Choices []struct {
			Text         string `json:"text"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if out.Object != "text_completion" || len(out.Choices) != 1 || s.counter.Count(out.Choices[0].Text) != 3 || out.Choices[0].FinishReason != "length" {
		t.Fatalf("completion %+v", out)
	}
}

// A body of the other API is refused with a 400 that names the right
// endpoint.
func TestAPIMismatchIsRefused(t *testing.T) {
	_, ts := newTestServer(t, Options{Engine: engine.Serial})
	for path, body := range map[string]string{
		"/v1/completions":      `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":3}`,
		"/v1/chat/completions": `{"prompt":"Hi","max_tokens":3}`,
	} {
		resp, err := http.Post(ts.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		other := "/v1/chat/completions"
		if path == other {
			other = "/v1/completions"
		}
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(msg), other) {
			t.Errorf("%s with the other API's body: %d %s", path, resp.StatusCode, msg)
		}
	}
}
