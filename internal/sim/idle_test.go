package sim

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/sim/engine"
)

// With an idle timeout the simulator closes a connection that sends no
// request, and one kept alive after a response, as uvicorn does.
func TestIdleTimeoutClosesIdleConnections(t *testing.T) {
	s, err := New(Options{Engine: engine.Batching, TimeScale: 1000, IdleTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ts := httptest.NewUnstartedServer(nil)
	ts.Config = s.HTTPServer(nil)
	ts.Start()
	defer ts.Close()

	closedWithin := func(conn net.Conn, r *bufio.Reader) {
		t.Helper()
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := r.ReadByte(); !errors.Is(err, io.EOF) {
			t.Fatalf("read on an idle connection: %v, want EOF (closed by the server)", err)
		}
	}
	fresh, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	closedWithin(fresh, bufio.NewReader(fresh))

	kept, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer kept.Close()
	io.WriteString(kept, "GET /health HTTP/1.1\r\nHost: sim\r\n\r\n")
	r := bufio.NewReader(kept)
	resp, err := http.ReadResponse(r, nil)
	if err != nil || resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("/health: %v %v", resp, err)
	}
	io.Copy(io.Discard, resp.Body)
	closedWithin(kept, r)

	if _, err := New(Options{IdleTimeout: -time.Second}); err == nil {
		t.Fatal("a negative idle timeout was accepted")
	}
}
