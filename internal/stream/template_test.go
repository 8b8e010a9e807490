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

// BenchmarkTemplateSession is the cost of building the bodies of one
// whole session of 8 turns (user messages and replies of 2 KB each) at send
// time: with a Template and the history kept encoded (what package drive
// does), against Prepare marshalling the whole history at every turn.
func BenchmarkTemplateSession(b *testing.B) {
	req := Request{BaseURL: "http://127.0.0.1:1/", Model: "m", IncludeUsage: true, ExtraBody: map[string]any{"ignore_eos": true}}
	const turns = 8
	text := make([]byte, 2048)
	for j := range text {
		text[j] = 'a' + byte(j%26)
	}
	user, reply := Message{Role: "user", Content: string(text)}, Message{Role: "assistant", Content: string(text)}
	b.Run("template", func(b *testing.B) {
		tmpl, err := NewTemplate(req)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			var enc []byte
			for range turns {
				enc = AppendMessage(enc, user)
				_ = tmpl.Prepare(enc, 64)
				enc = AppendMessage(enc, reply)
			}
		}
	})
	b.Run("prepare", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var msgs []Message
			for range turns {
				msgs = append(msgs, user)
				r := req
				r.Messages, r.MaxTokens = msgs, 64
				if _, err := Prepare(r); err != nil {
					b.Fatal(err)
				}
				msgs = append(msgs, reply)
			}
		}
	})
}
