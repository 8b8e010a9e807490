package stream

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"
)

// gate holds a request's bytes until its release. The transport has
// the connection and has written the request into its buffer; the first
// write of that buffer to the connection waits for the release, so the
// whole request leaves in one write and a wave of many requests is
// released without connection set-up between its first and last send.
type gate struct {
	release <-chan struct{}
	ctx     context.Context // the request's: canceled, it unblocks the wait
	timeout time.Duration
	expire  func() // called when the timeout passes after the release

	armOnce sync.Once
	armed   func()

	// alive checks a connection that sat unused before the request's
	// first write (checkAlive; tests replace it).
	alive func(net.Conn) error

	mu       sync.Mutex
	released bool
	start    time.Time
	timer    *time.Timer

	// What became of the request's bytes, for the rule that a request is
	// sent again only when none of them was written (see void).
	idle      bool      // the connection sat unused before it: pre-dialed or pooled
	dialedAt  time.Time // when a pre-dialed connection was dialed (zero when pooled)
	checked   bool      // the first write checked the connection
	stale     error     // why that check found it unusable
	writing   int       // writes in progress
	wroteSome bool      // a write may have put bytes on the wire
}

// arm reports, once, that the request is ready to go (or has failed before
// it could be).
func (g *gate) arm() {
	g.armOnce.Do(func() {
		if g.armed != nil {
			g.armed()
		}
	})
}

// wait blocks until the release (or the request's end), stamps the send
// time once, and starts the timeout from it.
func (g *gate) wait() error {
	g.mu.Lock()
	released := g.released
	g.mu.Unlock()
	if released {
		return nil
	}
	g.arm()
	select {
	case <-g.release:
	case <-g.ctx.Done():
		return context.Cause(g.ctx)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.released {
		g.released = true
		g.start = time.Now()
		if g.timeout > 0 {
			g.timer = time.AfterFunc(g.timeout, g.expire)
		}
	}
	return nil
}

// sent returns the send time, and whether the request was released.
func (g *gate) sent() (time.Time, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.start, g.released
}

// stop stops the timeout timer.
func (g *gate) stop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.timer != nil {
		g.timer.Stop()
	}
}

// use records how the request got its connection: one that sat unused
// (pre-dialed at dialedAt, or pooled) is checked before the first write.
func (g *gate) use(c *gatedConn, reused bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.idle = reused || !c.predialed.IsZero()
	g.dialedAt = c.predialed
	if reused {
		g.dialedAt = time.Time{}
	}
}

// check runs once, before the request's first byte is written: a
// connection that sat unused is checked at this moment, and a stale one
// fails the write with nothing written.
func (g *gate) check(conn net.Conn) error {
	g.mu.Lock()
	if g.checked || !g.idle || g.alive == nil {
		g.checked = true
		g.mu.Unlock()
		return nil
	}
	g.checked = true
	g.mu.Unlock()
	err := g.alive(conn)
	if err == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stale = fmt.Errorf("stale %s: %w while idle; no byte of the request was written", g.connection(), err)
	return g.stale
}

// connection names the request's connection for a stale one's reason;
// g.mu held.
func (g *gate) connection() string {
	if g.dialedAt.IsZero() {
		return "pooled connection"
	}
	return fmt.Sprintf("connection pre-dialed %.2f s before use", time.Since(g.dialedAt).Seconds())
}

// beginWrite and endWrite bracket each write of the request's bytes.
// Bytes may have left unless the write returned an error having written
// nothing; a TLS connection's Write can send part of a record and still
// report 0, so any attempt on one counts.
func (g *gate) beginWrite() {
	g.mu.Lock()
	g.writing++
	g.mu.Unlock()
}

func (g *gate) endWrite(n int, err error, isTLS bool) {
	g.mu.Lock()
	g.writing--
	if n > 0 || err == nil || isTLS {
		g.wroteSome = true
	}
	g.mu.Unlock()
}

// void says why an attempt that ended (err, or a response resp) is void
// and may be sent again on a fresh connection: its connection sat unused
// before it, and failed or answered before any byte of the request was
// written. "" when the attempt stands: it was canceled or timed out, its
// connection was dialed for it, or a byte of it may have reached the server.
func (g *gate) void(ctx, reqCtx context.Context, status int, err error) string {
	if ctx.Err() != nil || reqCtx.Err() != nil {
		return ""
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.idle {
		return ""
	}
	if (g.wroteSome || g.writing > 0) && err != nil && status == 0 && isReset(err) {
		// Bytes were written, but the connection was reset before any
		// answer: a kernel resets a socket closed with bytes unread in
		// it, so the server closed this idle connection (its idle timeout
		// firing as the request arrived) without reading the request. A
		// server that read it and then failed would have closed it
		// cleanly, and that stands as its failure.
		return fmt.Sprintf("stale %s: reset by the server before any answer, the request unread (%s)", g.connection(), transportText(err))
	}
	if g.wroteSome || g.writing > 0 {
		return ""
	}
	switch {
	case g.stale != nil:
		return g.stale.Error()
	case err != nil:
		return fmt.Sprintf("stale %s: %s; no byte of the request was written", g.connection(), transportText(err))
	default:
		return fmt.Sprintf("stale %s: it answered HTTP %d before any byte of the request was written", g.connection(), status)
	}
}

// isReset reports whether err is the connection's reset by the peer (or a
// write to a connection the peer had reset).
func isReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// gatedConn is a connection whose writes wait for the gate of the request
// using it (set when the transport hands the connection to the request).
type gatedConn struct {
	net.Conn
	// predialed is when Warm dialed it; zero for one dialed by a request.
	predialed time.Time

	mu sync.Mutex
	g  *gate
}

func (c *gatedConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	g := c.g
	c.mu.Unlock()
	if g == nil {
		return c.Conn.Write(p)
	}
	if err := g.wait(); err != nil {
		return 0, err
	}
	if err := g.check(c.Conn); err != nil {
		return 0, err
	}
	g.beginWrite()
	n, err := c.Conn.Write(p)
	_, isTLS := c.Conn.(*tls.Conn)
	g.endWrite(n, err, isTLS)
	return n, err
}

// setGate makes later writes wait for g (nil: for nothing).
func (c *gatedConn) setGate(g *gate) {
	c.mu.Lock()
	c.g = g
	c.mu.Unlock()
}

// clearGate removes g if it is still the connection's gate.
func (c *gatedConn) clearGate(g *gate) {
	c.mu.Lock()
	if c.g == g {
		c.g = nil
	}
	c.mu.Unlock()
}

var openGate = func() <-chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()
