package stream

import (
	"bytes"
	"fmt"
	"strings"
)

// Decoder splits a text/event-stream byte stream into events. It is fed the
// bytes of each read as they arrive and handles what a network delivers:
// events split across reads, several events in one read, comment lines,
// LF, CRLF and lone-CR line ends, and "data:" with or without the space.
// Fields other than data and event are ignored. An event may hold at most
// MaxEventBytes; a larger one stops the decoder (see Err).
type Decoder struct {
	line    []byte // the unterminated tail of the last read
	data    []byte // data lines of the pending event, joined by '\n'
	hasData bool
	name    string
	skipLF  bool  // the last read ended in '\r': a leading '\n' belongs to it
	limit   int   // bytes one event may hold; 0 means MaxEventBytes
	err     error // the event over the limit; the decoder then stops
	sse     bool  // a comment or a data, event, id or retry line was seen
}

// MaxEventBytes bounds the bytes the decoder holds for one event (its
// unterminated line and its data lines), so that a server that never ends
// a line or an event cannot grow the client without limit.
const MaxEventBytes = 16 << 20

// Err returns why the decoder stopped (an event over its limit), or nil.
// A stopped decoder ignores further input.
func (d *Decoder) Err() error { return d.err }

func (d *Decoder) eventLimit() int {
	if d.limit == 0 {
		return MaxEventBytes
	}
	return d.limit
}

// fits reports whether the pending line may grow by n bytes, and stops
// the decoder when it may not.
func (d *Decoder) fits(n int) bool {
	if len(d.line)+len(d.data)+n <= d.eventLimit() {
		return true
	}
	d.overflow()
	return false
}

// overflow stops the decoder and drops what it held.
func (d *Decoder) overflow() {
	if limit := d.eventLimit(); limit%(1<<20) == 0 {
		d.err = fmt.Errorf("an event grew past %d MiB without ending", limit>>20)
	} else {
		d.err = fmt.Errorf("an event grew past %d bytes without ending", limit)
	}
	d.line, d.data, d.hasData, d.name = nil, nil, false, ""
}

// Event is one dispatched server-sent event.
type Event struct {
	Name string // the "event:" field, "" when absent
	Data []byte // valid only until the next call of Feed or Finish
}

// Feed decodes p and calls emit for every event it completes.
func (d *Decoder) Feed(p []byte, emit func(Event)) {
	if d.err != nil {
		return
	}
	if d.skipLF && len(p) > 0 {
		d.skipLF = false
		if p[0] == '\n' {
			p = p[1:]
		}
	}
	for len(p) > 0 {
		i := indexLineEnd(p)
		if i < 0 {
			if d.fits(len(p)) {
				d.line = append(d.line, p...)
			}
			return
		}
		var line []byte
		if len(d.line) > 0 {
			if !d.fits(i) {
				return
			}
			d.line = append(d.line, p[:i]...)
			line = d.line
		} else {
			line = p[:i]
		}
		if p[i] == '\r' {
			if i+1 < len(p) {
				if p[i+1] == '\n' {
					i++
				}
			} else {
				d.skipLF = true
			}
		}
		p = p[i+1:]
		d.processLine(line, emit)
		if d.err != nil {
			return
		}
		d.line = d.line[:0]
	}
}

// Finish handles the end of the stream: an unterminated last line is taken
// as a line and a pending event is dispatched, so a server that closes right
// after "data: [DONE]" without the blank line is still understood.
func (d *Decoder) Finish(emit func(Event)) {
	if d.err != nil {
		return
	}
	if len(d.line) > 0 {
		d.processLine(d.line, emit)
		d.line = d.line[:0]
	}
	d.dispatch(emit)
}

// indexLineEnd returns the index of the first '\n' or '\r' in p, or -1:
// two vectorized scans (servers end lines in '\n'; a '\r' can only come
// before the first '\n' found).
func indexLineEnd(p []byte) int {
	i := bytes.IndexByte(p, '\n')
	head := p
	if i >= 0 {
		head = p[:i]
	}
	if j := bytes.IndexByte(head, '\r'); j >= 0 {
		return j
	}
	return i
}

func (d *Decoder) processLine(line []byte, emit func(Event)) {
	if len(line) == 0 {
		d.dispatch(emit)
		return
	}
	if line[0] == ':' {
		d.sse = true
		return
	}
	field, value := line, []byte(nil)
	for i, c := range line {
		if c == ':' {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
			break
		}
	}
	switch string(field) {
	case "data":
		if len(d.data)+1+len(value) > d.eventLimit() {
			d.overflow()
			return
		}
		if d.hasData {
			d.data = append(d.data, '\n')
		}
		d.data = append(d.data, value...)
		d.hasData = true
		d.sse = true
	case "event":
		d.name = string(value)
		d.sse = true
	case "id", "retry":
		d.sse = true
	}
}

// sseFields are the field names of the event-stream format.
var sseFields = []string{"data", "event", "id", "retry"}

// sawEventStream reports whether the input so far looks like an event
// stream: a comment or a data, event, id or retry line came, or the
// unfinished last line may still become one. Bytes of anything else (a
// page, compressed data) do not.
func (d *Decoder) sawEventStream() bool {
	if d.sse {
		return true
	}
	if len(d.line) == 0 {
		return false
	}
	if d.line[0] == ':' {
		return true
	}
	name, _, complete := bytes.Cut(d.line, []byte(":"))
	for _, f := range sseFields {
		if complete && string(name) == f || !complete && strings.HasPrefix(f, string(name)) {
			return true
		}
	}
	return false
}

func (d *Decoder) dispatch(emit func(Event)) {
	if !d.hasData {
		d.name = ""
		return
	}
	emit(Event{Name: d.name, Data: d.data})
	d.data = d.data[:0]
	d.hasData = false
	d.name = ""
}
