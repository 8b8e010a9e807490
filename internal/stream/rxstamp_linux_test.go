package stream

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// stampedPair is a loopback connection dialed as the client dials (receive
// stamps on) and the server's end of it, both closed when the test ends.
func stampedPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		s, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- s
	}()
	client = dialStamped(t, ln.Addr().String())
	server, ok := <-accepted
	if !ok {
		t.Fatal("no connection accepted")
	}
	t.Cleanup(func() { server.Close() })
	return client, server
}

// dialStamped dials addr as the client does, receive stamps on.
func dialStamped(t *testing.T, addr string) net.Conn {
	t.Helper()
	c := NewClient(nil)
	t.Cleanup(func() { c.Close() })
	conn, err := c.dialer.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// stampsOn waits until the kernel stamps what sockets receive, and keeps
// it so for the test: it turns receive stamps on only a moment after the
// first socket of the host asks (the switch is a deferred static key), and
// off again when the last such socket closes.
func stampsOn(t *testing.T) {
	t.Helper()
	conn, s := stampedPair(t)
	rx := newRxReader(conn)
	defer rx.release()
	buf := make([]byte, 8)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		s.Write([]byte{1})
		if _, _, err := rx.read(buf); err != nil {
			t.Fatal(err)
		}
		if rx.stamped {
			return
		}
	}
	t.Fatal("the kernel gives no receive stamps (SO_TIMESTAMPNS) in 5 s")
}

// A read's stamp is when its bytes reached the host, not when the client
// got round to reading them: bytes written, then read 200 ms later, are
// stamped within the write.
func TestReadStampIsArrivalNotRead(t *testing.T) {
	stampsOn(t)
	conn, s := stampedPair(t)
	t0 := time.Now()
	s.Write([]byte("hello"))
	w := [2]time.Time{t0, time.Now()}
	time.Sleep(200 * time.Millisecond)
	rx := newRxReader(conn)
	defer rx.release()
	readAt := time.Now()
	buf := make([]byte, 64)
	n, at, err := rx.read(buf)
	if err != nil || n != 5 {
		t.Fatalf("read %d, %v", n, err)
	}
	if at.Before(w[0]) || at.After(w[1].Add(50*time.Millisecond)) {
		t.Fatalf("stamped %v after the write began and %v after the read began; the write took %v", at.Sub(w[0]), at.Sub(readAt), w[1].Sub(w[0]))
	}
}

// A client that reads late gets the kernel's merged stamp: three events
// written 150 ms apart and read together long after are stamped with the
// last one's arrival, never before any event's own write, and long before
// the read.
func TestLateReadCarriesTheLastArrival(t *testing.T) {
	stampsOn(t)
	sent := make(chan time.Time, 3)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for i := range 3 {
			if i > 0 {
				time.Sleep(150 * time.Millisecond)
			}
			sent <- time.Now()
			fmt.Fprintf(w, "data: %d\n\n", i)
			rc.Flush()
		}
	}))
	defer srv.Close()
	conn := dialStamped(t, strings.TrimPrefix(srv.URL, "http://"))
	fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	var sends []time.Time
	for range 3 {
		sends = append(sends, <-sent)
	}
	time.Sleep(200 * time.Millisecond) // all three are in the socket
	rx := newRxReader(conn)
	defer rx.release()
	readAt := time.Now()
	hr := readResponseHead(rx, make([]byte, 4096), nil)
	if hr.err != nil {
		t.Fatal(hr.err)
	}
	body := newH1Body(rx, hr.head, hr)
	defer body.release()
	var dec Decoder
	var stamps []time.Time
	buf := make([]byte, 4096)
	for len(stamps) < 3 {
		n, err := body.Read(buf)
		at := body.readTime()
		dec.Feed(buf[:n], func(Event) { stamps = append(stamps, at) })
		if err != nil && (err != io.EOF || len(stamps) < 3) {
			t.Fatalf("after %d events: %v", len(stamps), err)
		}
	}
	for i, at := range stamps {
		if at.Before(sends[i]) || at.Before(sends[2]) || at.After(readAt.Add(-100*time.Millisecond)) {
			t.Errorf("event %d stamped %v after its write, %v after the last write, %v after the read began", i, at.Sub(sends[i]), at.Sub(sends[2]), at.Sub(readAt))
		}
	}
}

// A stamped read allocates nothing: it runs once per streamed chunk.
func TestStampedReadDoesNotAllocate(t *testing.T) {
	conn, s := stampedPair(t)
	go func() {
		chunk := make([]byte, 200)
		for range 2000 {
			if _, err := s.Write(chunk); err != nil {
				return
			}
		}
	}()
	rx := newRxReader(conn)
	defer rx.release()
	buf := make([]byte, 200)
	if allocs := testing.AllocsPerRun(1000, func() {
		if _, _, err := rx.read(buf); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Fatalf("%v allocations per read", allocs)
	}
}
