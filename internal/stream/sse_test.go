package stream

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/contract"
)

type decoded struct {
	Name, Data string
}

func decodeAll(parts ...string) []decoded {
	var d Decoder
	var out []decoded
	emit := func(ev Event) { out = append(out, decoded{ev.Name, string(ev.Data)}) }
	for _, p := range parts {
		d.Feed([]byte(p), emit)
	}
	d.Finish(emit)
	return out
}

func TestDecoder(t *testing.T) {
	cases := []struct {
		name  string
		parts []string
		want  []decoded
	}{
		{"one event", []string{"data: a\n\n"}, []decoded{{"", "a"}}},
		{"no space after colon", []string{"data:a\n\n"}, []decoded{{"", "a"}}},
		{"only one space is stripped", []string{"data:  a\n\n"}, []decoded{{"", " a"}}},
		{"several per read", []string{"data: a\n\ndata: b\n\ndata: [DONE]\n\n"}, []decoded{{"", "a"}, {"", "b"}, {"", "[DONE]"}}},
		{"split mid-field", []string{"da", "ta: {\"x\":", "1}\n", "\n"}, []decoded{{"", `{"x":1}`}}},
		{"CRLF", []string{"data: a\r\n\r\ndata: b\r\n\r\n"}, []decoded{{"", "a"}, {"", "b"}}},
		{"CRLF split between CR and LF", []string{"data: a\r", "\n\r", "\ndata: b\r\n\r\n"}, []decoded{{"", "a"}, {"", "b"}}},
		{"lone CR", []string{"data: a\r\rdata: b\r\r"}, []decoded{{"", "a"}, {"", "b"}}},
		{"comments ignored", []string{": ping\n\n: keep-alive\ndata: a\n\n"}, []decoded{{"", "a"}}},
		{"multi-line data", []string{"data: a\ndata: b\n\n"}, []decoded{{"", "a\nb"}}},
		{"event name", []string{"event: error\ndata: {}\n\ndata: x\n\n"}, []decoded{{"error", "{}"}, {"", "x"}}},
		{"other fields ignored", []string{"id: 7\nretry: 10\ndata: a\n\n"}, []decoded{{"", "a"}}},
		{"field without colon", []string{"data\n\n"}, []decoded{{"", ""}}},
		{"blank lines without data dispatch nothing", []string{"\n\n\n"}, nil},
		{"unterminated last event is dispatched at the end", []string{"data: a\n\ndata: [DONE]"}, []decoded{{"", "a"}, {"", "[DONE]"}}},
		{"byte by byte", split1("data: héllo\r\n\r\n"), []decoded{{"", "héllo"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := decodeAll(c.parts...)
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
}

func split1(s string) []string {
	var out []string
	for i := 0; i < len(s); i++ {
		out = append(out, s[i:i+1])
	}
	return out
}

// FuzzDecoder checks that the events do not depend on how the stream is
// cut into reads, and that the decoder never panics.
func FuzzDecoder(f *testing.F) {
	f.Add([]byte("data: a\n\ndata: [DONE]\n\n"), uint8(3))
	f.Add([]byte("data:{\"choices\":[]}\r\n\r\n: c\r\ndata: b\r\r"), uint8(1))
	f.Add([]byte("event: error\ndata: x\ndata: y\n\n"), uint8(7))
	f.Fuzz(func(t *testing.T, data []byte, step uint8) {
		whole := decodeAll(string(data))
		n := int(step)%16 + 1
		var parts []string
		for i := 0; i < len(data); i += n {
			parts = append(parts, string(data[i:min(i+n, len(data))]))
		}
		pieces := decodeAll(parts...)
		if !reflect.DeepEqual(whole, pieces) {
			t.Fatalf("reads of %d bytes decode to %q, one read to %q", n, pieces, whole)
		}
	})
}

// splitReader returns at most n bytes per Read.
type splitReader struct {
	data []byte
	n    int
}

func (r *splitReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	k := min(len(p), r.n, len(r.data))
	copy(p, r.data[:k])
	r.data = r.data[k:]
	return k, nil
}

// FuzzReadStream feeds arbitrary bodies to the stream reader: it never
// panics, every outcome is a known kind, ok implies a finish_reason, and
// the outcome does not depend on how the body is cut into reads.
func FuzzReadStream(f *testing.F) {
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"content\":\"a\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"), uint8(5))
	f.Add([]byte("data: {\"error\":{\"message\":\"x\"}}\n\n"), uint8(1))
	f.Add([]byte("data: {\"choices\":[],\"usage\":{\"completion_tokens\":2}}\r\n\r\n"), uint8(9))
	f.Add([]byte("data: {oops\n\n"), uint8(2))
	c := NewClient(nil)
	f.Fuzz(func(t *testing.T, body []byte, step uint8) {
		read := func(n int) Result {
			var res Result
			res.Start = time.Now()
			c.readStream(context.Background(), context.Background(), &splitReader{data: body, n: n}, &res, nil, 0)
			return res
		}
		whole := read(len(body) + 1)
		cut := read(int(step)%7 + 1)
		for _, r := range []Result{whole, cut} {
			if r.OK != (r.ErrorKind == "") || (r.OK && r.FinishReason == "") {
				t.Fatalf("ok=%v kind=%q finish=%q", r.OK, r.ErrorKind, r.FinishReason)
			}
			if !r.OK && !slices.Contains(contract.ErrorKinds, r.ErrorKind) {
				t.Fatalf("unknown kind %q", r.ErrorKind)
			}
			if len(r.ChunkTimes) > 0 != !r.FirstContent.IsZero() {
				t.Fatalf("%d chunk times, first content %v", len(r.ChunkTimes), r.FirstContent)
			}
		}
		if whole.ErrorKind != cut.ErrorKind || whole.Text != cut.Text || whole.FinishReason != cut.FinishReason || len(whole.ChunkTimes) != len(cut.ChunkTimes) {
			t.Fatalf("one read: %q %q %q; reads of %d: %q %q %q", whole.ErrorKind, whole.Text, whole.FinishReason, int(step)%7+1, cut.ErrorKind, cut.Text, cut.FinishReason)
		}
	})
}

// An event that grows past the decoder's limit, as one endless line or as
// many data lines without the blank line, stops the decoder with an error
// and drops what it held.
func TestDecoderEventLimit(t *testing.T) {
	for name, parts := range map[string][]string{
		"one line":   {"data: ", "0123456789", "0123456789", "0123456789"},
		"many lines": {"data: 0123456789\n", "data: 0123456789\n", "data: 0123456789\n", "data: 0123456789\n"},
	} {
		d := Decoder{limit: 32}
		var n int
		for _, p := range parts {
			d.Feed([]byte(p), func(Event) { n++ })
		}
		d.Feed([]byte("\n\ndata: a\n\n"), func(Event) { n++ })
		d.Finish(func(Event) { n++ })
		if err := d.Err(); err == nil || n != 0 || len(d.line)+len(d.data) != 0 {
			t.Errorf("%s: err %v, %d events, %d bytes held", name, err, n, len(d.line)+len(d.data))
		}
	}
	d := Decoder{limit: 32}
	d.Feed([]byte("data: 0123456789\n\ndata: 0123456789\n\ndata: 0123456789\n\n"), func(Event) {})
	if d.Err() != nil {
		t.Fatalf("events under the limit: %v", d.Err())
	}
}

// A server that sends an event without end is cut off at the decoder's
// limit and the request fails as stream_malformed, saying why.
func TestEndlessEventIsMalformed(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(rw, "data: ")
		piece := strings.Repeat("x", 1<<20)
		for range 17 {
			if _, err := io.WriteString(rw, piece); err != nil {
				return
			}
		}
		http.NewResponseController(rw).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	c := NewClient(nil)
	defer c.Close()
	res := c.Do(context.Background(), Request{BaseURL: srv.URL, Model: "m", Prompt: "p", MaxTokens: 1})
	if res.ErrorKind != contract.ErrStreamMalformed || !strings.Contains(res.Error, "16 MiB") {
		t.Fatalf("%q %q", res.ErrorKind, res.Error)
	}
}
