package stream

// Decoder splits a text/event-stream byte stream into events. It is fed the
// bytes of each read as they arrive and handles what a network delivers:
// events split across reads, several events in one read, comment lines,
// LF, CRLF and lone-CR line ends, and "data:" with or without the space.
// Fields other than data and event are ignored.
type Decoder struct {
	line    []byte // the unterminated tail of the last read
	data    []byte // data lines of the pending event, joined by '\n'
	hasData bool
	name    string
	skipLF  bool // the last read ended in '\r': a leading '\n' belongs to it
}

// Event is one dispatched server-sent event.
type Event struct {
	Name string // the "event:" field, "" when absent
	Data []byte // valid only until the next call of Feed or Finish
}

// Feed decodes p and calls emit for every event it completes.
func (d *Decoder) Feed(p []byte, emit func(Event)) {
	if d.skipLF && len(p) > 0 {
		d.skipLF = false
		if p[0] == '\n' {
			p = p[1:]
		}
	}
	for len(p) > 0 {
		i := indexLineEnd(p)
		if i < 0 {
			d.line = append(d.line, p...)
			return
		}
		var line []byte
		if len(d.line) > 0 {
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
		d.line = d.line[:0]
	}
}

// Finish handles the end of the stream: an unterminated last line is taken
// as a line and a pending event is dispatched, so a server that closes right
// after "data: [DONE]" without the blank line is still understood.
func (d *Decoder) Finish(emit func(Event)) {
	if len(d.line) > 0 {
		d.processLine(d.line, emit)
		d.line = d.line[:0]
	}
	d.dispatch(emit)
}

func indexLineEnd(p []byte) int {
	for i, c := range p {
		if c == '\n' || c == '\r' {
			return i
		}
	}
	return -1
}

func (d *Decoder) processLine(line []byte, emit func(Event)) {
	if len(line) == 0 {
		d.dispatch(emit)
		return
	}
	if line[0] == ':' {
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
		if d.hasData {
			d.data = append(d.data, '\n')
		}
		d.data = append(d.data, value...)
		d.hasData = true
	case "event":
		d.name = string(value)
	}
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
