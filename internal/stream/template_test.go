package stream

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestTemplateBodyMatchesPrepare checks that a turn's body built from a
// Template decodes to the same object as Prepare's body for the same
// messages and max_tokens.
func TestTemplateBodyMatchesPrepare(t *testing.T) {
	req := Request{
		BaseURL: "http://127.0.0.1:1/", Model: "m", Temperature: 0.5, IncludeUsage: true,
		ExtraBody: map[string]any{"ignore_eos": true, "top_p": 0.9},
	}
	tmpl, err := NewTemplate(req)
	if err != nil {
		t.Fatal(err)
	}
	msgs := []Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "hi <there> \"you\""}, {Role: "assistant", Content: "héllo\n"}, {Role: "user", Content: "again"}}
	var enc []byte
	for _, m := range msgs {
		enc = AppendMessage(enc, m)
	}
	got := tmpl.Prepare(enc, 17)
	req.Messages, req.MaxTokens = msgs, 17
	want, err := Prepare(req)
	if err != nil {
		t.Fatal(err)
	}
	var g, w map[string]any
	if err := json.Unmarshal(got.Body(), &g); err != nil {
		t.Fatalf("template body %s: %v", got.Body(), err)
	}
	if err := json.Unmarshal(want.Body(), &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("template body\n%s\nwant the object of\n%s", got.Body(), want.Body())
	}
	if got.url != want.url || got.apiKey != want.apiKey || got.timeout != want.timeout {
		t.Errorf("template request %+v, want %+v", got, want)
	}
	if _, err := NewTemplate(Request{BaseURL: "ftp://x"}); err == nil {
		t.Error("NewTemplate accepted an ftp base URL")
	}
}

// BenchmarkTemplateTurn is the cost of building one turn's body from a
// session's encoded history of 8 messages of 2 KB each, against Prepare
// building the same body from the messages.
func BenchmarkTemplateTurn(b *testing.B) {
	req := Request{BaseURL: "http://127.0.0.1:1/", Model: "m", IncludeUsage: true}
	msgs := make([]Message, 8)
	for i := range msgs {
		buf := make([]byte, 2048)
		for j := range buf {
			buf[j] = 'a' + byte(j%26)
		}
		msgs[i] = Message{Role: []string{"user", "assistant"}[i%2], Content: string(buf)}
	}
	b.Run("template", func(b *testing.B) {
		tmpl, err := NewTemplate(req)
		if err != nil {
			b.Fatal(err)
		}
		var enc []byte
		for _, m := range msgs[:len(msgs)-2] {
			enc = AppendMessage(enc, m)
		}
		b.ReportAllocs()
		for b.Loop() {
			// A turn: the reply and the next user message join the
			// history, then the body is built.
			e := AppendMessage(AppendMessage(enc[:len(enc):len(enc)], msgs[6]), msgs[7])
			_ = tmpl.Prepare(e, 64)
		}
	})
	b.Run("prepare", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r := req
			r.Messages, r.MaxTokens = msgs, 64
			if _, err := Prepare(r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
