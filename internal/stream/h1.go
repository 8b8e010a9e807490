package stream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http/httptrace"
	"os"
	"sync"
	"time"

	"github.com/rehearse/rehearse/internal/contract"
)

// The client's own HTTP/1.1 streaming path, the default for http:// base
// URLs reached without a proxy (https://, proxies and requests that follow
// redirects go through net/http, as does everything when REHEARSE_HTTP is
// "nethttp"). One goroutine per request does it all: it takes a pooled
// keep-alive connection (or a pre-dialed one, or dials), writes the request
// in one write, parses the response head by hand, and reads the body over
// one buffer: each read system call is stamped once (on Linux with the
// kernel's receive time, rxstamp_linux.go), its chunked framing is removed
// in place, and every server-sent event it completed gets that stamp, the
// moment its bytes reached the host. There is no transport
// goroutine pair, no channel hop and no per-chunk allocation between the
// socket and the record.
//
// It keeps net/http's rules where they shape the records: the same failure
// classes (a response that is not HTTP is a connect failure, as net/http
// reports it; a broken chunked encoding is stream_malformed), a 3xx is the
// outcome, and a request whose idle connection proves stale before any
// byte of it was written (or is reset before any answer) is sent once more
// on a fresh connection (Result.Retried).

// httpEnv selects the transport: "nethttp" sends every request through
// net/http, for comparison; anything else (or unset) uses the client's own
// path where it applies.
const httpEnv = "REHEARSE_HTTP"

// useH1 says whether new clients take the hand-written path.
func useH1() bool { return os.Getenv(httpEnv) != "nethttp" }

// aLongTimeAgo is a deadline in the past: it unblocks a read or write at
// once.
var aLongTimeAgo = time.Unix(1, 0)

// wbufPool holds buffers the request is assembled in for its one write.
var wbufPool = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// maxPooledWrite bounds the buffers kept in wbufPool.
const maxPooledWrite = 256 << 10

// h1Timeout is the request context classifyTransport is given on the own
// path: the request's timeout is a connection deadline, and Err reports
// errTimeout once a read or write ran into it.
type h1Timeout struct {
	context.Context
	hit bool
}

func (t *h1Timeout) Err() error {
	if t.hit {
		return errTimeout
	}
	return nil
}

// note marks the timeout as reached when err is the connection's deadline
// and ctx (the caller's) is not done: a cancel also sets a past deadline.
func (t *h1Timeout) note(ctx context.Context, err error) {
	if err != nil && ctx.Err() == nil && errors.Is(err, os.ErrDeadlineExceeded) {
		t.hit = true
	}
}

// sendH1 is SendAt on the own path.
func (c *Client) sendH1(ctx context.Context, p *Prepared, release <-chan struct{}, armed func()) Result {
	res, stale := c.attemptH1(ctx, p, release, armed, false)
	if stale == "" {
		return res
	}
	res, _ = c.attemptH1(ctx, p, release, nil, true)
	res.Retried = stale
	return res
}

// idleName names a connection that sat unused, for a stale one's reason.
func idleName(dialedAt time.Time) string {
	if dialedAt.IsZero() {
		return "pooled connection"
	}
	return fmt.Sprintf("connection pre-dialed %.2f s before use", time.Since(dialedAt).Seconds())
}

// attemptH1 sends p once (see SendAt); fresh dials a connection of its own.
// A void attempt (see gate.void) returns why instead of a result.
func (c *Client) attemptH1(ctx context.Context, p *Prepared, release <-chan struct{}, armed func(), fresh bool) (Result, string) {
	var res Result
	arm := func() {
		if armed != nil {
			a := armed
			armed = nil
			a()
		}
	}
	trace := httptrace.ContextClientTrace(ctx)
	conn, idle, dialedAt, ok := c.h1Connect(ctx, p, release, arm, fresh, trace, &res)
	if !ok {
		return res, ""
	}
	start := time.Now()
	res.Start = start
	var deadline time.Time
	if p.timeout > 0 {
		deadline = start.Add(p.timeout)
	}
	conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(aLongTimeAgo) })
	keep := false
	defer func() {
		if !keep {
			stop()
			conn.Close()
		}
	}()
	tctx := &h1Timeout{Context: context.Background()}

	// A connection that sat unused is checked at the moment of use; one
	// dialed for the request is checked too, for a server that answered
	// or hung up before the request was sent.
	if err := c.alive(conn); err != nil {
		if idle && ctx.Err() == nil {
			return Result{}, fmt.Sprintf("stale %s: %v while idle; no byte of the request was written", idleName(dialedAt), err)
		}
		c.answeredEarly(ctx, conn, p, &res, err)
		return res, ""
	}
	if stale, ok := c.h1Write(ctx, tctx, conn, p, idle, dialedAt, &res); !ok {
		if stale != "" {
			return Result{}, stale
		}
		return res, ""
	}

	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	rx := newRxReader(conn)
	defer rx.release()
	hr := readResponseHead(rx, *bp, trace)
	if hr.err != nil {
		tctx.note(ctx, hr.err)
		res.End = time.Now()
		if hr.read == 0 && idle && ctx.Err() == nil && !tctx.hit && isReset(hr.err) {
			return Result{}, fmt.Sprintf("stale %s: reset by the server before any answer, the request unread (%s)", idleName(dialedAt), hr.err)
		}
		c.headFailure(ctx, tctx, &res, hr)
		return res, ""
	}
	h := hr.head
	body := newH1Body(rx, h, hr)
	defer body.release()
	body.ctx, body.tctx = ctx, tctx
	res.HTTPStatus = h.status
	res.noteRetryAfter(h.status, h.retryAfter, h.date)
	if h.status < 200 || h.status > 299 {
		res.ErrorKind, res.Error = contract.ErrHTTPStatus, h1StatusError(h, p.url, body)
		res.End = time.Now()
		keep = c.h1Keep(conn, p.addr, h, body, stop)
		return res, ""
	}
	keep = c.h1Stream(ctx, tctx, conn, p, h, hr.buf, body, stop, &res)
	return res, ""
}

// h1Connect takes a connection for p (a fresh one where fresh), tells
// trace (where not nil) of it, arms and waits for the release. Where
// none comes, or ctx ends first, it records the failure in res (stamped
// at the release) and reports false.
func (c *Client) h1Connect(ctx context.Context, p *Prepared, release <-chan struct{}, arm func(), fresh bool, trace *httptrace.ClientTrace, res *Result) (conn net.Conn, idle bool, dialedAt time.Time, ok bool) {
	conn, idle, dialedAt, err := c.h1Get(ctx, p.addr, fresh)
	if err != nil {
		var probe Result
		c.classifyTransport(ctx, ctx, &probe, err, false)
		c.failEarly(ctx, release, arm, res, probe.ErrorKind, probe.Error)
		return nil, false, time.Time{}, false
	}
	if trace != nil && trace.GotConn != nil {
		trace.GotConn(httptrace.GotConnInfo{Conn: conn, Reused: idle && dialedAt.IsZero(), WasIdle: idle})
	}
	arm()
	select {
	case <-release:
	case <-ctx.Done():
		conn.Close()
		c.failEarly(ctx, release, arm, res, contract.ErrCanceled, "canceled: "+context.Cause(ctx).Error())
		return nil, false, time.Time{}, false
	}
	return conn, idle, dialedAt, true
}

// h1Write writes p's request on conn. Where the write fails it reports
// false and either why the attempt is void (a connection that sat unused
// (idle, dialed at dialedAt) and took no byte of it, or was reset before
// any answer) or, with "", the failure recorded in res.
func (c *Client) h1Write(ctx context.Context, tctx *h1Timeout, conn net.Conn, p *Prepared, idle bool, dialedAt time.Time, res *Result) (stale string, ok bool) {
	wb := wbufPool.Get().(*[]byte)
	wire := appendRequest((*wb)[:0], p)
	n, werr := conn.Write(wire)
	if cap(wire) <= maxPooledWrite {
		*wb = wire[:0]
		wbufPool.Put(wb)
	}
	if werr == nil {
		return "", true
	}
	tctx.note(ctx, werr)
	if idle && ctx.Err() == nil && !tctx.hit {
		if n == 0 {
			return fmt.Sprintf("stale %s: %s; no byte of the request was written", idleName(dialedAt), werr), false
		}
		if isReset(werr) {
			return fmt.Sprintf("stale %s: reset by the server before any answer, the request unread (%s)", idleName(dialedAt), werr), false
		}
	}
	res.End = time.Now()
	c.classifyTransport(ctx, tctx, res, werr, false)
	return "", false
}

// h1Stream reads a 2xx response's event stream (head h, its first bytes
// in buf) from body into res, after refusing one that is no event stream; read whole, the rest of body is
// drained (briefly) and conn pooled. It reports whether conn was pooled.
func (c *Client) h1Stream(ctx context.Context, tctx *h1Timeout, conn net.Conn, p *Prepared, h respHead, buf []byte, body *h1Body, stop func() bool, res *Result) bool {
	cancelRead := func() { conn.SetReadDeadline(aLongTimeAgo) }
	if mediaType(h.contentType) == "application/json" {
		msg := readErrorBody(body)
		res.End = time.Now()
		res.ErrorKind, res.Error = contract.ErrStreamMalformed, "response is "+h.contentType+", not an event stream"
		if msg != "" {
			res.Error += ": " + msg
		}
		return false
	}
	if why := notEventStream(h.contentEncoding, h.contentType); why != "" {
		head := readHead(body, cancelRead)
		res.End = time.Now()
		res.ErrorKind, res.Error = contract.ErrStreamMalformed, why+"; "+describeHead(head, int64(len(head)))
		return false
	}
	c.readStream(ctx, tctx, body, res, buf, p.hint)
	if !res.OK {
		return false
	}
	if !body.done {
		conn.SetReadDeadline(time.Now().Add(drainWait))
		body.draining = true
		io.Copy(io.Discard, io.LimitReader(body, 64<<10))
	}
	return c.h1Keep(conn, p.addr, h, body, stop)
}

// h1Keep pools conn for the next request when its response was read to
// the end and nothing forbids reuse; it reports whether it did.
func (c *Client) h1Keep(conn net.Conn, addr string, h respHead, body *h1Body, stop func() bool) bool {
	if !body.done || body.extra || h.close || body.err != nil {
		return false
	}
	if !stop() {
		return false // the request's context is ending: its deadline is set on conn
	}
	c.h1Put(addr, conn)
	return true
}

// headFailure records a failure before the response head was complete.
func (c *Client) headFailure(ctx context.Context, tctx *h1Timeout, res *Result, hr headRead) {
	var pe *protocolError
	switch {
	case errors.As(hr.err, &pe), errors.Is(hr.err, errHeadTooLarge), errors.Is(hr.err, errTooMany1xx):
		res.ErrorKind, res.Error = contract.ErrConnect, hr.err.Error()
	case errors.Is(hr.err, io.EOF) && ctx.Err() == nil:
		res.ErrorKind = contract.ErrConnect
		if hr.read == 0 {
			res.Error = "the server closed the connection before any answer (EOF)"
		} else {
			res.Error = fmt.Sprintf("the server closed the connection inside the response head, after %d bytes (unexpected EOF)", hr.read)
		}
	default:
		c.classifyTransport(ctx, tctx, res, hr.err, false)
	}
}

// answeredEarly records a request whose connection, dialed for it, the
// server had answered or closed before the request was sent (why says
// what the check found): the failure is stamped at the release.
func (c *Client) answeredEarly(ctx context.Context, conn net.Conn, p *Prepared, res *Result, why error) {
	res.End = res.Start
	if ctx.Err() != nil {
		res.ErrorKind, res.Error = contract.ErrCanceled, "canceled: "+context.Cause(ctx).Error()
		return
	}
	conn.SetDeadline(time.Now().Add(headWait))
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	rx := newRxReader(conn)
	defer rx.release()
	hr := readResponseHead(rx, *bp, nil)
	if hr.err != nil || hr.head.status < 100 {
		res.ErrorKind, res.Error = contract.ErrConnect, fmt.Sprintf("the server hung up before the request was sent (%v)", why)
		return
	}
	h := hr.head
	body := newH1Body(rx, h, hr)
	defer body.release()
	res.HTTPStatus = h.status
	res.noteRetryAfter(h.status, h.retryAfter, h.date)
	res.ErrorKind = contract.ErrHTTPStatus
	if h.status >= 200 && h.status <= 299 {
		res.Error = fmt.Sprintf("HTTP %d before the request was sent", h.status)
		return
	}
	res.Error = h1StatusError(h, p.url, body)
}

// h1StatusError reads an error response's body and names its status and
// message; a redirect names where it pointed (statusError's text).
func h1StatusError(h respHead, reqURL string, body io.Reader) string {
	msg := fmt.Sprintf("HTTP %d", h.status)
	if h.status >= 300 && h.status <= 399 {
		io.Copy(io.Discard, io.LimitReader(body, 64<<10))
		return msg + " redirect to " + resolveLocation(reqURL, h.location) + ", not followed (follow_redirects: true in the rehearsal file, or bench --follow-redirects, follows it)"
	}
	if m := readErrorBody(body); m != "" {
		msg += ": " + m
	}
	return msg
}

// errTooMany1xx is a server that sends informational answers without end.
var errTooMany1xx = fmt.Errorf("net/http: too many 1xx informational responses (more than %d)", max1xx)

// headRead is what readResponseHead got: the final head, the body bytes
// that came with it (buf[bodyAt:filled]), when they were read, and the
// read error that came with them, if any.
type headRead struct {
	head          respHead
	buf           []byte // the read buffer (grown past the pooled one for a large head)
	bodyAt, fill  int
	at            time.Time
	pendErr       error // a read error after the head's bytes, for the body
	err           error // no final head
	read          int   // response bytes read in all
	informational int
}

// readResponseHead reads the response head over buf: informational (1xx)
// heads are skipped, and the head may grow buf up to maxHeadBytes.
func readResponseHead(rx *rxReader, buf []byte, trace *httptrace.ClientTrace) headRead {
	hr := headRead{buf: buf}
	var rerr error
	for {
		if e := headEnd(hr.buf[:hr.fill]); e >= 0 {
			h, err := parseHead(hr.buf[:e])
			if err != nil {
				hr.err = err
				return hr
			}
			if h.status >= 100 && h.status <= 199 && h.status != 101 {
				if hr.informational++; hr.informational > max1xx {
					hr.err = errTooMany1xx
					return hr
				}
				hr.fill = copy(hr.buf, hr.buf[e:hr.fill])
				continue
			}
			hr.head, hr.bodyAt, hr.pendErr = h, e, rerr
			return hr
		}
		if err := checkStatusLine(hr.buf[:hr.fill]); err != nil {
			hr.err = err
			return hr
		}
		if rerr != nil {
			hr.err = rerr
			return hr
		}
		if hr.fill == len(hr.buf) {
			if len(hr.buf) >= maxHeadBytes {
				hr.err = errHeadTooLarge
				return hr
			}
			nb := make([]byte, min(2*len(hr.buf), maxHeadBytes))
			copy(nb, hr.buf[:hr.fill])
			hr.buf = nb
		}
		n, at, err := rx.read(hr.buf[hr.fill:])
		hr.at = at
		if n > 0 && hr.read == 0 && trace != nil && trace.GotFirstResponseByte != nil {
			trace.GotFirstResponseByte()
		}
		hr.fill += n
		hr.read += n
		rerr = err
	}
}

// h1Body is a response body on the own path. Each Read does at most one
// read system call, stamps it once (readTime), and returns the body bytes
// it brought, the chunked framing removed in place in the caller's buffer.
type h1Body struct {
	rx      *rxReader
	framing framingKind
	remain  int64 // Content-Length bytes left
	ch      chunked
	pending []byte // body bytes that came with the head
	pendAt  time.Time
	pendErr error
	at      time.Time
	done    bool  // the body's end was read
	extra   bool  // bytes came after the body's end
	err     error // the error Read returned, other than io.EOF at the end
	// ctx and tctx note a read that ran into the request's deadline.
	ctx      context.Context
	tctx     *h1Timeout
	draining bool // reading past the result: its deadline is drainWait
}

var h1BodyPool = sync.Pool{New: func() any { return new(h1Body) }}

func newH1Body(rx *rxReader, h respHead, hr headRead) *h1Body {
	b := h1BodyPool.Get().(*h1Body)
	*b = h1Body{rx: rx, framing: h.framing, remain: h.length,
		pending: hr.buf[hr.bodyAt:hr.fill], pendAt: hr.at, pendErr: hr.pendErr}
	if h.framing == bodyNone || (h.framing == bodyLength && h.length == 0) {
		b.done = true
		b.extra = len(b.pending) > 0
	}
	return b
}

func (b *h1Body) release() {
	*b = h1Body{}
	h1BodyPool.Put(b)
}

// readTime is when the bytes the last Read returned reached the host.
func (b *h1Body) readTime() time.Time { return b.at }

func (b *h1Body) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	if b.err != nil {
		return 0, b.err
	}
	var n int
	var rerr error
	if len(b.pending) > 0 {
		n = copy(p, b.pending) // may overlap p: copy moves
		b.pending = b.pending[n:]
		b.at = b.pendAt
		if len(b.pending) == 0 {
			rerr, b.pendErr = b.pendErr, nil
		}
	} else if b.pendErr != nil {
		rerr, b.pendErr = b.pendErr, nil
	} else {
		n, b.at, rerr = b.rx.read(p)
	}
	out, err := b.decode(p[:n])
	if err != nil {
		b.err = err
		return out, err
	}
	if b.done {
		return out, io.EOF
	}
	if rerr != nil {
		if b.tctx != nil && !b.draining {
			b.tctx.note(b.ctx, rerr)
		}
		if errors.Is(rerr, io.EOF) {
			if b.framing != bodyClose {
				rerr = io.ErrUnexpectedEOF
			} else {
				b.done = true
				return out, io.EOF
			}
		}
		b.err = rerr
		return out, rerr
	}
	return out, nil
}

// decode removes the framing from p in place and returns the body bytes
// now at its front.
func (b *h1Body) decode(p []byte) (int, error) {
	switch b.framing {
	case bodyChunked:
		n, rest, err := b.ch.feed(p)
		if err != nil {
			return n, err
		}
		if b.ch.done {
			b.done = true
			b.extra = len(rest) > 0
		}
		return n, nil
	case bodyLength:
		if int64(len(p)) >= b.remain {
			n := int(b.remain)
			b.remain = 0
			b.done = true
			b.extra = len(p) > n
			return n, nil
		}
		b.remain -= int64(len(p))
		return len(p), nil
	default:
		return len(p), nil
	}
}

// h1Get returns a connection to addr: the most recently pooled one, else a
// pre-dialed one (Warm), else a new one (always, when fresh). idle says it
// sat unused before; dialedAt is when Warm dialed it (zero when pooled or
// new).
func (c *Client) h1Get(ctx context.Context, addr string, fresh bool) (conn net.Conn, idle bool, dialedAt time.Time, err error) {
	if !fresh {
		if conn := c.h1Take(addr); conn != nil {
			return conn, true, time.Time{}, nil
		}
		if rc, ok := c.takeReady("http://" + addr); ok {
			return rc.conn, true, rc.at, nil
		}
	}
	if c.dial != nil {
		conn, err = c.dial(ctx, "tcp", addr)
	} else {
		conn, err = c.dialer.DialContext(ctx, "tcp", addr)
	}
	return conn, false, time.Time{}, err
}

// h1Take hands out the most recently pooled connection to addr younger
// than maxIdleAge, closing older ones.
func (c *Client) h1Take(addr string) net.Conn {
	now := time.Now()
	var old []readyConn
	var conn net.Conn
	c.mu.Lock()
	conns := c.idle[addr]
	if len(conns) > 0 {
		rc := conns[len(conns)-1]
		conns = conns[:len(conns)-1]
		if now.Sub(rc.at) <= maxIdleAge {
			conn = rc.conn
		} else {
			old = append(old, rc)
		}
	}
	// The oldest come first: drop those past the age.
	k := 0
	for k < len(conns) && now.Sub(conns[k].at) > maxIdleAge {
		k++
	}
	old = append(old, conns[:k]...)
	c.idle[addr] = conns[k:]
	c.mu.Unlock()
	for _, rc := range old {
		rc.conn.Close()
	}
	return conn
}

// maxIdlePerHost bounds the pooled connections to one server.
const maxIdlePerHost = 1 << 16

// h1Put pools conn for the next request to addr.
func (c *Client) h1Put(addr string, conn net.Conn) {
	c.mu.Lock()
	conns := c.idle[addr]
	if len(conns) >= maxIdlePerHost {
		c.mu.Unlock()
		conn.Close()
		return
	}
	c.idle[addr] = append(conns, readyConn{conn: conn, at: time.Now()})
	c.mu.Unlock()
}

// closeIdle closes every pooled connection of the own path.
func (c *Client) closeIdle() { c.closeAll(&c.idle) }
