package stream

import (
	"bufio"
	"context"
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

// idleClosingServer closes a connection that has sent no request for
// 100 ms (Go's ReadHeaderTimeout and IdleTimeout, as uvicorn closes idle
// ones after 5 s), and counts the connections it opened and closed.
func idleClosingServer(t *testing.T) (srv *httptest.Server, opened, closed, requests *atomic.Int64) {
	t.Helper()
	opened, closed, requests = new(atomic.Int64), new(atomic.Int64), new(atomic.Int64)
	srv = httptest.NewUnstartedServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		io.Copy(io.Discard, r.Body)
		rw.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(rw, content("x")+finishChunk("stop")+done)
	}))
	srv.Config.ReadHeaderTimeout = 100 * time.Millisecond
	srv.Config.IdleTimeout = 100 * time.Millisecond
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			opened.Add(1)
		case http.StateClosed:
			closed.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, opened, closed, requests
}

// waitFor polls cond for up to 10 s: an event the test needs to have
// happened, not a bound on how fast it happens.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
	}
}

// Pre-dialed connections the server has since closed are not used: every
// request of the wave succeeds.
func TestStalePreDialedConnectionsAreNotUsed(t *testing.T) {
	srv, _, closed, _ := idleClosingServer(t)
	c := NewClient(nil)
	defer c.Close()
	const n = 8
	if err := c.Warm(context.Background(), srv.URL, n); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the server to close the idle connections", func() bool { return closed.Load() == n })
	var wg sync.WaitGroup
	results := make([]Result, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = c.Do(context.Background(), request(srv))
		}()
	}
	wg.Wait()
	for i, r := range results {
		if !r.OK {
			t.Errorf("request %d: %s: %s", i, r.ErrorKind, r.Error)
		}
	}
}

// A connection that passed the check when the request took it and was
// closed by the server before the release has carried no byte of the
// request: the request goes on a fresh connection and says why.
func TestStaleConnectionIsResentOnAFreshOne(t *testing.T) {
	srv, opened, closed, requests := idleClosingServer(t)
	c := NewClient(nil)
	defer c.Close()
	if err := c.Warm(context.Background(), srv.URL, 1); err != nil {
		t.Fatal(err)
	}
	p, err := Prepare(request(srv))
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	armed := make(chan struct{})
	out := make(chan Result)
	go func() { out <- c.SendAt(context.Background(), p, release, func() { close(armed) }) }()
	<-armed
	waitFor(t, "the server to close the armed connection", func() bool { return closed.Load() == 1 })
	close(release)
	res := <-out
	if !res.OK {
		t.Fatalf("%s: %s", res.ErrorKind, res.Error)
	}
	if !strings.Contains(res.Retried, "stale") && !strings.Contains(res.Retried, "before the request was written") {
		t.Fatalf("retried %q: want why the first connection was left", res.Retried)
	}
	t.Logf("retried: %s", res.Retried)
	if opened.Load() != 2 || requests.Load() != 1 {
		t.Fatalf("%d connections, %d requests seen by the server: want 2 and 1", opened.Load(), requests.Load())
	}
}

// A request whose bytes were written is never sent again: a server that
// reads it and hangs up has failed it.
func TestNoResendOnceTheRequestWasWritten(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted, read atomic.Int64
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() {
				defer conn.Close()
				if req, err := http.ReadRequest(bufio.NewReader(conn)); err == nil {
					io.Copy(io.Discard, req.Body)
					read.Add(1)
				}
			}()
		}
	}()
	c := NewClient(nil)
	defer c.Close()
	base := "http://" + ln.Addr().String()
	if err := c.Warm(context.Background(), base, 1); err != nil {
		t.Fatal(err)
	}
	res := c.Do(context.Background(), Request{BaseURL: base, Model: "m", Prompt: "p", MaxTokens: 1, Timeout: 5 * time.Second})
	if res.OK || res.ErrorKind != contract.ErrConnect || res.Retried != "" {
		t.Fatalf("%q %q retried %q: want the server's connect failure, not resent", res.ErrorKind, res.Error, res.Retried)
	}
	if accepted.Load() != 1 || read.Load() != 1 {
		t.Fatalf("%d connections, %d requests: the request was sent again", accepted.Load(), read.Load())
	}
}

// checkAlive tells an open connection from one the server closed or wrote
// to unasked, plain and TLS (whose socket may hold session tickets the
// server sent after the handshake: not a sign of staleness).
func TestCheckAlive(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- conn
		}
	}()
	dial := func() (client, server net.Conn) {
		client, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { client.Close() })
		return client, <-accepted
	}

	open, srv := dial()
	if err := checkAlive(open); err != nil {
		t.Fatalf("open connection: %v", err)
	}
	srv.Close()
	waitFor(t, "the close to be seen", func() bool { return checkAlive(open) != nil })
	if err := checkAlive(open); !strings.Contains(err.Error(), "closed by the server") {
		t.Fatalf("closed connection: %v", err)
	}

	chatty, srv := dial()
	defer srv.Close()
	srv.Write([]byte("HTTP/1.1 408 Request Timeout\r\n\r\n"))
	waitFor(t, "the unsolicited bytes to be seen", func() bool { return checkAlive(chatty) != nil })
	if err := checkAlive(chatty); !strings.Contains(err.Error(), "nobody asked for") {
		t.Fatalf("unsolicited bytes: %v", err)
	}
	open.Close()
	if err := checkAlive(open); err == nil {
		t.Fatal("a connection closed here passed")
	}

	var tlsClosed atomic.Int64
	tsrv := httptest.NewUnstartedServer(http.NotFoundHandler())
	tsrv.Config.ReadHeaderTimeout = 300 * time.Millisecond
	tsrv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			tlsClosed.Add(1)
		}
	}
	tsrv.StartTLS()
	defer tsrv.Close()
	c := NewClient(tsrv.Client().Transport.(*http.Transport).TLSClientConfig)
	defer c.Close()
	tc, err := c.handshake(context.Background(), "tcp", tsrv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	if err := checkAlive(tc); err != nil {
		t.Fatalf("open TLS connection: %v", err)
	}
	waitFor(t, "the server to close the TLS connection", func() bool { return tlsClosed.Load() == 1 })
	waitFor(t, "the TLS close to be seen", func() bool { return checkAlive(tc) != nil })
}

// resetFirstListener hands the first connection it accepts to no server:
// after a while it closes it with the request unread (SO_LINGER 0, as a
// kernel does for a socket closed with bytes in its buffer: a reset), the
// way a server's idle timeout can fire just as a request arrives. Later
// connections go to the server.
type resetFirstListener struct {
	net.Listener
	once  sync.Once
	after time.Duration
}

func (l *resetFirstListener) Accept() (net.Conn, error) {
	for {
		conn, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		first := false
		l.once.Do(func() { first = true })
		if !first {
			return conn, nil
		}
		go func() {
			time.Sleep(l.after)
			conn.(*net.TCPConn).SetLinger(0)
			conn.Close()
		}()
	}
}

// A connection that sat unused and is reset before any answer has carried
// the request to no server: a reset with nothing read means the server's
// socket closed with the request unread in it. The request goes on a fresh
// connection and says why; whether the reset came before or after the
// write, the outcome is the same.
func TestResetBeforeAnyAnswerIsResentOnAFreshOne(t *testing.T) {
	var requests atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		io.Copy(io.Discard, r.Body)
		rw.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(rw, content("x")+finishChunk("stop")+done)
	}))
	srv.Listener = &resetFirstListener{Listener: srv.Listener, after: 300 * time.Millisecond}
	srv.Start()
	defer srv.Close()
	c := NewClient(nil)
	defer c.Close()
	if err := c.Warm(context.Background(), srv.URL, 1); err != nil {
		t.Fatal(err)
	}
	res := c.Do(context.Background(), request(srv))
	if !res.OK {
		t.Fatalf("%s: %s (retried %q)", res.ErrorKind, res.Error, res.Retried)
	}
	if res.Retried == "" {
		t.Fatal("the request went on the connection that was reset, yet retried is empty")
	}
	t.Logf("retried: %s", res.Retried)
	if requests.Load() != 1 {
		t.Fatalf("%d requests seen by the server, want 1", requests.Load())
	}
}
