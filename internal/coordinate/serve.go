package coordinate

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/rehearse/rehearse/internal/exitcode"
)

// TokenEnv is the variable that holds the coordinator's shared token, in
// the coordinator's process and in every worker's: each request carries
// it as "Authorization: Bearer TOKEN".
const TokenEnv = "REHEARSE_COORDINATOR_TOKEN"

// Defaults of the connection bounds (Server's fields when 0).
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultBodyTimeout       = 10 * time.Second
	DefaultIdleTimeout       = 60 * time.Second
	// DefaultConnsBase is the connections served at once beyond two per
	// worker (each worker holds one; a second covers a reconnect).
	DefaultConnsBase = 64
)

// ErrUnauthorized is a coordinator's refusal of this worker's token.
var ErrUnauthorized = errors.New("the coordinator refused the token: set " + TokenEnv + " to the coordinator's own")

// NewToken is a fresh random token (for a coordinator this process starts
// for its own workers).
func NewToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}

// NeedsToken says whether a coordinator listening on addr (HOST:PORT) can
// be reached from beyond this machine: every address but a loopback one
// (localhost, 127.0.0.0/8, ::1) does, and must not serve without a token.
func NeedsToken(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return true
	}
	if strings.EqualFold(host, "localhost") {
		return false
	}
	ip := net.ParseIP(host)
	return ip == nil || !ip.IsLoopback()
}

// authorized compares the request's bearer token with Token in constant
// time (of both digests, so not even the length shows).
func (s *Server) authorized(r *http.Request) bool {
	if s.Token == "" {
		return true
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return false
	}
	g, w := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(s.Token))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}

// Serve serves the coordinator on ln until Shutdown: at most MaxConns
// connections at once (the rest wait in the listen queue), each bounded
// by ReadHeaderTimeout for a request's header, BodyTimeout for its body
// and IdleTimeout between requests, so neither idle nor slow clients can
// keep a worker out.
func (s *Server) Serve(ln net.Listener) error {
	s.init()
	hs := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: orDefault(s.ReadHeaderTimeout, DefaultReadHeaderTimeout),
		IdleTimeout:       orDefault(s.IdleTimeout, DefaultIdleTimeout),
		// No ReadTimeout: it would end a worker's wait at a barrier, whose
		// request stays open; BodyTimeout bounds the body in the handler.
	}
	s.mu.Lock()
	s.http = hs
	s.mu.Unlock()
	return hs.Serve(limitListener(ln, s.maxConns()))
}

// Listen serves s in the background (Serve) on a new listener at addr,
// HOST:PORT (port 0 picks a free one), and returns the address it
// listens on; Shutdown stops it.
func (s *Server) Listen(addr string) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	go func() { _ = s.Serve(ln) }()
	return ln.Addr(), nil
}

// Run is rehearse coordinate: it serves s on listen, saying so on log,
// until every worker reported done (nil) or ctx ends (exit 130), then
// shuts it down. An address it cannot listen on is bad usage (exit 2).
func (s *Server) Run(ctx context.Context, listen string, log io.Writer) error {
	addr, err := s.Listen(listen)
	if err != nil {
		return exitcode.Usagef("--listen %s: %v", listen, err)
	}
	fmt.Fprintf(log, "rehearse coordinate: %d workers, listening on http://%s\n", s.Workers, addr)
	var ended error
	select {
	case <-s.Done():
		fmt.Fprintf(log, "rehearse coordinate: all %d workers are done\n", s.Workers)
	case <-ctx.Done():
		ended = &exitcode.Error{Code: exitcode.Interrupted, Err: fmt.Errorf("coordinate: interrupted (%v)", context.Cause(ctx))}
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return ended
}

// Shutdown stops Serve: it waits for the requests in progress until ctx
// ends, then closes every connection.
func (s *Server) Shutdown(ctx context.Context) error {
	s.init()
	s.mu.Lock()
	hs := s.http
	s.mu.Unlock()
	if hs == nil {
		return nil
	}
	err := hs.Shutdown(ctx)
	if err != nil {
		_ = hs.Close()
	}
	return err
}

func (s *Server) maxConns() int {
	if s.MaxConns > 0 {
		return s.MaxConns
	}
	return DefaultConnsBase + 2*s.Workers
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// limitListener accepts a connection only while fewer than n are open:
// the rest wait in the kernel's listen queue until one closes.
func limitListener(ln net.Listener, n int) net.Listener {
	return &limited{Listener: ln, sem: make(chan struct{}, n), done: make(chan struct{})}
}

type limited struct {
	net.Listener
	sem       chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

func (l *limited) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitedConn{Conn: c, release: func() { <-l.sem }}, nil
}

func (l *limited) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
