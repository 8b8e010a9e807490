package stream

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/contract"
)

// bodyServer answers 200 with the given headers (a nil value removes the
// header, so Go does not sniff one) and body.
func bodyServer(t *testing.T, header map[string]string, body []byte) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		rw.Header()["Content-Type"] = nil
		for k, v := range header {
			rw.Header().Set(k, v)
		}
		rw.WriteHeader(http.StatusOK)
		rw.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func gzipped(s string) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	io.WriteString(zw, s)
	zw.Close()
	return b.Bytes()
}

// A 200 whose body is not an event stream (a page, a compressed body,
// bytes without one event, nothing at all) is malformed, never truncated,
// and the error says what came.
func TestNonEventStreamBodiesAreMalformed(t *testing.T) {
	stream := content("ok") + finishChunk("stop") + done
	for _, tc := range []struct {
		name   string
		header map[string]string
		body   []byte
		kind   string
		has    []string
	}{
		{"HTML page", map[string]string{"Content-Type": "text/html; charset=utf-8"}, []byte("<!DOCTYPE html><html><body>Sign in</body></html>"),
			contract.ErrStreamMalformed, []string{"text/html", "<!DOCTYPE html>"}},
		{"gzip body", map[string]string{"Content-Type": "text/event-stream", "Content-Encoding": "gzip"}, gzipped(stream),
			contract.ErrStreamMalformed, []string{"Content-Encoding gzip", `\x1f\x8b`}},
		{"bytes, no event", nil, []byte("hello there\nnothing to see\n"),
			contract.ErrStreamMalformed, []string{"no server-sent event", "hello there"}},
		{"empty body", map[string]string{"Content-Type": "text/event-stream", "Content-Length": "0"}, nil,
			contract.ErrStreamMalformed, []string{"empty"}},
		{"XML", map[string]string{"Content-Type": "application/xml"}, []byte("<error>quota</error>"),
			contract.ErrStreamMalformed, []string{"application/xml", "<error>"}},
		{"plain text carrying events", map[string]string{"Content-Type": "text/plain"}, []byte(stream), "", nil},
		{"no content type, events", nil, []byte(stream), "", nil},
		{"comments only", map[string]string{"Content-Type": "text/event-stream"}, []byte(": keep-alive\n\n: keep-alive\n\n"),
			contract.ErrStreamTruncated, []string{"without a finish_reason"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := do(t, request(bodyServer(t, tc.header, tc.body)))
			if res.ErrorKind != tc.kind || res.OK != (tc.kind == "") {
				t.Fatalf("ok=%v %q %q, want %q", res.OK, res.ErrorKind, res.Error, tc.kind)
			}
			for _, h := range tc.has {
				if !strings.Contains(res.Error, h) {
					t.Errorf("error %q does not say %q", res.Error, h)
				}
			}
		})
	}
}

func TestDecoderSawEventStream(t *testing.T) {
	for in, want := range map[string]bool{
		"<!DOCTYPE html>\n<html>": false,
		"hello\nworld\n":          false,
		"\x1f\x8b\x08\x00":        false,
		": keep-alive\n":          true,
		"id: 3\n":                 true,
		"dat":                     true, // may still become a data line
		"data: {\"choi":           true,
		"datum: x\n":              false,
		"":                        false,
	} {
		var d Decoder
		d.Feed([]byte(in), func(Event) {})
		if got := d.sawEventStream(); got != want {
			t.Errorf("%q: %v, want %v", in, got, want)
		}
	}
}
