package stream

import (
	"bufio"
	"context"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/sim"
	"github.com/rehearse/rehearse/internal/sim/engine"
)

// hostile is one server that misbehaves, and the outcome the client must
// record for it.
type hostile struct {
	name string
	// serve starts the server and returns its base URL.
	serve func(t *testing.T) string
	// before adjusts the request and may act on the client before the
	// request is sent; it returns the context to send it with.
	before func(t *testing.T, c *Client, base string, req *Request) context.Context
	kind   string // "" for a request that must succeed
	status int    // the http_status, when one is expected
	has    string // a phrase the error must hold
	check  func(t *testing.T, res Result)
}

// handler serves h over loopback.
func handler(h http.HandlerFunc) func(t *testing.T) string {
	return func(t *testing.T) string {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		return srv.URL
	}
}

// raw serves each connection with f on a bare TCP listener.
func raw(f func(conn net.Conn)) func(t *testing.T) string {
	return func(t *testing.T) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					defer conn.Close()
					f(conn)
				}()
			}
		}()
		return "http://" + ln.Addr().String()
	}
}

// readRequest reads one request off a raw connection.
func readRequest(conn net.Conn) bool {
	req, err := http.ReadRequest(bufio.NewReader(conn))
	if err != nil {
		return false
	}
	io.Copy(io.Discard, req.Body)
	return true
}

// sse starts an event-stream answer and flushes its headers.
func sse(rw http.ResponseWriter, r *http.Request) *http.ResponseController {
	io.Copy(io.Discard, r.Body)
	rw.Header().Set("Content-Type", "text/event-stream")
	rw.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(rw)
	rc.Flush()
	return rc
}

// hang waits for the client to leave (or the test to end).
func hang(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-time.After(time.Minute):
	}
}

const okStream = roleChunk + `data: {"choices":[{"index":0,"delta":{"content":"Hello"},"finish_reason":null}]}` + "\n\n" +
	`data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" + done

func shortTimeout(d time.Duration) func(*testing.T, *Client, string, *Request) context.Context {
	return func(_ *testing.T, _ *Client, _ string, req *Request) context.Context {
		req.Timeout = d
		return context.Background()
	}
}

func hostileServers() []hostile {
	var elsewhere atomic.Int64
	var idleClosed *atomic.Int64
	gotFirstByte := make(chan struct{})
	return []hostile{
		{name: "a well-behaved stream (control)", serve: handler(func(rw http.ResponseWriter, r *http.Request) {
			sse(rw, r)
			io.WriteString(rw, okStream)
		})},
		{name: "HTML page with 200", serve: handler(func(rw http.ResponseWriter, r *http.Request) {
			rw.Header().Set("Content-Type", "text/html")
			io.WriteString(rw, "<!DOCTYPE html><html><body>Please sign in</body></html>")
		}), kind: contract.ErrStreamMalformed, has: "text/html"},
		{name: "gzip-encoded stream", serve: handler(func(rw http.ResponseWriter, r *http.Request) {
			rw.Header().Set("Content-Type", "text/event-stream")
			rw.Header().Set("Content-Encoding", "gzip")
			rw.Write(gzipped(okStream))
		}), kind: contract.ErrStreamMalformed, has: "Content-Encoding gzip"},
		{name: "JSON completion with 200", serve: handler(func(rw http.ResponseWriter, r *http.Request) {
			rw.Header().Set("Content-Type", "application/json")
			io.WriteString(rw, `{"choices":[{"message":{"content":"hi"},"finish_reason":"stop"}]}`)
		}), kind: contract.ErrStreamMalformed, has: "application/json"},
		{name: "307 to another host", serve: func(t *testing.T) string {
			other := handler(func(rw http.ResponseWriter, r *http.Request) {
				elsewhere.Add(1)
				sse(rw, r)
				io.WriteString(rw, okStream)
			})(t)
			return handler(func(rw http.ResponseWriter, r *http.Request) {
				http.Redirect(rw, r, other+r.URL.Path, http.StatusTemporaryRedirect)
			})(t)
		}, kind: contract.ErrHTTPStatus, status: 307, has: "not followed", check: func(t *testing.T, _ Result) {
			if n := elsewhere.Load(); n != 0 {
				t.Errorf("the other host got %d requests", n)
			}
		}},
		{name: "301 loop", serve: handler(func(rw http.ResponseWriter, r *http.Request) {
			http.Redirect(rw, r, r.URL.Path, http.StatusMovedPermanently)
		}), kind: contract.ErrHTTPStatus, status: 301, has: "redirect to"},
		{name: "301 loop, following redirects", serve: handler(func(rw http.ResponseWriter, r *http.Request) {
			http.Redirect(rw, r, r.URL.Path, http.StatusMovedPermanently)
		}), before: func(_ *testing.T, _ *Client, _ string, req *Request) context.Context {
			req.FollowRedirects = true
			return context.Background()
		}, kind: contract.ErrHTTPStatus, status: 301, has: "stopped after 10 redirects"},
		{name: "chunked body whose event never ends (over a 4 KiB test cap)", serve: handler(func(rw http.ResponseWriter, r *http.Request) {
			rc := sse(rw, r)
			for range 1000 {
				if _, err := io.WriteString(rw, "data: more and more\n"); err != nil {
					return
				}
				rc.Flush()
			}
			hang(r)
		}), kind: contract.ErrStreamMalformed, has: "4096 bytes without ending"},
		{name: "one enormous line (over the 16 MiB cap)", serve: handler(func(rw http.ResponseWriter, r *http.Request) {
			rc := sse(rw, r)
			io.WriteString(rw, "data: ")
			piece := strings.Repeat("x", 1<<20)
			for range 17 {
				if _, err := io.WriteString(rw, piece); err != nil {
					return
				}
			}
			rc.Flush()
			hang(r)
		}), before: func(_ *testing.T, c *Client, _ string, _ *Request) context.Context {
			c.eventLimit = 0
			return context.Background()
		}, kind: contract.ErrStreamMalformed, has: "16 MiB"},
		{name: "headers, then a stall past the timeout", serve: handler(func(rw http.ResponseWriter, r *http.Request) {
			sse(rw, r)
			io.WriteString(rw, roleChunk)
			http.NewResponseController(rw).Flush()
			hang(r)
		}), before: shortTimeout(300 * time.Millisecond), kind: contract.ErrTimeout, has: "while streaming"},
		{name: "no headers before the timeout", serve: handler(func(rw http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			hang(r)
		}), before: shortTimeout(300 * time.Millisecond), kind: contract.ErrTimeout, has: "before the response headers"},
		{name: "keep-alive comments, then a stall past the timeout", serve: handler(func(rw http.ResponseWriter, r *http.Request) {
			rc := sse(rw, r)
			for {
				if _, err := io.WriteString(rw, ": keep-alive\n\n"); err != nil {
					return
				}
				rc.Flush()
				select {
				case <-r.Context().Done():
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
		}), before: shortTimeout(300 * time.Millisecond), kind: contract.ErrTimeout},
		{name: "connection closed mid-event", serve: handler(func(rw http.ResponseWriter, r *http.Request) {
			rc := sse(rw, r)
			io.WriteString(rw, content("half")+`data: {"choices":[{"delta":{"cont`)
			rc.Flush()
			if conn, _, err := rc.Hijack(); err == nil {
				conn.Close()
			}
		}), kind: contract.ErrStreamTruncated, check: func(t *testing.T, res Result) {
			if res.Text != "half" || res.FirstContent.IsZero() {
				t.Errorf("partial content lost: %q", res.Text)
			}
		}},
		{name: "reasoning that is a number", serve: handler(func(rw http.ResponseWriter, r *http.Request) {
			sse(rw, r)
			io.WriteString(rw, reasoningChunk("reasoning", " ok")+`data: {"choices":[{"delta":{"reasoning":7}}]}`+"\n\n"+okStream)
		}), kind: contract.ErrStreamMalformed, has: "unparseable", check: func(t *testing.T, res Result) {
			if res.Reasoning != " ok" || res.FirstToken.IsZero() || !res.FirstContent.IsZero() {
				t.Errorf("reasoning before the bad chunk lost: %q, first token %v", res.Reasoning, res.FirstToken)
			}
		}},
		{name: "reasoning_content that is an object", serve: handler(func(rw http.ResponseWriter, r *http.Request) {
			sse(rw, r)
			io.WriteString(rw, `data: {"choices":[{"delta":{"reasoning_content":{"text":"x"}}}]}`+"\n\n"+okStream)
		}), kind: contract.ErrStreamMalformed, has: "reasoning_content"},
		{name: "tool_calls that is an object", serve: handler(func(rw http.ResponseWriter, r *http.Request) {
			sse(rw, r)
			io.WriteString(rw, `data: {"choices":[{"delta":{"tool_calls":{"function":{"arguments":"{}"}}}}]}`+"\n\n"+okStream)
		}), kind: contract.ErrStreamMalformed, has: "tool_calls"},
		{name: "tool-call arguments that are an object, not a string", serve: handler(func(rw http.ResponseWriter, r *http.Request) {
			sse(rw, r)
			io.WriteString(rw, `data: {"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"f","arguments":{"x":1}}}]}}]}`+"\n\n"+okStream)
		}), kind: contract.ErrStreamMalformed, has: "arguments"},
		{name: "tool_calls of nulls and empty entries (ignored)", serve: handler(func(rw http.ResponseWriter, r *http.Request) {
			sse(rw, r)
			io.WriteString(rw, `data: {"choices":[{"delta":{"tool_calls":[null,{},{"function":null},{"function":{"arguments":null}},{"function":{"arguments":""}}],"reasoning":null,"reasoning_content":""}}]}`+"\n\n"+okStream)
		}), check: func(t *testing.T, res Result) {
			if res.Text != "Hello" || res.ToolCallText != "" || res.Reasoning != "" || !res.FirstToken.Equal(res.FirstContent) {
				t.Errorf("text %q tools %q reasoning %q, first token %v first content %v", res.Text, res.ToolCallText, res.Reasoning, res.FirstToken, res.FirstContent)
			}
		}},
		{name: "reasoning only, then the connection closes mid-event", serve: handler(func(rw http.ResponseWriter, r *http.Request) {
			rc := sse(rw, r)
			io.WriteString(rw, reasoningChunk("reasoning", " hmm")+`data: {"choices":[{"delta":{"reason`)
			rc.Flush()
			if conn, _, err := rc.Hijack(); err == nil {
				conn.Close()
			}
		}), kind: contract.ErrStreamTruncated, check: func(t *testing.T, res Result) {
			if res.Reasoning != " hmm" || res.FirstToken.IsZero() || !res.FirstContent.IsZero() || res.Text != "" {
				t.Errorf("reasoning %q first token %v first content %v text %q", res.Reasoning, res.FirstToken, res.FirstContent, res.Text)
			}
		}},
		{name: "reasoning with escapes, control characters and a lone surrogate", serve: handler(func(rw http.ResponseWriter, r *http.Request) {
			sse(rw, r)
			io.WriteString(rw, `data: {"choices":[{"delta":{"reasoning":"a\n\u0000\ud800b"}}]}`+"\n\n"+okStream)
		}), check: func(t *testing.T, res Result) {
			if res.Reasoning != "a\n\x00\ufffdb" {
				t.Errorf("reasoning %q", res.Reasoning)
			}
		}},
		{name: "reasoning with a raw control character", serve: handler(func(rw http.ResponseWriter, r *http.Request) {
			sse(rw, r)
			io.WriteString(rw, "data: {\"choices\":[{\"delta\":{\"reasoning\":\"a\x01b\"}}]}\n\n"+okStream)
		}), kind: contract.ErrStreamMalformed, has: "unparseable"},
		{name: "[DONE] without a finish_reason", serve: handler(func(rw http.ResponseWriter, r *http.Request) {
			sse(rw, r)
			io.WriteString(rw, content("a")+done)
		}), kind: contract.ErrStreamTruncated, has: "[DONE]"},
		{name: "in-band error", serve: handler(func(rw http.ResponseWriter, r *http.Request) {
			sse(rw, r)
			io.WriteString(rw, content("a")+`data: {"error":{"message":"CUDA out of memory"}}`+"\n\n"+done)
		}), kind: contract.ErrServerError, has: "CUDA out of memory"},
		{name: "error event", serve: handler(func(rw http.ResponseWriter, r *http.Request) {
			sse(rw, r)
			io.WriteString(rw, "event: error\ndata: {\"message\":\"overloaded\"}\n\n")
		}), kind: contract.ErrServerError, has: "overloaded"},
		{name: "non-UTF-8 garbage", serve: handler(func(rw http.ResponseWriter, r *http.Request) {
			sse(rw, r)
			rng := rand.New(rand.NewPCG(1, 2))
			b := make([]byte, 4096)
			for i := range b {
				b[i] = byte(0x80 + rng.IntN(0x80)) // never a line end, never ASCII
			}
			rw.Write(b)
		}), kind: contract.ErrStreamMalformed, has: "no server-sent event"},
		{name: "garbage in a data line", serve: handler(func(rw http.ResponseWriter, r *http.Request) {
			sse(rw, r)
			io.WriteString(rw, "data: \xff\xfe\x00\x01{\n\n")
		}), kind: contract.ErrStreamMalformed, has: "unparseable"},
		{name: "200 with Content-Length 0", serve: handler(func(rw http.ResponseWriter, r *http.Request) {
			rw.Header().Set("Content-Type", "text/event-stream")
			rw.Header().Set("Content-Length", "0")
		}), kind: contract.ErrStreamMalformed, has: "empty"},
		{name: "204 No Content", serve: handler(func(rw http.ResponseWriter, r *http.Request) {
			rw.WriteHeader(http.StatusNoContent)
		}), kind: contract.ErrStreamMalformed, has: "empty"},
		{name: "connection reset after the headers", serve: handler(func(rw http.ResponseWriter, r *http.Request) {
			sse(rw, r)
			io.WriteString(rw, roleChunk)
			rc := http.NewResponseController(rw)
			rc.Flush()
			conn, _, err := rc.Hijack()
			if err != nil {
				return
			}
			select {
			case <-gotFirstByte:
			case <-time.After(10 * time.Second):
			}
			if tc, ok := conn.(*net.TCPConn); ok {
				tc.SetLinger(0) // close with RST
			}
			conn.Close()
		}), before: func(_ *testing.T, _ *Client, _ string, _ *Request) context.Context {
			return httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{GotFirstResponseByte: func() { close(gotFirstByte) }})
		}, kind: contract.ErrStreamTruncated, has: "stream broken"},
		{name: "slow loris: a byte every 2 ms, within the timeout", serve: handler(func(rw http.ResponseWriter, r *http.Request) {
			rc := sse(rw, r)
			for i := range len(okStream) {
				if _, err := io.WriteString(rw, okStream[i:i+1]); err != nil {
					return
				}
				rc.Flush()
				time.Sleep(2 * time.Millisecond)
			}
		}), before: shortTimeout(time.Minute)},
		{name: "idle connections closed by the server after 100 ms", serve: func(t *testing.T) string {
			srv, _, closed, _ := idleClosingServer(t)
			idleClosed = closed
			return srv.URL
		}, before: func(t *testing.T, c *Client, base string, _ *Request) context.Context {
			if err := c.Warm(context.Background(), base, 4); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the server to close the idle connections", func() bool { return idleClosed.Load() == 4 })
			return context.Background()
		}},
		{name: "accepts, reads the request, hangs up", serve: raw(func(conn net.Conn) { readRequest(conn) }), kind: contract.ErrConnect},
		{name: "not HTTP at all", serve: raw(func(conn net.Conn) {
			readRequest(conn)
			io.WriteString(conn, "SSH-2.0-OpenSSH_9.6\r\n")
		}), kind: contract.ErrConnect, has: "malformed HTTP"},
		{name: "HTTP/1.0 stream ended by close", serve: raw(func(conn net.Conn) {
			if readRequest(conn) {
				io.WriteString(conn, "HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"+okStream)
			}
		})},
		{name: "invalid chunked encoding", serve: raw(func(conn net.Conn) {
			if readRequest(conn) {
				io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\ndata: x\r\n")
			}
		}), kind: contract.ErrStreamMalformed, has: "chunked encoding"},
		{name: "HTML error page with 502", serve: handler(func(rw http.ResponseWriter, r *http.Request) {
			rw.Header().Set("Content-Type", "text/html")
			rw.WriteHeader(http.StatusBadGateway)
			io.WriteString(rw, "<html><body><h1>502 Bad Gateway</h1></body></html>")
		}), kind: contract.ErrHTTPStatus, status: 502, has: "502 Bad Gateway"},
		{name: "429 with Retry-After", serve: handler(func(rw http.ResponseWriter, r *http.Request) {
			rw.Header().Set("Retry-After", "1")
			rw.Header().Set("Content-Type", "application/json")
			rw.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(rw, `{"error":{"message":"rate limited"}}`)
		}), kind: contract.ErrHTTPStatus, status: 429, has: "rate limited", check: retryAfterIs(1)},
		{name: "503 with an HTTP-date Retry-After, relative to its Date", serve: handler(func(rw http.ResponseWriter, r *http.Request) {
			date := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
			rw.Header().Set("Date", date.Format(http.TimeFormat))
			rw.Header().Set("Retry-After", date.Add(90*time.Second).Format(http.TimeFormat))
			rw.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(rw, "overloaded")
		}), kind: contract.ErrHTTPStatus, status: 503, has: "overloaded", check: retryAfterIs(90)},
		{name: "429 with a Retry-After in the past", serve: handler(func(rw http.ResponseWriter, r *http.Request) {
			rw.Header().Set("Retry-After", "Sun, 06 Nov 1994 08:49:37 GMT")
			rw.WriteHeader(http.StatusTooManyRequests)
		}), kind: contract.ErrHTTPStatus, status: 429, check: retryAfterIs(0)},
		{name: "429 with an unparseable Retry-After", serve: handler(func(rw http.ResponseWriter, r *http.Request) {
			rw.Header().Set("Retry-After", "soon")
			rw.WriteHeader(http.StatusTooManyRequests)
		}), kind: contract.ErrHTTPStatus, status: 429, check: retryAfterIs(-1)},
		{name: "500 with a Retry-After (not kept)", serve: handler(func(rw http.ResponseWriter, r *http.Request) {
			rw.Header().Set("Retry-After", "5")
			rw.WriteHeader(http.StatusInternalServerError)
		}), kind: contract.ErrHTTPStatus, status: 500, check: retryAfterIs(-1)},
		{name: "ignores max_tokens and streams without end", serve: endless(content("tok")),
			kind: contract.ErrStreamMalformed, has: "stream overran: 33 chunks of generated text for max_tokens 8 (cut at 4×)", check: func(t *testing.T, res Result) {
				if len(res.ChunkTimes) > OverrunFactor*8 || len(res.Text) > boundsFor(8).textLen {
					t.Errorf("kept %d chunks and %d bytes past the bound", len(res.ChunkTimes), len(res.Text))
				}
			}},
		{name: "events without text, without end", serve: endless(roleChunk),
			kind: contract.ErrStreamMalformed, has: "stream overran: 97 events for max_tokens 8"},
		{name: "connection refused", serve: func(t *testing.T) string {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ln.Close()
			return "http://" + ln.Addr().String()
		}, kind: contract.ErrConnect, has: "refused"},
	}
}

// retryAfterIs checks a result's Retry-After: want seconds, or absent when
// want is negative.
func retryAfterIs(want float64) func(t *testing.T, res Result) {
	return func(t *testing.T, res Result) {
		t.Helper()
		switch got := res.RetryAfterS; {
		case want < 0 && got != nil:
			t.Errorf("retry_after_s %v, want none", *got)
		case want >= 0 && (got == nil || *got != want):
			t.Errorf("retry_after_s %v, want %v", got, want)
		}
	}
}

// TestReliabilityHostileServers: every hostile server ends its request in
// the expected class, with no crash and no hang (each request is bounded
// by its timeout; the watchdog only catches a client that ignores it).
func TestReliabilityHostileServers(t *testing.T) {
	rows := hostileServers()
	passed := 0
	for _, h := range rows {
		ok := t.Run(h.name, func(t *testing.T) {
			base := h.serve(t)
			c := NewClient(nil)
			defer c.Close()
			c.eventLimit = 4096
			req := Request{BaseURL: base, Model: "m", Prompt: "p", MaxTokens: 8, IncludeUsage: true, Timeout: 5 * time.Second}
			ctx := context.Background()
			if h.before != nil {
				ctx = h.before(t, c, base, &req)
			}
			out := make(chan Result, 1)
			go func() { out <- c.Do(ctx, req) }()
			var res Result
			select {
			case res = <-out:
			case <-time.After(req.Timeout + 30*time.Second):
				t.Fatalf("hung: no result %v after its timeout", 30*time.Second)
			}
			if res.OK != (h.kind == "") || res.ErrorKind != h.kind {
				t.Fatalf("ok=%v %q %q, want %q", res.OK, res.ErrorKind, res.Error, h.kind)
			}
			if !res.OK && !contract.IsErrorKind(res.ErrorKind) {
				t.Fatalf("unknown kind %q", res.ErrorKind)
			}
			if h.status != 0 && res.HTTPStatus != h.status {
				t.Errorf("http_status %d, want %d", res.HTTPStatus, h.status)
			}
			if !strings.Contains(res.Error, h.has) {
				t.Errorf("error %q does not say %q", res.Error, h.has)
			}
			if h.check != nil {
				h.check(t, res)
			}
		})
		if ok {
			passed++
		}
	}
	t.Logf("hostile inputs: %d of %d classified as expected, without crash or hang", passed, len(rows))
}

// faultClass is the outcome each fault of internal/sim must get.
var faultClass = map[sim.FaultKind]struct {
	kind   string
	status int
}{
	sim.FaultErrorEvent: {contract.ErrServerError, 200},
	sim.FaultTruncate:   {contract.ErrStreamTruncated, 200},
	sim.FaultHTTP500:    {contract.ErrHTTPStatus, 500},
	sim.FaultHTTP429:    {contract.ErrHTTPStatus, 429},
	sim.FaultStall:      {contract.ErrTimeout, 200},
	sim.FaultMalformed:  {contract.ErrStreamMalformed, 200},
	sim.FaultCrash:      {contract.ErrStreamTruncated, 200},
	sim.FaultOverrun:    {contract.ErrStreamMalformed, 200},
}

// TestReliabilityFaultMatrix: every fault the simulator can inject, run
// through its HTTP handler and this client, is classified as its kind says;
// a fault kind added to the simulator without a class here fails.
func TestReliabilityFaultMatrix(t *testing.T) {
	classified := 0
	for _, kind := range sim.FaultKinds {
		want, known := faultClass[kind]
		ok := t.Run(string(kind), func(t *testing.T) {
			if !known {
				t.Fatalf("fault %s has no expected class", kind)
			}
			s, err := sim.New(sim.Options{Engine: engine.Batching, TimeScale: 1000, Seed: 1,
				Faults: []sim.Fault{{Kind: kind, Rate: 1}}, OnCrash: func() {}})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(s.Handler())
			defer srv.Close()
			defer s.Close()
			c := NewClient(nil)
			defer c.Close()
			res := c.Do(context.Background(), Request{BaseURL: srv.URL, Model: s.Model(), Prompt: "fault me", MaxTokens: 20,
				IncludeUsage: true, ExtraBody: map[string]any{"ignore_eos": true}, Timeout: time.Second})
			if res.ErrorKind != want.kind || res.HTTPStatus != want.status {
				t.Fatalf("%q %d %q, want %s %d", res.ErrorKind, res.HTTPStatus, res.Error, want.kind, want.status)
			}
		})
		if ok {
			classified++
		}
	}
	t.Logf("faults classified: %d of %d", classified, len(sim.FaultKinds))
}
