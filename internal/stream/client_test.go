package stream

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/contract"
)

// step is one action of a scripted server: write bytes and flush, wait,
// or note the time it reached this step.
type step struct {
	write string
	wait  time.Duration
	mark  *atomic.Int64 // UnixNano
}

func w(s string) step            { return step{write: s} }
func pause(d time.Duration) step { return step{wait: d} }
func mark(at *atomic.Int64) step { return step{mark: at} }
func content(s string) string {
	return fmt.Sprintf(`data: {"choices":[{"index":0,"delta":{"content":%q},"finish_reason":null}]}`+"\n\n", s)
}
func finishChunk(reason string) string {
	return fmt.Sprintf(`data: {"choices":[{"index":0,"delta":{},"finish_reason":%q}]}`+"\n\n", reason)
}

const roleChunk = `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n"
const usageChunk = `data: {"choices":[],"usage":{"prompt_tokens":11,"completion_tokens":3,"total_tokens":14}}` + "\n\n"
const done = "data: [DONE]\n\n"

// scripted serves every request with the same steps as an event stream.
func scripted(t *testing.T, steps ...step) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		rw.Header().Set("Content-Type", "text/event-stream")
		rw.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(rw)
		rc.Flush()
		for _, s := range steps {
			if s.mark != nil {
				s.mark.Store(time.Now().UnixNano())
				continue
			}
			if s.wait > 0 {
				select {
				case <-time.After(s.wait):
				case <-r.Context().Done():
					return
				}
				continue
			}
			if _, err := io.WriteString(rw, s.write); err != nil {
				return
			}
			rc.Flush()
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func request(srv *httptest.Server) Request {
	return Request{BaseURL: srv.URL, Model: "m", Prompt: "hi", MaxTokens: 16, IncludeUsage: true, Timeout: 5 * time.Second}
}

func do(t *testing.T, req Request) Result {
	t.Helper()
	c := NewClient(nil)
	defer c.Close()
	return c.Do(context.Background(), req)
}

func TestOKStream(t *testing.T) {
	srv := scripted(t, w(roleChunk), w(content("Hello")), w(content(", world")), w(finishChunk("length")), w(usageChunk), w(done))
	res := do(t, request(srv))
	if !res.OK || res.ErrorKind != "" {
		t.Fatalf("want ok, got %s: %s", res.ErrorKind, res.Error)
	}
	if res.Text != "Hello, world" || res.FinishReason != "length" || res.HTTPStatus != 200 {
		t.Fatalf("text %q finish %q status %d", res.Text, res.FinishReason, res.HTTPStatus)
	}
	if len(res.ChunkTimes) != 2 || !res.ChunkTimes[0].Equal(res.FirstContent) {
		t.Fatalf("want 2 content chunk times starting at first content, got %v (first %v)", res.ChunkTimes, res.FirstContent)
	}
	if res.UsageCompletionTokens == nil || *res.UsageCompletionTokens != 3 || res.UsagePromptTokens == nil || *res.UsagePromptTokens != 11 {
		t.Fatalf("usage not read: %v %v", res.UsageCompletionTokens, res.UsagePromptTokens)
	}
	if res.Chunks != 6 {
		t.Fatalf("want 6 events counted, got %d", res.Chunks)
	}
	if !(res.Start.Before(res.FirstContent) && !res.End.Before(res.ChunkTimes[1])) {
		t.Fatalf("times out of order: start %v first %v end %v", res.Start, res.FirstContent, res.End)
	}
}

func TestCleanEndAfterFinishReasonWithoutDone(t *testing.T) {
	srv := scripted(t, w(content("a")), w(finishChunk("stop")))
	res := do(t, request(srv))
	if !res.OK {
		t.Fatalf("a clean end after a finish_reason is ok; got %s: %s", res.ErrorKind, res.Error)
	}
}

func TestTTFTIgnoresRoleChunk(t *testing.T) {
	srv := scripted(t, w(roleChunk), pause(300*time.Millisecond), w(content("x")), w(finishChunk("stop")), w(done))
	res := do(t, request(srv))
	if !res.OK {
		t.Fatalf("%s: %s", res.ErrorKind, res.Error)
	}
	if ttft := res.FirstContent.Sub(res.Start); ttft < 300*time.Millisecond {
		t.Fatalf("TTFT %v is shorter than the 300 ms before the first content: the role chunk was counted", ttft)
	}
}

func TestSplitMidEvent(t *testing.T) {
	full := roleChunk + content("Hel") + content("lo") + finishChunk("stop") + usageChunk + done
	full = strings.ReplaceAll(full, "\n", "\r\n")
	var steps []step
	for i := 0; i < len(full); i += 7 {
		steps = append(steps, w(full[i:min(i+7, len(full))]), pause(time.Millisecond))
	}
	res := do(t, request(scripted(t, steps...)))
	if !res.OK || res.Text != "Hello" || len(res.ChunkTimes) != 2 {
		t.Fatalf("got ok=%v %s %q, %d chunks", res.OK, res.Error, res.Text, len(res.ChunkTimes))
	}
}

func TestFailureClasses(t *testing.T) {
	cases := []struct {
		name     string
		steps    []step
		kind     string
		wantText string
		errHas   string
	}{
		{"in-band error then DONE", []step{w(content("par")), w(`data: {"error":{"message":"engine died","type":"internal"}}` + "\n\n"), w(done)}, contract.ErrServerError, "par", "engine died"},
		{"error event", []step{w(content("a")), w("event: error\ndata: {\"message\":\"overloaded\"}\n\n"), w(done)}, contract.ErrServerError, "a", "overloaded"},
		{"end without finish_reason", []step{w(content("a")), w(content("b"))}, contract.ErrStreamTruncated, "ab", "without a finish_reason"},
		{"DONE without finish_reason", []step{w(content("a")), w(done)}, contract.ErrStreamTruncated, "a", "[DONE]"},
		{"malformed data", []step{w(content("a")), w("data: {not json\n\n"), w(finishChunk("stop")), w(done)}, contract.ErrStreamMalformed, "a", "unparseable"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := do(t, request(scripted(t, c.steps...)))
			if res.OK || res.ErrorKind != c.kind {
				t.Fatalf("want %s, got ok=%v %q: %s", c.kind, res.OK, res.ErrorKind, res.Error)
			}
			if res.Text != c.wantText || res.FirstContent.IsZero() {
				t.Fatalf("partial content lost: text %q, first content %v", res.Text, res.FirstContent)
			}
			if !strings.Contains(res.Error, c.errHas) {
				t.Fatalf("error %q does not mention %q", res.Error, c.errHas)
			}
		})
	}
}

func TestHTTPStatus(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "application/json")
		rw.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(rw, `{"error":{"message":"queue full","type":"overloaded"}}`)
	}))
	defer srv.Close()
	res := do(t, request(srv))
	if res.ErrorKind != contract.ErrHTTPStatus || res.HTTPStatus != 503 || res.Error != "HTTP 503: queue full" {
		t.Fatalf("got %q %d %q", res.ErrorKind, res.HTTPStatus, res.Error)
	}
}

func TestJSONInsteadOfStream(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "application/json")
		io.WriteString(rw, `{"choices":[{"message":{"content":"hi"},"finish_reason":"stop"}]}`)
	}))
	defer srv.Close()
	res := do(t, request(srv))
	if res.ErrorKind != contract.ErrStreamMalformed || !strings.Contains(res.Error, "not an event stream") {
		t.Fatalf("got %q %q", res.ErrorKind, res.Error)
	}
}

func TestConnectRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	res := do(t, Request{BaseURL: "http://" + addr, Model: "m", Prompt: "p", MaxTokens: 1, Timeout: 5 * time.Second})
	if res.ErrorKind != contract.ErrConnect || !strings.Contains(res.Error, "refused") {
		t.Fatalf("got %q %q", res.ErrorKind, res.Error)
	}
}

func TestStallBeyondTimeoutKeepsPartial(t *testing.T) {
	srv := scripted(t, w(roleChunk), w(content("early")), pause(10*time.Second), w(finishChunk("stop")), w(done))
	req := request(srv)
	req.Timeout = 300 * time.Millisecond
	res := do(t, req)
	if res.ErrorKind != contract.ErrTimeout {
		t.Fatalf("want timeout, got %q %q", res.ErrorKind, res.Error)
	}
	if res.Text != "early" || res.FirstContent.IsZero() || len(res.ChunkTimes) != 1 {
		t.Fatalf("partial lost: %q first %v chunks %d", res.Text, res.FirstContent, len(res.ChunkTimes))
	}
	if e := res.End.Sub(res.Start); e < 300*time.Millisecond || e > 3*time.Second {
		t.Fatalf("end %v after start, want about the 300 ms timeout", e)
	}
}

func TestTimeoutBeforeHeaders(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // lets the server notice the client leaving
		select {
		case <-time.After(10 * time.Second):
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	req := request(srv)
	req.Timeout = 200 * time.Millisecond
	res := do(t, req)
	if res.ErrorKind != contract.ErrTimeout || !res.FirstContent.IsZero() {
		t.Fatalf("got %q %q", res.ErrorKind, res.Error)
	}
}

func TestCanceledKeepsPartial(t *testing.T) {
	srv := scripted(t, w(content("so far")), pause(10*time.Second), w(finishChunk("stop")))
	ctx, cancel := context.WithCancelCause(context.Background())
	c := NewClient(nil)
	defer c.Close()
	go func() {
		time.Sleep(200 * time.Millisecond)
		cancel(fmt.Errorf("interrupt"))
	}()
	res := c.Do(ctx, request(srv))
	if res.ErrorKind != contract.ErrCanceled || res.Text != "so far" || res.FirstContent.IsZero() {
		t.Fatalf("got %q %q text %q", res.ErrorKind, res.Error, res.Text)
	}
	if !strings.Contains(res.Error, "interrupt") {
		t.Fatalf("cancel cause missing from %q", res.Error)
	}
}

func TestConnectionDroppedMidStream(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "text/event-stream")
		rw.WriteHeader(200)
		io.WriteString(rw, content("half"))
		http.NewResponseController(rw).Flush()
		conn, _, err := http.NewResponseController(rw).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	defer srv.Close()
	res := do(t, request(srv))
	if res.ErrorKind != contract.ErrStreamTruncated || res.Text != "half" {
		t.Fatalf("got %q %q text %q", res.ErrorKind, res.Error, res.Text)
	}
}

func TestRequestBody(t *testing.T) {
	var got map[string]any
	var auth string
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/custom/chat" || r.Method != http.MethodPost {
			t.Errorf("got %s %s", r.Method, r.URL.Path)
		}
		json.NewDecoder(r.Body).Decode(&got)
		auth = r.Header.Get("Authorization")
		rw.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(rw, content("x")+finishChunk("stop")+done)
	}))
	defer srv.Close()
	req := Request{BaseURL: srv.URL + "/", Endpoint: "/custom/chat", Model: "qwen", APIKey: "sk-1", Prompt: "Say hi",
		MaxTokens: 128, IncludeUsage: true, ExtraBody: map[string]any{"ignore_eos": true, "min_tokens": 128}}
	if res := do(t, req); !res.OK {
		t.Fatalf("%s %s", res.ErrorKind, res.Error)
	}
	want := `{"ignore_eos":true,"max_tokens":128,"messages":[{"content":"Say hi","role":"user"}],"min_tokens":128,"model":"qwen","stream":true,"stream_options":{"include_usage":true},"temperature":0}`
	if b, _ := json.Marshal(got); string(b) != want {
		t.Fatalf("body\n got %s\nwant %s", b, want)
	}
	if auth != "Bearer sk-1" {
		t.Fatalf("authorization %q", auth)
	}
	req.IncludeUsage = false
	p, err := Prepare(req)
	if err != nil || strings.Contains(string(p.Body()), "stream_options") {
		t.Fatalf("stream_options sent with IncludeUsage off: %s %v", p.Body(), err)
	}
}

func TestPrepareRejectsBadInput(t *testing.T) {
	for _, req := range []Request{
		{BaseURL: "localhost:8000"},
		{BaseURL: "ftp://x"},
		{BaseURL: "http://x", Endpoint: "v1/chat"},
		{BaseURL: "http://x", ExtraBody: map[string]any{"f": func() {}}},
	} {
		if _, err := Prepare(req); err == nil {
			t.Errorf("%+v: no error", req)
		}
	}
}

func TestErrorMessage(t *testing.T) {
	cases := map[string]string{
		`{"error":{"message":"bad model"}}`: "bad model",
		`{"error":"plain"}`:                 "plain",
		`{"message":"m"}`:                   "m",
		`{"detail":"Not Found"}`:            "Not Found",
		`{"detail":[{"loc":["body"]}]}`:     `[{"loc":["body"]}]`,
		"<html>\n  Bad   Gateway\n</html>":  "<html> Bad Gateway </html>",
		strings.Repeat("é", 400):            strings.Repeat("é", 150) + "…",
	}
	for in, want := range cases {
		if got := errorMessage([]byte(in)); got != want {
			t.Errorf("errorMessage(%.40q) = %q, want %q", in, got, want)
		}
	}
}

// TestWarmPreDialsConnections checks the start barrier's connection side:
// after Warm(n), n concurrent requests open no connection of their own.
func TestWarmPreDialsConnections(t *testing.T) {
	var opened atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		rw.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(rw, content("x")+finishChunk("stop")+done)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c := NewClient(nil)
	defer c.Close()
	const n = 16
	if err := c.Warm(context.Background(), srv.URL, n); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for opened.Load() < n && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	before := opened.Load()
	if before != n {
		t.Fatalf("Warm(%d) opened %d connections", n, before)
	}
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if res := c.Do(context.Background(), request(srv)); !res.OK {
				failed.Add(1)
			}
		}()
	}
	wg.Wait()
	if failed.Load() != 0 || opened.Load() != n {
		t.Fatalf("%d failed; %d connections opened during the wave", failed.Load(), opened.Load()-before)
	}
}

// TestManySlowStreams drives 256 concurrent streams against a server that
// sends a chunk every 20 ms; every stream must complete with every chunk.
func TestManySlowStreams(t *testing.T) {
	const streams, chunks = 256, 10
	steps := []step{w(roleChunk)}
	for i := range chunks {
		steps = append(steps, pause(20*time.Millisecond), w(content(fmt.Sprintf("t%d ", i))))
	}
	steps = append(steps, w(finishChunk("length")), w(usageChunk), w(done))
	srv := scripted(t, steps...)
	c := NewClient(nil)
	defer c.Close()
	if err := c.Warm(context.Background(), srv.URL, streams); err != nil {
		t.Fatal(err)
	}
	results := make([]Result, streams)
	var wg sync.WaitGroup
	for i := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := request(srv)
			req.Timeout = 20 * time.Second
			results[i] = c.Do(context.Background(), req)
		}()
	}
	wg.Wait()
	for i, r := range results {
		if !r.OK || len(r.ChunkTimes) != chunks {
			t.Fatalf("stream %d: ok=%v %s %s, %d chunks", i, r.OK, r.ErrorKind, r.Error, len(r.ChunkTimes))
		}
	}
}

func TestServedModel(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/models" || r.Header.Get("Authorization") != "Bearer k" {
			rw.WriteHeader(http.StatusUnauthorized)
			io.WriteString(rw, `{"error":{"message":"no key"}}`)
			return
		}
		io.WriteString(rw, `{"object":"list","data":[{"id":"Qwen/Qwen2.5-1.5B-Instruct","object":"model"}]}`)
	}))
	defer srv.Close()
	c := NewClient(nil)
	defer c.Close()
	m, err := c.FirstModel(context.Background(), srv.URL+"/", "k")
	id := m.ID
	if err != nil || id != "Qwen/Qwen2.5-1.5B-Instruct" {
		t.Fatalf("%q %v", id, err)
	}
	if _, err := c.FirstModel(context.Background(), srv.URL, ""); err == nil || !strings.Contains(err.Error(), "HTTP 401: no key") {
		t.Fatalf("error %v", err)
	}
}

// TestConnectionReused checks that a finished stream leaves its connection
// to the next request (no dial inside the next request's TTFT).
func TestConnectionReused(t *testing.T) {
	var opened atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		rw.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(rw, content("x")+finishChunk("stop"))
		http.NewResponseController(rw).Flush()
		io.WriteString(rw, done)
		http.NewResponseController(rw).Flush()
		time.Sleep(5 * time.Millisecond) // the end of the body arrives on its own
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c := NewClient(nil)
	defer c.Close()
	for i := range 5 {
		if res := c.Do(context.Background(), request(srv)); !res.OK {
			t.Fatalf("request %d: %s %s", i, res.ErrorKind, res.Error)
		}
	}
	if n := opened.Load(); n != 1 {
		t.Fatalf("5 sequential requests opened %d connections", n)
	}
}

// TestSendAtHoldsRequestUntilRelease checks the barrier: the connection is
// set up and armed reported before the release, yet the server sees no
// byte of the request until the release, and Start is the release.
func TestSendAtHoldsRequestUntilRelease(t *testing.T) {
	var arrived atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		arrived.Store(time.Now().UnixNano())
		io.Copy(io.Discard, r.Body)
		rw.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(rw, content("x")+finishChunk("stop")+done)
	}))
	defer srv.Close()
	c := NewClient(nil)
	defer c.Close()
	p, err := Prepare(request(srv))
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	armed := make(chan struct{})
	out := make(chan Result)
	go func() { out <- c.SendAt(context.Background(), p, release, func() { close(armed) }) }()
	<-armed
	time.Sleep(100 * time.Millisecond)
	if arrived.Load() != 0 {
		t.Fatal("the server saw the request before its release")
	}
	released := time.Now()
	close(release)
	res := <-out
	if !res.OK {
		t.Fatalf("%s %s", res.ErrorKind, res.Error)
	}
	if res.Start.Before(released) || res.Start.Sub(released) > 50*time.Millisecond {
		t.Fatalf("start %v after release", res.Start.Sub(released))
	}
	if a := time.Unix(0, arrived.Load()); a.Before(released) {
		t.Fatalf("request arrived %v before the release", released.Sub(a))
	}
}

func TestSendAtFailureBeforeReleaseIsStampedAtRelease(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	p, _ := Prepare(Request{BaseURL: "http://" + addr, Model: "m", Prompt: "p", MaxTokens: 1, Timeout: time.Second})
	c := NewClient(nil)
	defer c.Close()
	release := make(chan struct{})
	armed := make(chan struct{})
	out := make(chan Result)
	go func() { out <- c.SendAt(context.Background(), p, release, func() { close(armed) }) }()
	<-armed
	time.Sleep(20 * time.Millisecond)
	released := time.Now()
	close(release)
	res := <-out
	if res.ErrorKind != contract.ErrConnect || res.Start.Before(released) || !res.End.Equal(res.Start) {
		t.Fatalf("%q %q start %v end %v (release %v)", res.ErrorKind, res.Error, res.Start, res.End, released)
	}
}

func TestHTTPSWithWarmAndRelease(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		rw.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(rw, content("secure")+finishChunk("stop")+done)
	}))
	defer srv.Close()
	c := NewClient(srv.Client().Transport.(*http.Transport).TLSClientConfig)
	defer c.Close()
	if err := c.Warm(context.Background(), srv.URL, 2); err != nil {
		t.Fatal(err)
	}
	p, err := Prepare(request(srv))
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var armed sync.WaitGroup
	armed.Add(2)
	out := make(chan Result, 2)
	for range 2 {
		go func() { out <- c.SendAt(context.Background(), p, release, armed.Done) }()
	}
	armed.Wait()
	close(release)
	for range 2 {
		if res := <-out; !res.OK || res.Text != "secure" {
			t.Fatalf("%s %s %q", res.ErrorKind, res.Error, res.Text)
		}
	}
}

// A server that answers before the request is sent fails the request at
// its release, with the server's status and message, like any other
// failure before the release.
func TestSendAtAnswerBeforeReleaseIsStampedAtRelease(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	answer := make(chan struct{})
	answered := make(chan struct{})
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		<-answer
		body := `{"error":{"message":"warming"}}`
		fmt.Fprintf(conn, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		close(answered)
		io.Copy(io.Discard, conn)
	}()
	p, _ := Prepare(Request{BaseURL: "http://" + ln.Addr().String(), Model: "m", Prompt: "p", MaxTokens: 1})
	c := NewClient(nil)
	defer c.Close()
	release := make(chan struct{})
	armed := make(chan struct{})
	out := make(chan Result, 1)
	go func() { out <- c.SendAt(context.Background(), p, release, func() { close(armed) }) }()
	<-armed
	// Give the transport time to hand the request to its reader: an answer
	// before that fails as connect instead (also at the release).
	time.Sleep(20 * time.Millisecond)
	close(answer)
	<-answered
	select {
	case res := <-out:
		t.Fatalf("returned before its release: %q %q", res.ErrorKind, res.Error)
	case <-time.After(100 * time.Millisecond):
	}
	released := time.Now()
	close(release)
	res := <-out
	if res.Start.Before(released) || !res.End.Equal(res.Start) {
		t.Fatalf("%q %q start %v end %v (release %v)", res.ErrorKind, res.Error, res.Start, res.End, released)
	}
	if res.ErrorKind != contract.ErrConnect && (res.ErrorKind != contract.ErrHTTPStatus || res.HTTPStatus != 503 || res.Error != "HTTP 503: warming") {
		t.Fatalf("%q %d %q", res.ErrorKind, res.HTTPStatus, res.Error)
	}
}

// A server that accepts the connection and never answers the TLS handshake
// fails the request (and Warm) as connect once the handshake timeout passes.
func TestTLSHandshakeTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			defer conn.Close()
		}
	}()
	c := NewClient(nil)
	defer c.Close()
	c.tr.TLSHandshakeTimeout = 50 * time.Millisecond
	base := "https://" + ln.Addr().String()
	if err := c.Warm(context.Background(), base, 2); err == nil || !strings.Contains(err.Error(), "TLS handshake") {
		t.Fatalf("warm: %v", err)
	}
	res := c.Do(context.Background(), Request{BaseURL: base, Model: "m", Prompt: "p", MaxTokens: 1})
	if res.ErrorKind != contract.ErrConnect || !strings.Contains(res.Error, "TLS handshake") {
		t.Fatalf("%q %q", res.ErrorKind, res.Error)
	}
}
