package stream

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"strconv"
)

// This file is the HTTP/1.1 wire format of the client's own streaming path
// (see h1.go): the request head written in one write, and the response's
// status line, headers and body framing parsed by hand over the
// connection's read buffer.

// appendRequest appends the whole request of p (head and body) to dst, to be
// written with one write.
func appendRequest(dst []byte, p *Prepared) []byte {
	dst = append(dst, "POST "...)
	dst = append(dst, p.uri...)
	dst = append(dst, " HTTP/1.1\r\nHost: "...)
	dst = append(dst, p.host...)
	if !p.overrides("User-Agent") {
		dst = append(dst, "\r\nUser-Agent: Go-http-client/1.1"...)
	}
	dst = append(dst, "\r\nContent-Length: "...)
	dst = strconv.AppendInt(dst, int64(len(p.body)), 10)
	dst = append(dst, "\r\n"...)
	if !p.overrides("Accept") {
		dst = append(dst, "Accept: text/event-stream\r\n"...)
	}
	if p.apiKey != "" && !p.overrides("Authorization") {
		dst = append(dst, "Authorization: Bearer "...)
		dst = append(dst, p.apiKey...)
		dst = append(dst, "\r\n"...)
	}
	if !p.overrides("Content-Type") {
		dst = append(dst, "Content-Type: application/json\r\n"...)
	}
	for _, h := range p.headers {
		dst = append(dst, h.Name...)
		dst = append(dst, ": "...)
		dst = append(dst, h.Value...)
		dst = append(dst, "\r\n"...)
	}
	dst = append(dst, "\r\n"...)
	return append(dst, p.body...)
}

// maxHeadBytes bounds a response's status line and headers (1xx heads
// included): a server that never ends its headers cannot grow the client
// without limit.
const maxHeadBytes = 1 << 20

// max1xx bounds the informational (1xx) answers skipped before the final
// one, as net/http does.
const max1xx = 5

// framingKind is how a response's body is delimited.
type framingKind uint8

const (
	bodyNone    framingKind = iota // no body (204, 304)
	bodyLength                     // Content-Length
	bodyChunked                    // Transfer-Encoding: chunked
	bodyClose                      // until the server closes the connection
)

// respHead is the part of a response's head the client reads.
type respHead struct {
	status    int
	proto10   bool // HTTP/1.0
	framing   framingKind
	length    int64 // Content-Length, for bodyLength
	close     bool  // Connection: close, or HTTP/1.0 without keep-alive
	keepAlive bool  // Connection: keep-alive (HTTP/1.0)
	// contentType, contentEncoding and location are the raw header
	// values ("" when absent).
	contentType, contentEncoding, location string
	// retryAfter and date are the Retry-After and Date headers, read
	// only for a status that keeps them (rateLimited).
	retryAfter, date string
	hasLength        bool
}

// errHeadTooLarge is a response head over maxHeadBytes.
var errHeadTooLarge = fmt.Errorf("server response headers exceeded %d bytes; aborted", maxHeadBytes)

// protocolError is a response that is not HTTP/1.x: the bytes the server
// sent break the protocol. Its message names what broke.
type protocolError struct{ msg string }

func (e *protocolError) Error() string { return e.msg }

func malformed(format string, args ...any) error {
	return &protocolError{msg: fmt.Sprintf(format, args...)}
}

// statusLineEnd returns the end of the status line in b (the index of its
// '\n'), or -1 when it is not complete yet.
func statusLineEnd(b []byte) int { return bytes.IndexByte(b, '\n') }

// checkStatusLine fails as soon as the first line of a response is complete
// and is not an HTTP/1.x status line, so a server speaking another protocol
// is named at once rather than after the head limit.
func checkStatusLine(b []byte) error {
	i := statusLineEnd(b)
	if i < 0 {
		if len(b) >= 5 && !bytes.HasPrefix(b, []byte("HTTP/")) {
			return malformed("malformed HTTP response %q", quoteHead(b))
		}
		return nil
	}
	_, _, err := parseStatusLine(trimCR(b[:i]))
	return err
}

func quoteHead(b []byte) string {
	if len(b) > 64 {
		b = b[:64]
	}
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		b = trimCR(b[:i])
	}
	return string(b)
}

func trimCR(b []byte) []byte {
	if len(b) > 0 && b[len(b)-1] == '\r' {
		return b[:len(b)-1]
	}
	return b
}

// parseStatusLine reads "HTTP/1.x SSS reason".
func parseStatusLine(line []byte) (status int, proto10 bool, err error) {
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		if bytes.HasPrefix(line, []byte("HTTP/")) {
			return 0, false, malformed("malformed HTTP version or status line %q", quoteHead(line))
		}
		return 0, false, malformed("malformed HTTP response %q", quoteHead(line))
	}
	switch line[7] {
	case '0':
		proto10 = true
	case '1':
	default:
		return 0, false, malformed("malformed HTTP version %q", quoteHead(line))
	}
	code := line[9:12]
	for _, c := range code {
		if c < '0' || c > '9' {
			return 0, false, malformed("malformed HTTP status code %q", string(code))
		}
	}
	if len(line) > 12 && line[12] != ' ' {
		return 0, false, malformed("malformed HTTP status code %q", quoteHead(line[9:]))
	}
	status = int(code[0]-'0')*100 + int(code[1]-'0')*10 + int(code[2]-'0')
	if status < 100 {
		return 0, false, malformed("malformed HTTP status code %q", string(code))
	}
	return status, proto10, nil
}

// headEnd returns the length of the head at the start of b (status line,
// header lines and the blank line that ends them), or -1 when b does not
// hold all of it yet. Lines may end in CRLF or LF, as net/http accepts.
func headEnd(b []byte) int {
	for i := 0; ; {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			return -1
		}
		line := b[i : i+j]
		i += j + 1
		if len(line) == 0 || (len(line) == 1 && line[0] == '\r') {
			return i // a blank first line too: parseHead refuses it
		}
	}
}

// parseHead parses a complete head (headEnd's bytes).
func parseHead(b []byte) (respHead, error) {
	var h respHead
	i := bytes.IndexByte(b, '\n')
	status, proto10, err := parseStatusLine(trimCR(b[:i]))
	if err != nil {
		return h, err
	}
	h.status, h.proto10 = status, proto10
	b = b[i+1:]
	var te []byte
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		line := trimCR(b[:i])
		b = b[i+1:]
		if len(line) == 0 {
			break
		}
		name, value, err := splitHeaderLine(line)
		if err != nil {
			return h, err
		}
		if err := h.field(name, value, &te); err != nil {
			return h, err
		}
	}
	if proto10 && !h.keepAlive {
		h.close = true
	}
	if err := h.setFraming(te); err != nil {
		return h, err
	}
	return h, nil
}

// splitHeaderLine is a header line's name and value (trimmed); an error
// for a continuation line, or a name missing or holding a space or a
// control byte.
func splitHeaderLine(line []byte) (name, value []byte, err error) {
	if line[0] == ' ' || line[0] == '\t' {
		return nil, nil, malformed("malformed MIME header: continuation line %q", quoteHead(line))
	}
	colon := bytes.IndexByte(line, ':')
	if colon <= 0 {
		return nil, nil, malformed("malformed MIME header line: %q", quoteHead(line))
	}
	name, value = line[:colon], bytes.TrimSpace(line[colon+1:])
	for _, c := range name {
		if c <= ' ' || c >= 0x7f {
			return nil, nil, malformed("malformed MIME header line: %q", quoteHead(line))
		}
	}
	return name, value, nil
}

// field takes the header field name: value into h (h.status set); a
// Transfer-Encoding's value goes to te, for setFraming. An error for a
// Content-Length that is no length or differs from an earlier one.
func (h *respHead) field(name, value []byte, te *[]byte) error {
	switch {
	case fieldIs(name, "content-length"):
		n, err := strconv.ParseInt(string(value), 10, 64)
		if err != nil || n < 0 || len(value) == 0 || value[0] == '+' {
			return malformed("bad Content-Length %q", quoteHead(value))
		}
		if h.hasLength && n != h.length {
			return malformed("message cannot contain multiple Content-Length headers; got %d and %d", h.length, n)
		}
		h.length, h.hasLength = n, true
	case fieldIs(name, "transfer-encoding"):
		*te = value
	case fieldIs(name, "connection"):
		for _, tok := range bytes.Split(value, []byte(",")) {
			tok = bytes.TrimSpace(tok)
			if fieldIs(tok, "close") {
				h.close = true
			} else if fieldIs(tok, "keep-alive") {
				h.keepAlive = true
			}
		}
	case fieldIs(name, "content-type"):
		h.contentType = internHeader(value)
	case fieldIs(name, "content-encoding"):
		h.contentEncoding = string(value)
	case fieldIs(name, "location"):
		h.location = string(value)
	case rateLimited(h.status) && fieldIs(name, "retry-after"):
		h.retryAfter = string(value)
	case rateLimited(h.status) && fieldIs(name, "date"):
		h.date = string(value)
	}
	return nil
}

// setFraming sets how h's body is framed: none for a status without one,
// chunked (the one transfer encoding taken: te, nil where absent), a
// length, or to the connection's close.
func (h *respHead) setFraming(te []byte) error {
	switch status := h.status; {
	case status == 204 || status == 304 || (status >= 100 && status <= 199):
		h.framing = bodyNone
	case te != nil:
		if !fieldIs(te, "chunked") {
			return malformed("unsupported transfer encoding: %q", quoteHead(te))
		}
		h.framing = bodyChunked
	case h.hasLength:
		h.framing = bodyLength
	default:
		h.framing, h.close = bodyClose, true
	}
	return nil
}

// internHeader avoids allocating the Content-Type every stream sends.
func internHeader(v []byte) string {
	switch string(v) {
	case "text/event-stream":
		return "text/event-stream"
	case "text/event-stream; charset=utf-8":
		return "text/event-stream; charset=utf-8"
	}
	return string(v)
}

// maxChunkLine bounds a chunk-size line (with its extensions) and each
// trailer line, as net/http bounds them.
const maxChunkLine = 4096

// maxTrailerLines bounds the trailer lines after the last chunk.
const maxTrailerLines = 64

// chunked decodes a chunked body incrementally, in place: feed is given
// each read's bytes and moves their data to the front of the same slice.
type chunked struct {
	state   uint8
	remain  int64 // data bytes left in the current chunk
	line    [maxChunkLine]byte
	lineN   int
	trailer int  // trailer lines seen
	done    bool // the last chunk and the trailer's end were read
}

const (
	chSize    uint8 = iota // reading a chunk-size line
	chData                 // reading chunk data
	chDataCR               // expecting the CR after a chunk's data
	chDataLF               // expecting the LF after a chunk's data
	chTrailer              // reading trailer lines after the last chunk
)

// errChunkLength and friends carry the phrases brokenFraming knows, so both
// transports name a broken encoding alike.
func chunkErr(format string, args ...any) error {
	return fmt.Errorf("malformed chunked encoding: "+format, args...)
}

// feed decodes p in place: it returns the number of data bytes now at
// p[:n], and rest, the bytes after the body's end (nil while the body has
// not ended).
func (c *chunked) feed(p []byte) (n int, rest []byte, err error) {
	out := 0
	i := 0
	for i < len(p) {
		switch c.state {
		case chData:
			take := len(p) - i
			if int64(take) > c.remain {
				take = int(c.remain)
			}
			out += copy(p[out:], p[i:i+take])
			i += take
			c.remain -= int64(take)
			if c.remain == 0 {
				c.state = chDataCR
			}
		case chDataCR:
			if p[i] != '\r' {
				return out, nil, chunkErr("no CRLF after a chunk's data (byte %q)", p[i])
			}
			i++
			c.state = chDataLF
		case chDataLF:
			if p[i] != '\n' {
				return out, nil, chunkErr("no CRLF after a chunk's data (byte %q)", p[i])
			}
			i++
			c.state = chSize
		case chSize, chTrailer:
			j := bytes.IndexByte(p[i:], '\n')
			seg := p[i:]
			if j >= 0 {
				seg = p[i : i+j]
			}
			if c.lineN+len(seg) > maxChunkLine {
				if c.state == chSize {
					return out, nil, chunkErr("chunk length line longer than %d bytes", maxChunkLine)
				}
				return out, nil, chunkErr("trailer line longer than %d bytes", maxChunkLine)
			}
			c.lineN += copy(c.line[c.lineN:], seg)
			if j < 0 {
				i = len(p)
				continue
			}
			i += j + 1
			line := trimCR(c.line[:c.lineN])
			c.lineN = 0
			if c.state == chTrailer {
				if len(line) == 0 {
					c.done = true
					return out, p[i:], nil
				}
				if c.trailer++; c.trailer > maxTrailerLines {
					return out, nil, chunkErr("more than %d trailer lines", maxTrailerLines)
				}
				continue
			}
			size, err := parseChunkSize(line)
			if err != nil {
				return out, nil, err
			}
			if size == 0 {
				c.state = chTrailer
				continue
			}
			c.remain, c.state = size, chData
		}
	}
	return out, nil, nil
}

// parseChunkSize reads a chunk-size line: hex digits, optional extensions
// after ';', optional spaces or tabs before them.
func parseChunkSize(line []byte) (int64, error) {
	if i := bytes.IndexByte(line, ';'); i >= 0 {
		line = line[:i]
	}
	line = bytes.TrimRight(line, " \t")
	if len(line) == 0 {
		return 0, errors.New("empty chunk length (malformed chunked encoding)")
	}
	if len(line) > 16 {
		return 0, fmt.Errorf("http chunk length too large (malformed chunked encoding): %q", quoteHead(line))
	}
	var n int64
	for _, b := range line {
		switch {
		case '0' <= b && b <= '9':
			b -= '0'
		case 'a' <= b && b <= 'f':
			b = b - 'a' + 10
		case 'A' <= b && b <= 'F':
			b = b - 'A' + 10
		default:
			return 0, fmt.Errorf("invalid byte in chunk length (malformed chunked encoding): %q", quoteHead(line))
		}
		n = n<<4 | int64(b)
	}
	if n < 0 {
		return 0, fmt.Errorf("http chunk length too large (malformed chunked encoding): %q", quoteHead(line))
	}
	return n, nil
}

// resolveLocation resolves a Location header against the request's URL, as
// http.Response.Location does.
func resolveLocation(reqURL, loc string) string {
	if loc == "" {
		return "no Location"
	}
	base, err := url.Parse(reqURL)
	if err == nil {
		if u, err := base.Parse(loc); err == nil {
			return u.String()
		}
	}
	return fmt.Sprintf("%q", cut(loc))
}

// fieldIs reports whether b is s (lower case) in any ASCII case.
func fieldIs(b []byte, s string) bool {
	return len(b) == len(s) && asciiEqualFold(b, s)
}
