package stream

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/contract"
)

// endless serves an event stream that ignores max_tokens: the events of
// piece, written as fast as the client reads, until it hangs up.
func endless(piece string) func(t *testing.T) string {
	return handler(func(rw http.ResponseWriter, r *http.Request) {
		rc := sse(rw, r)
		batch := strings.Repeat(piece, 64)
		for {
			if _, err := io.WriteString(rw, batch); err != nil {
				return
			}
			if rc.Flush() != nil || r.Context().Err() != nil {
				return
			}
		}
	})
}

// sendOnce sends req to the server serve starts with a client of the
// default event limit, and returns the result.
func sendOnce(t *testing.T, serve func(t *testing.T) string, req Request) Result {
	t.Helper()
	req.BaseURL = serve(t)
	c := NewClient(nil)
	defer c.Close()
	return c.Do(context.Background(), req)
}

// A server that ignores max_tokens and streams without end is cut after
// OverrunFactor × max_tokens chunks, as stream_malformed naming the
// overrun, keeping no more than the bound (issue 28, row 8).
func TestOverrunEndlessStreamIsCut(t *testing.T) {
	res := sendOnce(t, endless(content("tok")), Request{Model: "m", Prompt: "p", MaxTokens: 128, Timeout: time.Minute})
	if res.ErrorKind != contract.ErrStreamMalformed {
		t.Fatalf("%q %q, want stream_malformed", res.ErrorKind, res.Error)
	}
	const want = "stream overran: 513 chunks of generated text for max_tokens 128 (cut at 4×)"
	if res.Error != want {
		t.Errorf("error %q, want %q", res.Error, want)
	}
	if n := len(res.ChunkTimes); n != OverrunFactor*128 {
		t.Errorf("kept %d chunk times, want the bound %d", n, OverrunFactor*128)
	}
	if len(res.Text) != 3*OverrunFactor*128 {
		t.Errorf("kept %d bytes of text, want %d", len(res.Text), 3*OverrunFactor*128)
	}
}

// Reasoning counts as generated text: an endless reasoning channel is cut
// as well.
func TestOverrunEndlessReasoningIsCut(t *testing.T) {
	res := sendOnce(t, endless(reasoningChunk("reasoning", "hm")), Request{Model: "m", Prompt: "p", MaxTokens: 16, Timeout: time.Minute})
	if res.ErrorKind != contract.ErrStreamMalformed || !strings.HasPrefix(res.Error, "stream overran: 65 chunks of generated text for max_tokens 16") {
		t.Fatalf("%q %q, want an overrun at 65 chunks", res.ErrorKind, res.Error)
	}
	if len(res.Reasoning) != 2*64 {
		t.Errorf("kept %d bytes of reasoning, want %d", len(res.Reasoning), 2*64)
	}
}

// One giant content chunk, within the event limit but past the text bound,
// is cut before its text is kept.
func TestOverrunGiantChunkIsCut(t *testing.T) {
	giant := strings.Repeat("x", 1<<20)
	srv := handler(func(rw http.ResponseWriter, r *http.Request) {
		sse(rw, r)
		io.WriteString(rw, roleChunk+content("ab")+content(giant)+okStream)
	})
	res := sendOnce(t, srv, Request{Model: "m", Prompt: "p", MaxTokens: 128, Timeout: time.Minute})
	b := boundsFor(128)
	if res.ErrorKind != contract.ErrStreamMalformed {
		t.Fatalf("%q %q, want stream_malformed", res.ErrorKind, res.Error)
	}
	want := "stream overran: 1048578 bytes of generated text for max_tokens 128 (cut at 65536 bytes)"
	if res.Error != want {
		t.Errorf("error %q, want %q", res.Error, want)
	}
	if res.Text != "ab" || len(res.ChunkTimes) != 1 || len(res.Text) > b.textLen {
		t.Errorf("kept %d bytes and %d chunks, want the 2 before the giant chunk", len(res.Text), len(res.ChunkTimes))
	}
}

// A stream of events that carry no text at all is bounded too.
func TestOverrunEndlessEmptyEventsAreCut(t *testing.T) {
	res := sendOnce(t, endless(`data: {"choices":[{"index":0,"delta":{}}],"rehearse_sent_ns":1}`+"\n\n"), Request{Model: "m", Prompt: "p", MaxTokens: 8, Timeout: time.Minute})
	if res.ErrorKind != contract.ErrStreamMalformed || res.Error != "stream overran: 97 events for max_tokens 8 (cut at 4× + 64)" {
		t.Fatalf("%q %q, want an overrun at 97 events", res.ErrorKind, res.Error)
	}
	if len(res.AddedNS) > 96 {
		t.Errorf("kept %d stamps, want at most 96", len(res.AddedNS))
	}
}

// A stream within the bounds is untouched: exactly 4 × max_tokens chunks
// and a finish is a success.
func TestOverrunAtTheBoundIsOK(t *testing.T) {
	srv := handler(func(rw http.ResponseWriter, r *http.Request) {
		sse(rw, r)
		io.WriteString(rw, roleChunk+strings.Repeat(content("t"), 4*8)+finishChunk("length")+usageChunk+done)
	})
	res := sendOnce(t, srv, Request{Model: "m", Prompt: "p", MaxTokens: 8, IncludeUsage: true, Timeout: time.Minute})
	if !res.OK || len(res.ChunkTimes) != 32 {
		t.Fatalf("%q %q with %d chunks, want ok with 32", res.ErrorKind, res.Error, len(res.ChunkTimes))
	}
}

// The bounds follow what the body lets the server generate: max_tokens or
// max_completion_tokens from ExtraBody, times n, and the ceiling for a
// request that sets none.
func TestOverrunBoundsFollowTheBody(t *testing.T) {
	for _, tc := range []struct {
		name  string
		extra map[string]any
		want  int
		what  string
	}{
		{"max_tokens", nil, 128, "max_tokens 128"},
		{"max_completion_tokens above it", map[string]any{"max_completion_tokens": 4096}, 4096, "max_tokens 4096"},
		{"n choices", map[string]any{"n": 3.0}, 384, "max_tokens 384"},
		{"from JSON", map[string]any{"max_tokens": json.Number("64")}, 64, "max_tokens 64"},
		{"none", map[string]any{"max_tokens": nil}, 0, "a request without max_tokens (held to 131072)"},
		{"not a whole number", map[string]any{"max_tokens": 1.5}, 0, "a request without max_tokens (held to 131072)"},
		{"over the ceiling", map[string]any{"max_tokens": 1 << 20}, 1 << 20, "max_tokens 1048576 (held to 131072)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Prepare(Request{BaseURL: "http://x.test", Model: "m", Prompt: "p", MaxTokens: 128, ExtraBody: tc.extra})
			if err != nil {
				t.Fatal(err)
			}
			if p.hint != tc.want {
				t.Errorf("limit %d, want %d", p.hint, tc.want)
			}
			b := boundsFor(p.hint)
			if b.what() != tc.what {
				t.Errorf("%q, want %q", b.what(), tc.what)
			}
			if b.chunks > OverrunFactor*MaxTokensCeiling || b.textLen > TokenTextBytes*OverrunFactor*MaxTokensCeiling {
				t.Errorf("bounds %+v past the ceiling", b)
			}
		})
	}
}
