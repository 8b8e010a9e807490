package stream

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/endpoint"
)

// Request is one streaming chat completion: the prompt is sent as one user
// message with temperature and max_tokens, stream on, and ExtraBody merged
// into the top level of the JSON body last (so it may set ignore_eos,
// min_tokens, …). To a completions endpoint (endpoint.IsCompletions) the prompt is
// sent as the body's "prompt" instead, and Messages are refused.
type Request struct {
	BaseURL, Endpoint, Model, APIKey, Prompt string
	MaxTokens                                int
	Temperature                              float64
	// IncludeUsage sends stream_options.include_usage (off for servers
	// that reject stream_options).
	IncludeUsage bool
	ExtraBody    map[string]any
	// Timeout bounds the whole request, from send to the end of the
	// stream; 0 means none.
	Timeout time.Duration
	// Messages, when set, are sent instead of Prompt as one user message.
	Messages []Message
	// FollowRedirects follows a 3xx answer (at most maxRedirects); without
	// it a 3xx is the request's outcome, so another host's stream is never
	// credited to the server under test.
	FollowRedirects bool
	// Style is the body's shape: endpoint.StyleRehearse, or endpoint.StyleVLLM for the body
	// vllm bench serve's request functions build (see vllmBody).
	Style string
	// Headers are sent with the request after the client's own (a header
	// of the same name replaces Accept, Authorization, Content-Type or
	// User-Agent); their values are secrets and never shown.
	Headers []Header
	// RequestID, when set, is sent as the x-request-id header, last, as
	// vllm bench serve sends its request ids.
	RequestID string
}

// Header is one HTTP header a request sends.
type Header struct{ Name, Value string }

// Result is everything a request produced. Times carry the monotonic clock
// reading of time.Now; zero values mean "did not happen".
type Result struct {
	Start        time.Time // when the request was written to its connection (after any connection set-up)
	End          time.Time // end of the stream, or the failure
	FirstContent time.Time // first chunk with non-empty content, kept on failure
	// FirstToken is the first chunk carrying any generated text: content,
	// reasoning (delta.reasoning or delta.reasoning_content) or tool-call
	// arguments; kept on failure. It is FirstContent or earlier.
	FirstToken time.Time
	ChunkTimes []time.Time

	OK         bool
	ErrorKind  string // one of contract.ErrorKinds, "" when OK
	Error      string
	HTTPStatus int
	// RetryAfterS is the Retry-After of a 429 or 503 answer, in seconds
	// (retryAfter); nil when the answer had none that parses.
	RetryAfterS *float64

	Text string
	// Reasoning is the reasoning channel's text, concatenated (per delta
	// delta.reasoning, else delta.reasoning_content); "" when the server
	// streamed none.
	Reasoning string
	// ToolCallText is the arguments text of every delta.tool_calls entry,
	// concatenated in arrival order; "" when none came.
	ToolCallText          string
	FinishReason          string
	UsageCompletionTokens *int
	UsagePromptTokens     *int
	// Chunks counts every data event, content or not (role, usage, …).
	Chunks int
	// AddedNS holds, for each event that carried the server's send stamp
	// (rehearse sim --stamp-sends), the client's stamp of it minus that
	// stamp, in wall-clock nanoseconds of the same host: what loopback,
	// the kernel and the client added before the event was timed. nil when
	// the server sent no stamps.
	AddedNS []int64
	// LagNS holds, for the same events, how long after the client's stamp
	// of each it got to the event (time.Now when the event was parsed
	// minus the stamp): the client's own queue, which a kernel receive
	// stamp leaves out of AddedNS and every recorded time. nil with
	// AddedNS.
	LagNS []int64
	// Retried says why the request was sent a second time on a freshly
	// dialed connection: its first connection had sat unused and failed
	// before any byte of the request was written. "" when sent once.
	Retried string
}

// Prepared is a request whose URL, headers and body are built, ready to be
// sent without further allocation of the body.
type Prepared struct {
	url     string
	body    []byte
	apiKey  string
	timeout time.Duration
	follow  bool
	// h1 says the request may take the client's own HTTP/1.1 path (an
	// http:// URL reached without a proxy); addr ("host:port"), host (the
	// Host header) and uri (the request target) are its request line.
	h1              bool
	addr, host, uri string
	// hint is the tokens the request lets the server generate (its body's
	// max_tokens or max_completion_tokens, × n; 0 when it sets none): the
	// storage its stream is read into, and the bounds of an overrun.
	hint int
	// headers are sent after the client's own (Request.Headers, then
	// x-request-id); a name here replaces the client's header of that name.
	headers []Header
}

// Prepare builds the HTTP request of req. It fails on a base URL that is not
// an absolute http(s) URL or an ExtraBody that cannot be encoded.
func Prepare(req Request) (*Prepared, error) {
	u, err := url.Parse(req.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("base URL %q: want an absolute http:// or https:// URL", req.BaseURL)
	}
	ep := req.Endpoint
	if ep == "" {
		ep = endpoint.Default
	}
	if !strings.HasPrefix(ep, "/") {
		return nil, fmt.Errorf("endpoint %q: want a path starting with /", ep)
	}
	body := bodyFields(req)
	if endpoint.IsCompletions(ep) {
		if req.Messages != nil {
			return nil, fmt.Errorf("endpoint %s is the completions API, which takes one prompt: chat messages need a chat endpoint such as %s", ep, endpoint.Default)
		}
		body["prompt"] = req.Prompt
	} else {
		body["messages"] = messages(req)
	}
	body["max_tokens"] = req.MaxTokens
	switch req.Style {
	case endpoint.StyleRehearse:
	case endpoint.StyleVLLM:
		vllmBody(body, req, endpoint.IsCompletions(ep))
	default:
		return nil, fmt.Errorf("body style %q: want %q or %q", req.Style, endpoint.StyleRehearse, endpoint.StyleVLLM)
	}
	headers, err := requestHeaders(req)
	if err != nil {
		return nil, err
	}
	for k, v := range req.ExtraBody {
		body[k] = v
	}
	data, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("request body: %v", err)
	}
	p := &Prepared{
		url:     strings.TrimRight(req.BaseURL, "/") + ep,
		body:    data,
		apiKey:  req.APIKey,
		timeout: req.Timeout,
		follow:  req.FollowRedirects,
		hint:    outputLimit(body),
		headers: headers,
	}
	p.route()
	return p, nil
}

// route fills in the own path's request line, or leaves h1 off for a URL
// that path does not take (https, a proxy, a target it cannot write).
func (p *Prepared) route() {
	u, err := url.Parse(p.url)
	if err != nil || u.Scheme != "http" || u.Host == "" || u.User != nil {
		return
	}
	if proxy, _ := http.ProxyFromEnvironment(&http.Request{URL: u}); proxy != nil {
		return
	}
	uri := u.RequestURI()
	for _, c := range []byte(uri + u.Host + p.apiKey) {
		if c < ' ' || c == 0x7f {
			return // net/http refuses it with its own error
		}
	}

	p.addr = u.Host
	if u.Port() == "" {
		p.addr = net.JoinHostPort(u.Hostname(), "80")
	}
	p.host = strings.TrimSuffix(u.Host, ":")
	p.uri = uri
	p.h1 = true
}

// bodyFields are the body's fields that every request of req carries,
// before its messages, max_tokens and ExtraBody.
func bodyFields(req Request) map[string]any {
	body := map[string]any{
		"model":       req.Model,
		"temperature": req.Temperature,
		"stream":      true,
	}
	if req.IncludeUsage {
		body["stream_options"] = map[string]any{"include_usage": true}
	}
	return body
}

// Message is one chat message of a request.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

func messages(req Request) []Message {
	if req.Messages != nil {
		return req.Messages
	}
	return []Message{{Role: "user", Content: req.Prompt}}
}

// Body returns the JSON body the request sends.
func (p *Prepared) Body() []byte { return p.body }

// tlsHandshakeTimeout bounds each TLS handshake of a Client.
const tlsHandshakeTimeout = 10 * time.Second

// maxIdleAge bounds how long a connection may sit unused, pre-dialed by
// Warm or pooled after a stream, before a request is written on it: servers
// close idle connections (uvicorn after 5 s, many proxies after 10 s), and a
// request written on one the server is closing would fail for no fault of
// the server's. An older pre-dialed connection is closed and a fresh one
// dialed; the transport drops pooled ones at this age.
const maxIdleAge = 3 * time.Second

// Client sends streaming requests over an http.Transport tuned for many
// concurrent streams: no connection limit per host, an idle pool as large as
// the largest wave, no compression (chunks are timed as they arrive), and
// HTTP/1.1 so that every stream has its own connection as in a real fleet of
// clients. Safe for concurrent use.
//
// A connection that sat unused is checked before a request is written on it
// (its age, then checkAlive at the moment of the first write), and a request
// whose connection turned out stale having written no byte is sent once more
// on a freshly dialed one (Result.Retried says why); none is resent once a
// byte of it may have reached the server.
type Client struct {
	hc     *http.Client
	tr     *http.Transport
	fresh  *http.Client // a connection of its own per request: the resend
	dialer net.Dialer
	tlsCfg *tls.Config
	// alive checks a connection that sat unused (checkAlive; tests
	// replace it).
	alive func(net.Conn) error
	// eventLimit is the bytes one event may hold (0: MaxEventBytes; tests
	// lower it).
	eventLimit int

	// dial, when set, opens the own path's new connections instead of
	// dialer (tests give it scripted connections).
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// h1 sends http:// requests over the client's own HTTP/1.1 path
	// (h1.go) instead of net/http; REHEARSE_HTTP=nethttp turns it off.
	h1 bool

	mu    sync.Mutex
	ready map[string][]readyConn // pre-dialed connections by "scheme://host:port"
	idle  map[string][]readyConn // the own path's pooled connections by "host:port", oldest first
}

// readyConn is a pre-dialed connection and when it was dialed.
type readyConn struct {
	conn net.Conn
	at   time.Time
}

// NewClient returns a client. A nil tlsConfig uses the system roots.
func NewClient(tlsConfig *tls.Config) *Client {
	c := &Client{
		dialer: net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: rxStampControl()},
		ready:  map[string][]readyConn{},
		idle:   map[string][]readyConn{},
		alive:  checkAlive,
		h1:     useH1(),
	}
	if tlsConfig == nil {
		tlsConfig = &tls.Config{}
	} else {
		tlsConfig = tlsConfig.Clone()
	}
	tlsConfig.NextProtos = []string{"http/1.1"}
	c.tlsCfg = tlsConfig
	c.tr = &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           c.dialPlain,
		DialTLSContext:        c.dialTLS,
		MaxIdleConns:          0,
		MaxIdleConnsPerHost:   4096,
		MaxConnsPerHost:       0,
		IdleConnTimeout:       maxIdleAge,
		DisableCompression:    true,
		ForceAttemptHTTP2:     false,
		ResponseHeaderTimeout: 0,
		// The transport ignores it with DialTLSContext set; handshake
		// applies it, so that a server that accepts and never answers
		// the handshake cannot hold a wave.
		TLSHandshakeTimeout: tlsHandshakeTimeout,
		WriteBufferSize:     16 << 10,
		ReadBufferSize:      16 << 10,
	}
	c.hc = &http.Client{Transport: c.tr, CheckRedirect: checkRedirect}
	fresh := c.tr.Clone()
	fresh.DialContext, fresh.DialTLSContext = c.dialPlainFresh, c.dialTLSFresh
	fresh.DisableKeepAlives = true
	c.fresh = &http.Client{Transport: fresh, CheckRedirect: checkRedirect}
	return c
}

// maxRedirects bounds the redirects a request that follows them takes.
const maxRedirects = 10

// followKey marks the context of a request that follows redirects.
type followKey struct{}

// checkRedirect leaves a 3xx as the answer (http.ErrUseLastResponse)
// unless the request asked to follow redirects, and stops a followed chain
// after maxRedirects.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if follow, _ := req.Context().Value(followKey{}).(bool); !follow {
		return http.ErrUseLastResponse
	}
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	return nil
}

// take hands out a pre-dialed connection to key, closing on the way those
// older than maxIdleAge and those checkAlive finds stale; nil when none is
// left.
func (c *Client) take(key string) *gatedConn {
	if rc, ok := c.takeReady(key); ok {
		return &gatedConn{Conn: rc.conn, predialed: rc.at}
	}
	return nil
}

// takeReady is take's pre-dialed connection, unwrapped.
func (c *Client) takeReady(key string) (readyConn, bool) {
	for {
		c.mu.Lock()
		conns := c.ready[key]
		if len(conns) == 0 {
			c.mu.Unlock()
			return readyConn{}, false
		}
		rc := conns[len(conns)-1]
		c.ready[key] = conns[:len(conns)-1]
		c.mu.Unlock()
		if time.Since(rc.at) <= maxIdleAge && c.alive(rc.conn) == nil {
			return rc, true
		}
		rc.conn.Close()
	}
}

func (c *Client) dialPlain(ctx context.Context, network, addr string) (net.Conn, error) {
	if conn := c.take("http://" + addr); conn != nil {
		return conn, nil
	}
	return c.dialPlainFresh(ctx, network, addr)
}

func (c *Client) dialPlainFresh(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := c.dialer.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &gatedConn{Conn: conn}, nil
}

func (c *Client) dialTLS(ctx context.Context, network, addr string) (net.Conn, error) {
	if conn := c.take("https://" + addr); conn != nil {
		return conn, nil
	}
	return c.dialTLSFresh(ctx, network, addr)
}

func (c *Client) dialTLSFresh(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := c.handshake(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &gatedConn{Conn: conn}, nil
}

func (c *Client) handshake(ctx context.Context, network, addr string) (net.Conn, error) {
	raw, err := c.dialer.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	cfg := c.tlsCfg.Clone()
	if cfg.ServerName == "" {
		host, _, _ := net.SplitHostPort(addr)
		cfg.ServerName = host
	}
	tc := tls.Client(raw, cfg)
	hctx := ctx
	if d := c.tr.TLSHandshakeTimeout; d > 0 {
		var cancel context.CancelFunc
		hctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	if err := tc.HandshakeContext(hctx); err != nil {
		raw.Close()
		if ctx.Err() == nil && hctx.Err() != nil {
			return nil, fmt.Errorf("TLS handshake with %s not done within %v", addr, c.tr.TLSHandshakeTimeout)
		}
		return nil, err
	}
	return tc, nil
}

// Warm closes the transport's idle connections and opens n fresh ones to
// baseURL's host (TLS handshakes included), which the next n requests to
// that host take instead of dialing, while they are younger than
// maxIdleAge and still open. A closed-loop wave calls it before its release
// so that no request of the wave pays for a connection.
func (c *Client) Warm(ctx context.Context, baseURL string, n int) error {
	c.tr.CloseIdleConnections()
	c.closeIdle()
	c.Drop()
	return c.predial(ctx, baseURL, n)
}

// predial opens n connections to baseURL's host for the next requests.
func (c *Client) predial(ctx context.Context, baseURL string, n int) error {
	if n <= 0 {
		return nil
	}
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("base URL %q: want an absolute http:// or https:// URL", baseURL)
	}
	if proxy, _ := http.ProxyFromEnvironment(&http.Request{URL: u}); proxy != nil {
		return nil // connections go to the proxy: nothing to pre-dial
	}
	addr := u.Host
	if u.Port() == "" {
		port := "80"
		if u.Scheme == "https" {
			port = "443"
		}
		addr = net.JoinHostPort(u.Hostname(), port)
	}
	key := u.Scheme + "://" + addr
	conns := make([]net.Conn, n)
	dialed := make([]time.Time, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64) // do not SYN-flood the listen backlog
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if u.Scheme == "https" {
				conns[i], errs[i] = c.handshake(ctx, "tcp", addr)
			} else {
				conns[i], errs[i] = c.dialer.DialContext(ctx, "tcp", addr)
			}
			dialed[i] = time.Now()
		}()
	}
	wg.Wait()
	var ok []readyConn
	var firstErr error
	for i := range n {
		if errs[i] != nil {
			if firstErr == nil {
				firstErr = errs[i]
			}
			continue
		}
		ok = append(ok, readyConn{conn: conns[i], at: dialed[i]})
	}
	c.mu.Lock()
	c.ready[key] = append(c.ready[key], ok...)
	c.mu.Unlock()
	if firstErr != nil {
		return fmt.Errorf("opening %d connections to %s: %d failed: %v", n, addr, n-len(ok), firstErr)
	}
	return nil
}

// Drop closes every pre-dialed connection no request has taken.
func (c *Client) Drop() { c.closeAll(&c.ready) }

// closeAll empties the connection set *m (c.ready or c.idle) under the
// client's lock and closes what it held.
func (c *Client) closeAll(m *map[string][]readyConn) {
	c.mu.Lock()
	held := *m
	*m = map[string][]readyConn{}
	c.mu.Unlock()
	for _, conns := range held {
		for _, rc := range conns {
			rc.conn.Close()
		}
	}
}

// Close releases every connection of the client.
func (c *Client) Close() {
	c.Drop()
	c.closeIdle()
	c.tr.CloseIdleConnections()
}

// Do prepares and sends req. It never returns an error: a request that
// cannot be built is a failed Result of kind client (the load generator's
// failure, not the server's).
func (c *Client) Do(ctx context.Context, req Request) Result {
	p, err := Prepare(req)
	if err != nil {
		now := time.Now()
		return Result{Start: now, End: now, ErrorKind: contract.ErrClient, Error: "cannot build request: " + err.Error()}
	}
	return c.Send(ctx, p)
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 16<<10); return &b }}

// Send sends a prepared request and reads its stream to the end, the
// timeout, or the cancellation of ctx, whichever comes first. Start is
// stamped when the request's bytes are handed to the connection, after any
// connection set-up.
func (c *Client) Send(ctx context.Context, p *Prepared) Result {
	return c.SendAt(ctx, p, openGate, nil)
}

// SendAt is Send for a request released by a barrier: it sets up the
// connection and buffers the request at once, calls armed (once, also when
// the request fails before it is ready), and sends the request's bytes when
// release is closed. Start is the moment of that send and the timeout runs
// from it. A request that fails before the release is recorded at the
// release (Start = End), so no time of a wave precedes it.
//
// When the connection the request took had sat unused and proves stale
// before any byte of the request was written on it, the request is sent
// once more on a freshly dialed connection, and Retried says why; Start is
// then the second send.
func (c *Client) SendAt(ctx context.Context, p *Prepared, release <-chan struct{}, armed func()) Result {
	if c.h1 && p.h1 && !p.follow {
		return c.sendH1(ctx, p, release, armed)
	}
	res, stale := c.attempt(ctx, c.hc, p, release, armed)
	if stale == "" {
		return res
	}
	res, _ = c.attempt(ctx, c.fresh, p, release, nil)
	res.Retried = stale
	return res
}

// attempt sends p once over hc (see SendAt). When the attempt is void
// (gate.void) it returns why instead of a result.
func (c *Client) attempt(ctx context.Context, hc *http.Client, p *Prepared, release <-chan struct{}, armed func()) (Result, string) {
	reqCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	traceCtx := reqCtx
	if p.follow {
		traceCtx = context.WithValue(reqCtx, followKey{}, true)
	}
	g := &gate{release: release, ctx: reqCtx, timeout: p.timeout, expire: func() { cancel(errTimeout) }, armed: armed, alive: c.alive}
	defer g.stop()

	var (
		res  Result
		conn *gatedConn
	)
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		if gc, ok := info.Conn.(*gatedConn); ok {
			if conn != nil && conn != gc {
				conn.clearGate(g) // a followed redirect moved the request
			}
			conn = gc
			g.use(gc, info.Reused)
			gc.setGate(g)
		}
		g.arm()
	}}
	hreq, err := newStreamRequest(httptrace.WithClientTrace(traceCtx, trace), p)
	if err != nil {
		c.failEarly(ctx, g.release, g.arm, &res, contract.ErrClient, "cannot build request: "+err.Error())
		return res, ""
	}
	defer func() {
		if conn != nil {
			conn.clearGate(g)
		}
	}()

	resp, err := hc.Do(hreq)
	status := 0
	if resp != nil {
		status = resp.StatusCode
	}
	if why := g.void(ctx, reqCtx, status, err); why != "" {
		if resp != nil {
			resp.Body.Close()
		}
		return Result{}, why
	}
	start, released := g.sent()
	if err != nil {
		c.doFailure(ctx, reqCtx, g, resp, err, start, released, &res)
		return res, ""
	}
	defer resp.Body.Close()
	res.HTTPStatus = resp.StatusCode
	res.noteRetryAfter(resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("Date"))
	if !released {
		// The server answered before the request was sent (an error
		// status before reading the body): a failure before the release.
		msg := statusError(resp)
		if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
			msg = fmt.Sprintf("HTTP %d before the request was sent", resp.StatusCode)
		}
		c.failEarly(ctx, g.release, g.arm, &res, contract.ErrHTTPStatus, msg)
		return res, ""
	}
	res.Start = start
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		msg := statusError(resp)
		res.End = time.Now()
		res.ErrorKind, res.Error = contract.ErrHTTPStatus, msg
		return res, ""
	}
	c.readResponseStream(ctx, reqCtx, cancel, resp, p, &res)
	return res, ""
}

// newStreamRequest is p's POST, under ctx, asking for an event stream,
// with p's API key and headers.
func newStreamRequest(ctx context.Context, p *Prepared) (*http.Request, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(p.body))
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	if p.apiKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+p.apiKey)
	}
	for _, h := range p.headers {
		hreq.Header.Set(h.Name, h.Value)
	}
	return hreq, nil
}

// doFailure records in res a request hc.Do failed with err: a followed
// chain of redirects stopped (resp the last), a failure before the
// release (stamped at it), or one after the request was sent at start.
func (c *Client) doFailure(ctx, reqCtx context.Context, g *gate, resp *http.Response, err error, start time.Time, released bool, res *Result) {
	switch {
	case resp != nil && released:
		// A followed chain of redirects was stopped (checkRedirect).
		res.Start, res.End, res.HTTPStatus = start, time.Now(), resp.StatusCode
		res.ErrorKind = contract.ErrHTTPStatus
		res.Error = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, transportText(err))
	case !released:
		var probe Result
		c.classifyTransport(ctx, reqCtx, &probe, err, false)
		c.failEarly(ctx, g.release, g.arm, res, probe.ErrorKind, probe.Error)
	default:
		res.Start, res.End = start, time.Now()
		c.classifyTransport(ctx, reqCtx, res, err, false)
	}
}

// readResponseStream reads a 2xx response's event stream into res, after
// refusing one that is no event stream; read whole, its body is drained
// (briefly, then cancel ends the request) for the connection's reuse.
func (c *Client) readResponseStream(ctx, reqCtx context.Context, cancel context.CancelCauseFunc, resp *http.Response, p *Prepared, res *Result) {
	if ct := resp.Header.Get("Content-Type"); mediaType(ct) == "application/json" {
		msg := readErrorBody(resp.Body)
		res.End = time.Now()
		res.ErrorKind, res.Error = contract.ErrStreamMalformed, "response is "+ct+", not an event stream"
		if msg != "" {
			res.Error += ": " + msg
		}
		return
	}
	if why := notEventStream(resp.Header.Get("Content-Encoding"), resp.Header.Get("Content-Type")); why != "" {
		head := readHead(resp.Body, func() { cancel(nil) })
		res.End = time.Now()
		res.ErrorKind, res.Error = contract.ErrStreamMalformed, why+"; "+describeHead(head, int64(len(head)))
		return
	}
	c.readStream(ctx, reqCtx, resp.Body, res, nil, p.hint)
	if res.OK {
		drain(resp.Body, func() { cancel(nil) })
	}
}

// mediaType is a Content-Type's media type, lower case, without parameters.
func mediaType(ct string) string {
	mt, _, _ := strings.Cut(ct, ";")
	return strings.ToLower(strings.TrimSpace(mt))
}

// notEventStream says why a 2xx answer's headers rule out an event stream
// the client can read: a Content-Type that is neither text/event-stream nor
// absent or text/plain (which servers that stream by hand send), or a
// Content-Encoding other than identity (the client asks for none, and a
// compressed stream cannot be timed chunk by chunk). "" when neither.
func notEventStream(enc, ct string) string {
	if enc != "" && !strings.EqualFold(enc, "identity") {
		return fmt.Sprintf("response is Content-Encoding %s (the client asked for none), not a readable event stream", enc)
	}
	switch mediaType(ct) {
	case "", "text/event-stream", "text/plain":
		return ""
	default:
		return fmt.Sprintf("response is %s, not an event stream", ct)
	}
}

// headBytes is how much of a body that is not an event stream the error
// quotes; headWait bounds the wait for it.
const (
	headBytes = 48
	headWait  = time.Second
)

// readHead reads the first bytes of a body, giving up (cancel) after
// headWait.
func readHead(body io.Reader, cancel func()) []byte {
	t := time.AfterFunc(headWait, cancel)
	defer t.Stop()
	head := make([]byte, headBytes)
	n, _ := io.ReadFull(body, head)
	return head[:n]
}

// describeHead names the first bytes of a body of total bytes.
func describeHead(head []byte, total int64) string {
	if total == 0 {
		return "the body was empty"
	}
	if len(head) < int(total) || len(head) == headBytes {
		return fmt.Sprintf("it began %q…", head)
	}
	return fmt.Sprintf("it was %q", head)
}

// statusError reads an error response's body and names its status and
// message; a redirect names where it pointed.
func statusError(resp *http.Response) string {
	msg := fmt.Sprintf("HTTP %d", resp.StatusCode)
	if resp.StatusCode >= 300 && resp.StatusCode <= 399 {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		where := "no Location"
		if loc, err := resp.Location(); err == nil {
			where = loc.String()
		} else if l := resp.Header.Get("Location"); l != "" {
			where = fmt.Sprintf("%q", cut(l))
		}
		return msg + " redirect to " + where + ", not followed (follow_redirects: true in the rehearsal file, or bench --follow-redirects, follows it)"
	}
	if m := readErrorBody(resp.Body); m != "" {
		msg += ": " + m
	}
	return msg
}

// failEarly records a request that failed before its release: it waits for
// the release (or ctx) and stamps both ends there.
func (c *Client) failEarly(ctx context.Context, release <-chan struct{}, arm func(), res *Result, kind, msg string) {
	arm()
	select {
	case <-release:
	case <-ctx.Done():
	}
	now := time.Now()
	res.Start, res.End = now, now
	res.ErrorKind, res.Error = kind, msg
}

// drainWait bounds how long a finished stream's connection may take to
// deliver the end of its body so that it can be reused; the result is
// already final by then.
const drainWait = 50 * time.Millisecond

// drain reads what is left of a finished stream's body (normally just the
// end of the chunked encoding after [DONE]) so that the transport keeps the
// connection for the next request instead of closing it.
func drain(body io.Reader, cancel func()) {
	t := time.AfterFunc(drainWait, cancel)
	defer t.Stop()
	io.Copy(io.Discard, io.LimitReader(body, 64<<10))
}

var errTimeout = errors.New("request timeout")

// stamper is a body that knows when the bytes of its last Read reached
// the host (the own path's: the kernel's receive stamp of each read system
// call, rxReader).
type stamper interface{ readTime() time.Time }

// maxHint bounds the chunk times a stream's hint preallocates (more grow
// by appending): 6 KiB a stream.
const maxHint = 256

// readStream reads the event stream, stamping each read on the monotonic
// clock; an event is timed by the read that completed it. buf is the read
// buffer (nil: one from bufPool); hint is the content chunks expected
// (max_tokens), for which the chunk times are allocated at once, and from
// which the stream's bounds follow (boundsFor).
func (c *Client) readStream(ctx, reqCtx context.Context, body io.Reader, res *Result, buf []byte, hint int) {
	if buf == nil {
		bp := bufPool.Get().(*[]byte)
		defer bufPool.Put(bp)
		buf = *bp
	}
	if hint > 0 {
		res.ChunkTimes = make([]time.Time, 0, min(hint, maxHint))
	}
	stamps, _ := body.(stamper)
	var (
		dec      Decoder
		st       state
		text     strings.Builder
		now      time.Time
		finished bool // [DONE] seen, or a failure decided in-band
		// What the body delivered, for one that is not an event stream.
		delivered int64
		head      [headBytes]byte
		headN     int
	)
	dec.limit = c.eventLimit
	st.bounds = boundsFor(hint)
	emit := func(ev Event) {
		if finished {
			return
		}
		res.Chunks++
		st.handle(ev, now, res, &text)
		if st.done || st.fail != "" {
			finished = true
		}
	}
	for !finished {
		n, err := body.Read(buf)
		if stamps != nil {
			now = stamps.readTime()
		} else {
			now = time.Now()
		}
		if n > 0 {
			delivered += int64(n)
			headN += copy(head[headN:], buf[:n])
			dec.Feed(buf[:n], emit)
			if derr := dec.Err(); derr != nil && !finished {
				st.fail, st.failMsg = contract.ErrStreamMalformed, derr.Error()
				finished = true
			}
		}
		if err != nil {
			if !finished && errors.Is(err, io.EOF) {
				dec.Finish(emit)
			}
			res.End = now
			st.texts(res, &text)
			if finished || errors.Is(err, io.EOF) {
				c.finish(res, &st)
			} else {
				c.classifyTransport(ctx, reqCtx, res, err, true)
			}
			if !finished && res.Chunks == 0 && !dec.sawEventStream() && res.ErrorKind == contract.ErrStreamTruncated && (delivered > 0 || errors.Is(err, io.EOF)) {
				// Not one event, and nothing that looked like the
				// format: the server sent something else.
				res.ErrorKind = contract.ErrStreamMalformed
				res.Error = "the body was empty, not an event stream"
				if delivered > 0 {
					res.Error = fmt.Sprintf("the body held %d bytes and no server-sent event; %s", delivered, describeHead(head[:headN], delivered))
				}
				if !errors.Is(err, io.EOF) {
					res.Error += "; then " + transportText(err)
				}
			}
			return
		}
	}
	res.End = now
	st.texts(res, &text)
	c.finish(res, &st)
}

// texts sets the result's text of every channel the stream carried.
func (s *state) texts(res *Result, text *strings.Builder) {
	res.Text = text.String()
	res.Reasoning = s.reasoning.String()
	res.ToolCallText = s.toolCalls.String()
}

func (c *Client) finish(res *Result, st *state) {
	switch {
	case st.fail != "":
		res.ErrorKind, res.Error = st.fail, st.failMsg
	case res.FinishReason != "":
		res.OK = true
	case st.done:
		res.ErrorKind, res.Error = contract.ErrStreamTruncated, "[DONE] arrived without a finish_reason"
	default:
		res.ErrorKind, res.Error = contract.ErrStreamTruncated, "stream ended without a finish_reason"
	}
}

// clientErrnos are the errors of a system call that mean the load
// generator ran out of a resource of its own, with what to do about it.
var clientErrnos = map[syscall.Errno]string{
	syscall.EMFILE:        "the load generator is out of file descriptors (raise ulimit -n or lower the concurrency)",
	syscall.ENFILE:        "the machine of the load generator is out of file descriptors (its system-wide file table is full)",
	syscall.EADDRNOTAVAIL: "the load generator is out of ephemeral ports to this address (too many connections opened and closed)",
	syscall.ENOBUFS:       "the load generator's kernel is out of socket buffer space",
}

// clientFault says how err is a failure of the load generator's own
// resources, or "" when it is not.
func clientFault(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return clientErrnos[errno]
	}
	return ""
}

// classifyTransport names a failure of the transport: the load generator's
// own (client: out of descriptors, ports or buffers), before the response
// (connect, timeout, canceled) or while reading the stream (timeout,
// canceled, stream_truncated).
func (c *Client) classifyTransport(ctx, reqCtx context.Context, res *Result, err error, reading bool) {
	switch why := clientFault(err); {
	case why != "":
		res.ErrorKind = contract.ErrClient
		res.Error = why + ": " + transportText(err)
	case ctx.Err() != nil:
		res.ErrorKind = contract.ErrCanceled
		res.Error = "canceled: " + context.Cause(ctx).Error()
	case errors.Is(context.Cause(reqCtx), errTimeout):
		res.ErrorKind = contract.ErrTimeout
		if reading {
			res.Error = "timeout while streaming"
		} else {
			res.Error = "timeout before the response headers"
		}
	case reading && brokenFraming(err):
		res.ErrorKind = contract.ErrStreamMalformed
		res.Error = "the body broke HTTP's chunked encoding: " + err.Error()
	case reading:
		res.ErrorKind = contract.ErrStreamTruncated
		res.Error = "stream broken: " + err.Error()
	default:
		res.ErrorKind = contract.ErrConnect
		res.Error = transportText(err)
	}
}

// framingPhrases are the messages of net/http's (unexported) errors for a
// chunked body that breaks the encoding: bytes that are not HTTP, which is
// not a stream cut short. TestReliabilityHostileServers holds one.
var framingPhrases = []string{"chunk length", "malformed chunked encoding", "chunked encoding contains too much non-data"}

func brokenFraming(err error) bool {
	msg := err.Error()
	for _, p := range framingPhrases {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

// transportText is a transport error without the url.Error's "Post URL:"
// prefix.
func transportText(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}

// readErrorBody reads at most 64 KiB of an error response and extracts its
// message: OpenAI's {"error": {"message"}}, {"message"}, FastAPI's
// {"detail"}, or the text itself, cut to 300 bytes.
func readErrorBody(r io.Reader) string {
	data, _ := io.ReadAll(io.LimitReader(r, 64<<10))
	return errorMessage(data)
}

func errorMessage(data []byte) string {
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(data, &v) == nil {
		if len(v.Error) > 0 && string(v.Error) != "null" {
			var e struct {
				Message string `json:"message"`
			}
			if json.Unmarshal(v.Error, &e) == nil && e.Message != "" {
				return cut(e.Message)
			}
			var s string
			if json.Unmarshal(v.Error, &s) == nil && s != "" {
				return cut(s)
			}
			return cut(string(v.Error))
		}
		if v.Message != "" {
			return cut(v.Message)
		}
		if len(v.Detail) > 0 && string(v.Detail) != "null" {
			var s string
			if json.Unmarshal(v.Detail, &s) == nil {
				return cut(s)
			}
			return cut(string(v.Detail))
		}
	}
	return cut(strings.TrimSpace(string(data)))
}

func cut(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	const max = 300
	if len(s) <= max {
		return s
	}
	s = s[:max]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}
