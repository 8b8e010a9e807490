package stream

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/endpoint"
)

// scriptConn is a connection whose reads return the given pieces, one per
// read, then io.EOF; it records what was written to it.
type scriptConn struct {
	mu      sync.Mutex
	pieces  [][]byte
	written bytes.Buffer
	closed  bool
}

func (c *scriptConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.pieces) > 0 && len(c.pieces[0]) == 0 {
		c.pieces = c.pieces[1:]
	}
	if len(c.pieces) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.pieces[0])
	c.pieces[0] = c.pieces[0][n:]
	return n, nil
}

func (c *scriptConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.written.Write(p)
}

func (c *scriptConn) Close() error                     { c.closed = true; return nil }
func (c *scriptConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *scriptConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *scriptConn) SetDeadline(time.Time) error      { return nil }
func (c *scriptConn) SetReadDeadline(time.Time) error  { return nil }
func (c *scriptConn) SetWriteDeadline(time.Time) error { return nil }

// scripted1 sends one request over the own path to a connection that
// answers with pieces, one per read.
func scripted1(t testing.TB, pieces ...[]byte) (Result, *scriptConn) {
	t.Helper()
	conn := &scriptConn{pieces: pieces}
	c := NewClient(nil)
	defer c.Close()
	c.h1 = true
	c.dial = func(context.Context, string, string) (net.Conn, error) { return conn, nil }
	p, err := Prepare(Request{BaseURL: "http://example.test:8000", Model: "m", Prompt: "p", MaxTokens: 8, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c.Send(context.Background(), p), conn
}

// sseBody is an event stream of content "Hello", a finish reason and usage.
const sseBody = roleChunk + `data: {"choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]}` + "\n\n" +
	`data: {"choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":null}]}` + "\r\n\r\n" +
	`data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" + usageChunk + done

// chunkedBody encodes body in chunks of size bytes (with an extension on
// the first), then a last chunk and a trailer.
func chunkedBody(body string, size int) string {
	var b strings.Builder
	for i := 0; i < len(body); i += size {
		piece := body[i:min(i+size, len(body))]
		ext := ""
		if i == 0 {
			ext = ";name=value"
		}
		fmt.Fprintf(&b, "%x%s\r\n%s\r\n", len(piece), ext, piece)
	}
	b.WriteString("0\r\nX-Trailer: yes\r\n\r\n")
	return b.String()
}

// responses are the three framings of the same event stream.
func responses() map[string]string {
	return map[string]string{
		"chunked": "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n" +
			chunkedBody(sseBody, 7),
		"content-length": fmt.Sprintf("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nContent-Length: %d\r\n\r\n%s", len(sseBody), sseBody),
		"close":          "HTTP/1.0 200 OK\nContent-Type: text/event-stream\n\n" + sseBody,
	}
}

func checkHello(t *testing.T, what string, res Result) {
	t.Helper()
	if !res.OK || res.Text != "Hello" || res.FinishReason != "stop" || res.Chunks != 6 || len(res.ChunkTimes) != 2 ||
		res.UsageCompletionTokens == nil || *res.UsageCompletionTokens != 3 {
		t.Fatalf("%s: ok=%v %s %q text %q finish %q chunks %d times %d", what, res.OK, res.ErrorKind, res.Error, res.Text, res.FinishReason, res.Chunks, len(res.ChunkTimes))
	}
}

// Every framing of the response, split in two at every byte and in single
// bytes, reads as the same stream: head, 1xx, chunk sizes, extensions,
// trailers and events cut anywhere.
func TestH1EveryBoundary(t *testing.T) {
	for name, resp := range responses() {
		for i := 1; i < len(resp); i++ {
			res, _ := scripted1(t, []byte(resp[:i]), []byte(resp[i:]))
			checkHello(t, fmt.Sprintf("%s split at %d", name, i), res)
		}
		var bytewise [][]byte
		for i := range len(resp) {
			bytewise = append(bytewise, []byte{resp[i]})
		}
		res, _ := scripted1(t, bytewise...)
		checkHello(t, name+" byte by byte", res)
		// All in one read: every event gets that read's stamp.
		res, conn := scripted1(t, []byte(resp))
		checkHello(t, name+" whole", res)
		if !res.ChunkTimes[0].Equal(res.ChunkTimes[1]) || !res.FirstContent.Equal(res.ChunkTimes[0]) {
			t.Errorf("%s: events of one read stamped %v and %v", name, res.ChunkTimes[0], res.ChunkTimes[1])
		}
		req, err := http.ReadRequest(bufio.NewReader(&conn.written))
		if err != nil {
			t.Fatalf("the request written is not HTTP: %v\n%s", err, conn.written.String())
		}
		body, _ := io.ReadAll(req.Body)
		if req.Method != "POST" || req.URL.Path != endpoint.Default || req.Host != "example.test:8000" ||
			req.Header.Get("Content-Type") != "application/json" || req.Header.Get("Accept") != "text/event-stream" ||
			!strings.Contains(string(body), `"stream":true`) {
			t.Fatalf("request %s %s host %q headers %v body %s", req.Method, req.URL, req.Host, req.Header, body)
		}
	}
}

// The chunked decoder alone: every split of an encoding yields its data,
// and the bytes after its end are handed back.
func TestChunkedDecoderSplits(t *testing.T) {
	data := strings.Repeat("0123456789abcdef", 20)
	enc := chunkedBody(data, 13) + "NEXT"
	for i := 0; i <= len(enc); i++ {
		var ch chunked
		var got []byte
		var rest []byte
		for _, piece := range []string{enc[:i], enc[i:]} {
			p := []byte(piece)
			n, r, err := ch.feed(p)
			if err != nil {
				t.Fatalf("split %d: %v", i, err)
			}
			got = append(got, p[:n]...)
			if ch.done {
				rest = r
				break
			}
		}
		if string(got) != data || !ch.done || (i < len(enc)-4 && string(rest) != "NEXT") {
			t.Fatalf("split %d: %q done=%v rest %q", i, got, ch.done, rest)
		}
	}
}

// Responses that break HTTP end in their class with a clear error, never
// a panic: a head that is not HTTP is the server's connect failure (as
// net/http reports it), a broken chunked encoding is stream_malformed.
func TestH1MalformedResponses(t *testing.T) {
	ok := "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
	hugeHead := [][]byte{[]byte("HTTP/1.1 200 OK\r\nX-Big: ")}
	for range 40 {
		hugeHead = append(hugeHead, bytes.Repeat([]byte("a"), 64<<10))
	}
	for _, tc := range []struct {
		name   string
		pieces [][]byte
		kind   string
		has    string
		status int
	}{
		{"status code not a number", [][]byte{[]byte("HTTP/1.1 2x0 OK\r\n\r\n")}, contract.ErrConnect, "malformed HTTP status code", 0},
		{"HTTP/2 status line", [][]byte{[]byte("HTTP/2 200\r\n\r\n")}, contract.ErrConnect, "malformed HTTP", 0},
		{"another protocol", [][]byte{[]byte("ICY 200 OK\r\n\r\n")}, contract.ErrConnect, "malformed HTTP response", 0},
		{"a binary greeting", [][]byte{{0x16, 0x03, 0x01, 0x00, 0xa5, 0x01}}, contract.ErrConnect, "malformed HTTP response", 0},
		{"header without a colon", [][]byte{[]byte(ok + "Bad header\r\n\r\n")}, contract.ErrConnect, "malformed MIME header", 0},
		{"header continuation line", [][]byte{[]byte(ok + "X: a\r\n b\r\n\r\n")}, contract.ErrConnect, "continuation", 0},
		{"negative Content-Length", [][]byte{[]byte(ok + "Content-Length: -1\r\n\r\n")}, contract.ErrConnect, "bad Content-Length", 0},
		{"two Content-Lengths", [][]byte{[]byte(ok + "Content-Length: 1\r\nContent-Length: 2\r\n\r\nx")}, contract.ErrConnect, "multiple Content-Length", 0},
		{"unknown transfer encoding", [][]byte{[]byte(ok + "Transfer-Encoding: gzip\r\n\r\n")}, contract.ErrConnect, "unsupported transfer encoding", 0},
		{"head cut short", [][]byte{[]byte(ok)}, contract.ErrConnect, "inside the response head", 0},
		{"no answer at all", nil, contract.ErrConnect, "before any answer", 0},
		{"endless 1xx", [][]byte{[]byte(strings.Repeat("HTTP/1.1 100 Continue\r\n\r\n", 6))}, contract.ErrConnect, "too many 1xx", 0},
		{"a head over 1 MiB", hugeHead, contract.ErrConnect, "exceeded 1048576 bytes", 0},
		{"101 switching protocols", [][]byte{[]byte("HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n")}, contract.ErrHTTPStatus, "HTTP 101", 101},
		{"chunk size not hex", [][]byte{[]byte(ok + "Transfer-Encoding: chunked\r\n\r\nzz\r\ndata: x\r\n")}, contract.ErrStreamMalformed, "chunk length", 200},
		{"chunk size of 17 digits", [][]byte{[]byte(ok + "Transfer-Encoding: chunked\r\n\r\n10000000000000000\r\n")}, contract.ErrStreamMalformed, "chunk length too large", 200},
		{"empty chunk size", [][]byte{[]byte(ok + "Transfer-Encoding: chunked\r\n\r\n\r\n")}, contract.ErrStreamMalformed, "chunk length", 200},
		{"no CRLF after a chunk", [][]byte{[]byte(ok + "Transfer-Encoding: chunked\r\n\r\n2\r\n::XX")}, contract.ErrStreamMalformed, "malformed chunked encoding", 200},
		{"endless chunk size line", [][]byte{[]byte(ok + "Transfer-Encoding: chunked\r\n\r\n1"), bytes.Repeat([]byte("0"), 5000)}, contract.ErrStreamMalformed, "chunk length line longer", 200},
		{"chunked body cut short", [][]byte{[]byte(ok + "Transfer-Encoding: chunked\r\n\r\n" + fmt.Sprintf("%x\r\n", len(roleChunk)+10) + roleChunk)}, contract.ErrStreamTruncated, "unexpected EOF", 200},
		{"Content-Length body cut short", [][]byte{[]byte(ok + "Content-Length: 4000\r\n\r\n" + roleChunk)}, contract.ErrStreamTruncated, "unexpected EOF", 200},
		{"close-delimited body without a finish", [][]byte{[]byte("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n" + roleChunk)}, contract.ErrStreamTruncated, "without a finish_reason", 200},
		{"302 with a relative Location", [][]byte{[]byte("HTTP/1.1 302 Found\r\nLocation: /elsewhere\r\nContent-Length: 3\r\n\r\nabc")}, contract.ErrHTTPStatus, "redirect to http://example.test:8000/elsewhere, not followed", 302},
		{"500 with a chunked JSON error", [][]byte{[]byte("HTTP/1.1 500 Internal Server Error\r\nTransfer-Encoding: chunked\r\n\r\n" + chunkedBody(`{"error":{"message":"boom"}}`, 5))}, contract.ErrHTTPStatus, "HTTP 500: boom", 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, _ := scripted1(t, tc.pieces...)
			if res.OK || res.ErrorKind != tc.kind || !strings.Contains(res.Error, tc.has) || res.HTTPStatus != tc.status {
				t.Fatalf("ok=%v %q %d %q, want %s %d naming %q", res.OK, res.ErrorKind, res.HTTPStatus, res.Error, tc.kind, tc.status, tc.has)
			}
		})
	}
}

// Any bytes at all, cut anywhere, end in a known class: no panic, no hang.
func FuzzH1Response(f *testing.F) {
	for _, r := range responses() {
		f.Add([]byte(r), uint16(5))
	}
	f.Add([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n"), uint16(3))
	f.Add([]byte("HTTP/1.1 103 Early\r\n\r\nHTTP/1.1 204 No\r\n\r\n"), uint16(1))
	f.Fuzz(func(t *testing.T, data []byte, step uint16) {
		n := int(step%64) + 1
		var pieces [][]byte
		for i := 0; i < len(data); i += n {
			pieces = append(pieces, bytes.Clone(data[i:min(i+n, len(data))]))
		}
		res, _ := scripted1(t, pieces...)
		if !res.OK && !contract.IsErrorKind(res.ErrorKind) {
			t.Fatalf("unknown kind %q (%s)", res.ErrorKind, res.Error)
		}
	})
}

// rawServer answers every request on each connection with answer (as many
// requests as a connection carries, until answer returns false), counting
// the connections it accepted.
func rawServer(t *testing.T, answer func(conn net.Conn, n int) bool) (base string, accepted *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted = new(atomic.Int64)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() {
				defer conn.Close()
				br := bufio.NewReader(conn)
				for n := 0; ; n++ {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					if !answer(conn, n) {
						return
					}
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String(), accepted
}

// A Content-Length body leaves its connection to the next request; a
// Connection: close answer does not.
func TestH1KeepAliveAndClose(t *testing.T) {
	for _, tc := range []struct {
		name  string
		head  string
		conns int64
	}{
		{"content-length", "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n", 1},
		{"connection close", "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\nContent-Length: %d\r\n\r\n", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base, accepted := rawServer(t, func(conn net.Conn, _ int) bool {
				fmt.Fprintf(conn, tc.head+"%s", len(sseBody), sseBody)
				return !strings.Contains(tc.head, "close")
			})
			c := NewClient(nil)
			defer c.Close()
			for i := range 3 {
				res := c.Do(context.Background(), Request{BaseURL: base, Model: "m", Prompt: "p", MaxTokens: 4, Timeout: 5 * time.Second})
				checkHello(t, fmt.Sprintf("request %d", i), res)
				if res.Retried != "" {
					t.Fatalf("request %d retried: %s", i, res.Retried)
				}
			}
			if n := accepted.Load(); c.h1 && n != tc.conns {
				t.Fatalf("3 requests opened %d connections, want %d", n, tc.conns)
			}
		})
	}
}

// A pooled connection the server closed while it sat idle is not the
// server's failure: the request goes on a fresh connection and says why.
func TestH1StalePooledConnectionIsResent(t *testing.T) {
	srv, opened, closed, requests := idleClosingServer(t)
	c := NewClient(nil)
	defer c.Close()
	if res := c.Do(context.Background(), request(srv)); !res.OK {
		t.Fatalf("first: %s %s", res.ErrorKind, res.Error)
	}
	waitFor(t, "the server to close the pooled connection", func() bool { return closed.Load() == 1 })
	res := c.Do(context.Background(), request(srv))
	if !res.OK {
		t.Fatalf("second: %s %s", res.ErrorKind, res.Error)
	}
	if c.h1 && !strings.Contains(res.Retried, "stale pooled connection") {
		t.Fatalf("retried %q: want the stale pooled connection named", res.Retried)
	}
	if requests.Load() != 2 || opened.Load() != 2 {
		t.Fatalf("%d requests on %d connections, want 2 on 2", requests.Load(), opened.Load())
	}
}

// A server that stalls in the middle of a Content-Length body times the
// request out while streaming, keeping what came; a cancel mid-stream is
// a cancel.
func TestH1StallAndCancelMidStream(t *testing.T) {
	base, _ := rawServer(t, func(conn net.Conn, _ int) bool {
		fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 100000\r\n\r\n%s", roleChunk+content("a"))
		time.Sleep(time.Minute)
		return false
	})
	c := NewClient(nil)
	defer c.Close()
	res := c.Do(context.Background(), Request{BaseURL: base, Model: "m", Prompt: "p", MaxTokens: 4, Timeout: 300 * time.Millisecond})
	if res.ErrorKind != contract.ErrTimeout || !strings.Contains(res.Error, "while streaming") || res.Text != "a" {
		t.Fatalf("%q %q text %q, want a timeout while streaming that keeps %q", res.ErrorKind, res.Error, res.Text, "a")
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() {
		time.Sleep(200 * time.Millisecond)
		cancel(fmt.Errorf("test over"))
	}()
	res = c.Do(ctx, Request{BaseURL: base, Model: "m", Prompt: "p", MaxTokens: 4, Timeout: time.Minute})
	if res.ErrorKind != contract.ErrCanceled || res.Text != "a" {
		t.Fatalf("%q %q text %q, want canceled keeping %q", res.ErrorKind, res.Error, res.Text, "a")
	}
}

// The suite runs once more with net/http as the transport
// (REHEARSE_HTTP=nethttp), so both paths answer to every test.
func TestSuiteOverNetHTTP(t *testing.T) {
	if os.Getenv(httpEnv) != "" {
		t.Skipf("%s=%s: this is the second run", httpEnv, os.Getenv(httpEnv))
	}
	if testing.Short() {
		t.Skip("short: one transport")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^(Test|Fuzz)")
	cmd.Env = append(os.Environ(), httpEnv+"=nethttp")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the suite over net/http failed: %v\n%s", err, out)
	}
}

// feedConn answers a request with a chunked event stream, one content
// event per read (as a server that flushes each token delivers it to a
// reader that keeps up), then the finish.
type feedConn struct {
	scriptConn
	head, event, tail []byte
	left              int // content events still to deliver
	sentHead          bool
}

func (c *feedConn) Read(p []byte) (int, error) {
	switch {
	case !c.sentHead:
		c.sentHead = true
		return copy(p, c.head), nil
	case c.left > 0:
		c.left--
		return copy(p, c.event), nil
	case len(c.tail) > 0:
		n := copy(p, c.tail)
		c.tail = c.tail[n:]
		return n, nil
	}
	return 0, io.EOF
}

func newFeedConn(events int) *feedConn {
	event := `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[{"index":0,"delta":{"content":" token"},"logprobs":null,"finish_reason":null}],"rehearse_sent_ns":1764600000000000000}` + "\n\n"
	tail := finishChunk("length") + done
	return &feedConn{
		head:  []byte("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"),
		event: fmt.Appendf(nil, "%x\r\n%s\r\n", len(event), event),
		tail:  fmt.Appendf(nil, "%x\r\n%s\r\n0\r\n\r\n", len(tail), tail),
		left:  events,
	}
}

// BenchmarkH1Chunk is the own path's cost per streamed content chunk
// without the read system call: chunked framing, SSE, the chunk's JSON
// (a stamped vLLM-shaped chunk) and its stamp, one chunk per read.
// stream: one stream of b.N chunks (the steady state: 0 allocs per
// chunk); requests-of-64: b.N chunks in requests of 64, so that each
// request's own cost (its result, text, connection pool) is included.
func BenchmarkH1Chunk(b *testing.B) {
	run := func(b *testing.B, per int) {
		c := NewClient(nil)
		defer c.Close()
		c.h1 = true
		var conn *feedConn
		c.dial = func(context.Context, string, string) (net.Conn, error) { return conn, nil }
		p, err := Prepare(Request{BaseURL: "http://example.test", Model: "m", Prompt: "p", MaxTokens: per, Timeout: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		var ms0, ms1 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		requests := 0
		b.ResetTimer()
		cpu0 := cpuNow()
		defer func() {
			cpu := cpuNow() - cpu0
			b.StopTimer()
			runtime.ReadMemStats(&ms1)
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/chunk")
			b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/float64(requests), "allocs/request")
		}()
		for left := b.N; left > 0; left -= per {
			requests++
			n := min(per, left)
			c.closeIdle() // each request gets its scripted connection
			conn = newFeedConn(n)
			res := c.Send(context.Background(), p)
			if !res.OK || len(res.ChunkTimes) != n {
				b.Fatalf("%s %s: %d chunks, want %d", res.ErrorKind, res.Error, len(res.ChunkTimes), n)
			}
		}
	}
	b.Run("stream", func(b *testing.B) { run(b, b.N) })
	b.Run("requests-of-64", func(b *testing.B) { run(b, 64) })
}
