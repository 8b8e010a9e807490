package coordinate

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

const testToken = "t0ken-of-the-rehearsal"

// serve runs s on a loopback listener (wrapped by wrap, when set) with
// Serve, as rehearse coordinate does.
func serve(t *testing.T, s *Server, wrap func(net.Listener) net.Listener) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if wrap != nil {
		ln = wrap(ln)
	}
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	return "http://" + addr
}

// post sends body to url+path with the token tok ("" none) and returns
// the status.
func post(t *testing.T, method, url, tok, body string) int {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// bothWorkers runs workers 0 and 1 of 2 through the barrier of wave and
// reports done; it fails the test unless both are released at one
// instant.
func bothWorkers(t *testing.T, url, digest string, wave int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a bound against a hang, not a timing
	defer cancel()
	stamps := make([]string, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			c := &Client{URL: url, Worker: i, Count: 2, Digest: digest, Token: testToken}
			if errs[i] = c.Measure(ctx, 2); errs[i] != nil {
				return
			}
			rel, err := c.Release(ctx, wave)
			stamps[i], errs[i] = rel.Stamp, err
			if err == nil {
				errs[i] = c.Done(ctx)
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("real worker %d: %v", i, err)
		}
	}
	if stamps[0] != stamps[1] {
		t.Fatalf("released at %s and %s", stamps[0], stamps[1])
	}
}

// TestRequestsWithoutTheTokenChangeNothing (issue 28 row 4): requests with
// no token or a wrong one, on every path, are refused with 401 and change
// nothing (no digest, no arrival, no done); then the real workers, with the
// token, go through, and a worker without it is told so.
func TestRequestsWithoutTheTokenChangeNothing(t *testing.T) {
	s := &Server{Workers: 2, Token: testToken, Timeout: time.Minute}
	url := serve(t, s, nil)
	barrier := `{"worker":0,"count":2,"wave":0,"plan_digest":"evil"}`
	for _, tok := range []string{"", "wrong", testToken + "x", strings.ToUpper(testToken)} {
		for _, r := range []struct{ method, path, body string }{
			{http.MethodPost, BarrierPath, barrier},
			{http.MethodPost, DonePath, `{"worker":0}`},
			{http.MethodPost, DonePath, `{"worker":1}`},
			{http.MethodGet, TimePath, ""},
		} {
			if code := post(t, r.method, url+r.path, tok, r.body); code != http.StatusUnauthorized {
				t.Errorf("%s %s with token %q: HTTP %d, want 401", r.method, r.path, tok, code)
			}
		}
	}
	if d, a := s.Digest(), s.Arrived(0); d != "" || len(a) > 0 {
		t.Fatalf("after refused requests: digest %q, arrived %v; want neither", d, a)
	}
	select {
	case <-s.Done():
		t.Fatal("an unauthenticated /v1/done ended the coordinator")
	default:
	}
	err := (&Client{URL: url, Worker: 0, Count: 2, Digest: "real"}).Measure(context.Background(), 1)
	if !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), TokenEnv) {
		t.Errorf("a worker without the token: %v, want ErrUnauthorized naming %s", err, TokenEnv)
	}
	bothWorkers(t, url, "real", 0)
	select {
	case <-s.Done():
	default:
		t.Error("both real workers reported done, but the coordinator is not done")
	}
}

// TestRefusedBarrierRequestsSetNoDigest (issue 28 row 4): a barrier
// request refused for any reason (bad start_at, wave, count, worker, JSON,
// method, size) sets no plan digest and no arrival; the real workers then
// go through.
func TestRefusedBarrierRequestsSetNoDigest(t *testing.T) {
	s := &Server{Workers: 2, Token: testToken, Timeout: time.Minute}
	url := serve(t, s, nil)
	for _, r := range []struct{ method, body string }{
		{http.MethodPost, `{"worker":0,"count":2,"wave":0,"plan_digest":"evil","start_at":"soon"}`},
		{http.MethodPost, `{"worker":0,"count":2,"wave":-1,"plan_digest":"evil"}`},
		{http.MethodPost, `{"worker":0,"count":3,"wave":0,"plan_digest":"evil"}`},
		{http.MethodPost, `{"worker":7,"count":2,"wave":0,"plan_digest":"evil"}`},
		{http.MethodPost, `{"worker":0,"count":2,"wave":0}`},
		{http.MethodPost, `{"worker":0,"count":2,"wave":0,"plan_digest":"evil","x":1}`},
		{http.MethodPost, `{"worker":0,"count":2,"wave":0,"plan_digest":"evil"}{"worker":1}`},
		{http.MethodPost, `{"worker":0,"count":2,"wave":0,"plan_digest":"` + strings.Repeat("e", maxBody) + `"}`},
		{http.MethodPut, `{"worker":0,"count":2,"wave":0,"plan_digest":"evil"}`},
	} {
		if code := post(t, r.method, url+BarrierPath, testToken, r.body); code == http.StatusOK {
			t.Errorf("%s %.80s: accepted", r.method, r.body)
		}
		if d, a := s.Digest(), s.Arrived(0); d != "" || len(a) > 0 {
			t.Fatalf("%s %.80s: refused, but it set digest %q, arrived %v", r.method, r.body, short(d), a)
		}
	}
	bothWorkers(t, url, "real", 0)
}

// TestDoneWithoutTheTokenDoesNotEndIt (issue 28 row 4): POST /v1/done for
// every worker without the token leaves the coordinator running.
func TestDoneWithoutTheTokenDoesNotEndIt(t *testing.T) {
	s := &Server{Workers: 2, Token: testToken}
	url := serve(t, s, nil)
	for i := range 2 {
		if err := (&Client{URL: url, Worker: i, Count: 2}).Done(context.Background()); !errors.Is(err, ErrUnauthorized) {
			t.Errorf("done of worker %d without the token: %v, want ErrUnauthorized", i, err)
		}
	}
	select {
	case <-s.Done():
		t.Fatal("/v1/done without the token ended the coordinator")
	default:
	}
}

// ceiling models the process's descriptors at the listener: at most n
// connections open at once (more wait in the listen queue), and the most
// that were ever open.
type ceiling struct {
	net.Listener
	sem  chan struct{}
	mu   sync.Mutex
	open int
	most int
}

func (c *ceiling) Accept() (net.Conn, error) {
	c.sem <- struct{}{}
	conn, err := c.Listener.Accept()
	if err != nil {
		<-c.sem
		return nil, err
	}
	c.mu.Lock()
	c.open++
	c.most = max(c.most, c.open)
	c.mu.Unlock()
	return &ceilingConn{Conn: conn, c: c}, nil
}

type ceilingConn struct {
	net.Conn
	c    *ceiling
	once sync.Once
}

func (cc *ceilingConn) Close() error {
	err := cc.Conn.Close()
	cc.once.Do(func() {
		cc.c.mu.Lock()
		cc.c.open--
		cc.c.mu.Unlock()
		<-cc.c.sem
	})
	return err
}

// TestIdleConnectionsDoNotKeepAWorkerOut (issue 28 row 5): 300 idle
// connections (half never send a header, half sent one request and stay
// open) against a process with 64 descriptors (modelled at the listener)
// and a coordinator limited to 16 connections: the coordinator never holds
// more than 16, drops the idle ones, and both real workers go through.
func TestIdleConnectionsDoNotKeepAWorkerOut(t *testing.T) {
	s := &Server{Workers: 2, Token: testToken, Timeout: time.Minute, MaxConns: 16,
		ReadHeaderTimeout: 50 * time.Millisecond, IdleTimeout: 50 * time.Millisecond}
	fds := &ceiling{sem: make(chan struct{}, 64)}
	url := serve(t, s, func(ln net.Listener) net.Listener { fds.Listener = ln; return fds })
	addr := strings.TrimPrefix(url, "http://")
	for i := range 300 {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("idle connection %d: %v", i, err)
		}
		t.Cleanup(func() { conn.Close() })
		if i%2 == 1 {
			fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: c\r\nAuthorization: Bearer %s\r\n\r\n", TimePath, testToken)
		}
	}
	bothWorkers(t, url, "real", 0)
	fds.mu.Lock()
	most := fds.most
	fds.mu.Unlock()
	if most > 16 {
		t.Errorf("the coordinator held %d connections at once, over its limit of 16", most)
	}
}

// TestSlowClientsAreDropped (issue 28 row 5): a client that sends part of
// a header, or a header and part of its body, and then nothing, is
// dropped (its connection closed, the body answered 400) and sets no
// digest.
func TestSlowClientsAreDropped(t *testing.T) {
	s := &Server{Workers: 2, Token: testToken, ReadHeaderTimeout: 50 * time.Millisecond, BodyTimeout: 50 * time.Millisecond}
	url := serve(t, s, nil)
	addr := strings.TrimPrefix(url, "http://")
	body := `{"worker":0,"count":2,"wave":0,"plan_digest":"evil"}`
	for name, send := range map[string]string{
		"header": "POST " + BarrierPath + " HTTP/1.1\r\nHost: c\r\n",
		"body": fmt.Sprintf("POST %s HTTP/1.1\r\nHost: c\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n%s",
			BarrierPath, testToken, len(body), body[:10]),
	} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := io.WriteString(conn, send); err != nil {
			t.Fatal(err)
		}
		// A bound against a hang, not a timing: the server must close first.
		_ = conn.SetReadDeadline(time.Now().Add(time.Minute))
		got, err := io.ReadAll(bufio.NewReader(conn))
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("slow %s: still open after a minute", name)
			continue
		}
		if name == "body" && !strings.HasPrefix(string(got), "HTTP/1.1 400") {
			t.Errorf("slow body: got %q, want a 400", got)
		}
	}
	if d := s.Digest(); d != "" {
		t.Errorf("a dropped request set digest %q", d)
	}
}

// TestArrivalEndsWithItsConnection (issue 28 row 9): worker 1 reaches the
// barrier of wave 0 and dies (its connection closes): it no longer counts
// as arrived, so worker 0 is not released alone; worker 1's restart (same
// id) is accepted and both are released together. Worker 0 waits longer
// than BodyTimeout: the body's deadline does not end a wait.
func TestArrivalEndsWithItsConnection(t *testing.T) {
	s := &Server{Workers: 2, Token: testToken, Timeout: time.Hour, BodyTimeout: 20 * time.Millisecond}
	url := serve(t, s, nil)
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	body := `{"worker":1,"count":2,"wave":0,"plan_digest":"real"}`
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: c\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n%s", BarrierPath, testToken, len(body), body)
	until(t, "worker 1 reaches the barrier", func() bool { return slices.Equal(s.Arrived(0), []int{1}) })
	conn.Close() // worker 1 is killed
	until(t, "worker 1's arrival is withdrawn", func() bool { return len(s.Arrived(0)) == 0 })

	first := make(chan error, 1)
	var firstStamp string
	go func() {
		rel, err := (&Client{URL: url, Worker: 0, Count: 2, Digest: "real", Token: testToken}).Release(context.Background(), 0)
		firstStamp = rel.Stamp
		first <- err
	}()
	until(t, "worker 0 reaches the barrier", func() bool { return slices.Equal(s.Arrived(0), []int{0}) })
	select {
	case err := <-first:
		t.Fatalf("worker 0 was released alone (%v)", err)
	default:
	}
	time.Sleep(100 * time.Millisecond) // past BodyTimeout; the outcome does not depend on it
	rel, err := (&Client{URL: url, Worker: 1, Count: 2, Digest: "real", Token: testToken}).Release(context.Background(), 0)
	if err != nil {
		t.Fatalf("worker 1's restart: %v", err)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if rel.Stamp != firstStamp {
		t.Errorf("released at %s and %s", firstStamp, rel.Stamp)
	}
}

// until polls cond, failing the test if it never holds (a bound against a
// hang, not a timing).
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: never happened", what)
		}
	}
}

// TestNeedsToken: only a loopback address may serve without a token.
func TestNeedsToken(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:7070": false, "localhost:0": false, "[::1]:7070": false, "127.3.4.5:1": false,
		"0.0.0.0:7070": true, ":7070": true, "10.0.0.2:7070": true, "[::]:7070": true, "example.com:80": true, "nonsense": true,
	} {
		if got := NeedsToken(addr); got != want {
			t.Errorf("NeedsToken(%q) = %v, want %v", addr, got, want)
		}
	}
}
