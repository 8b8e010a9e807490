package stream

import (
	"context"
	"net"
	"sync"
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

	mu       sync.Mutex
	released bool
	start    time.Time
	timer    *time.Timer
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

// gatedConn is a connection whose writes wait for the gate of the request
// using it (set when the transport hands the connection to the request).
type gatedConn struct {
	net.Conn
	mu sync.Mutex
	g  *gate
}

func (c *gatedConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	g := c.g
	c.mu.Unlock()
	if g != nil {
		if err := g.wait(); err != nil {
			return 0, err
		}
	}
	return c.Conn.Write(p)
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
