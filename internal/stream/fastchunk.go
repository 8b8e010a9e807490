package stream

import (
	"encoding/json"
	"math"
	"strconv"
	"unicode/utf8"
	"unsafe"
)

// parseChunkInto reads the common shapes of a chat.completion.chunk into c
// without reflection or allocation for a stream's common chunk: its
// strings point into data instead of copies (so c is valid only while
// data is unchanged), and the pointers to them are elements of *arena
// (appended while it has capacity, new ones past it; reset by the caller
// per chunk). It returns false for anything it does not handle with
// certainty (escaped or non-UTF-8 keys, duplicate or case-folded field
// names, unexpected types, syntax errors), and the caller then falls back
// to encoding/json, which defines the result: FuzzParseChunkFast checks
// that the two agree on every input the fast path accepts.
func parseChunkInto(data []byte, c *chunk, arena *[]string) bool {
	p := fastParser{data: data, arena: arena}
	p.ws()
	if !p.object(func(key []byte) bool {
		switch string(key) {
		case "choices":
			return p.choices(c)
		case "usage":
			return p.usage(c)
		case "rehearse_sent_ns":
			return p.int64Value(&c.SentNS)
		case "error":
			start := p.i
			if !p.skip() {
				return false
			}
			c.Error = json.RawMessage(append([]byte(nil), p.data[start:p.i]...))
			return true
		}
		return p.skip()
	}, "choices", "usage", "error", "rehearse_sent_ns") {
		return false
	}
	p.ws()
	return p.i == len(p.data)
}

type fastParser struct {
	data  []byte
	i     int
	depth int
	// arena holds the strings read (see parseChunkInto).
	arena *[]string
}

// str returns a pointer to s: an element of the arena while it has room,
// else a new one.
func (p *fastParser) str(s string) *string {
	if a := p.arena; len(*a) < cap(*a) {
		*a = append(*a, s)
		return &(*a)[len(*a)-1]
	}
	ps := new(string)
	*ps = s
	return ps
}

// unquote decodes a JSON string with escapes, as encoding/json does.
func unquote(raw []byte) (string, bool) {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// maxDepth bounds the nesting skip follows; deeper input goes to
// encoding/json.
const maxDepth = 64

func (p *fastParser) ws() {
	for p.i < len(p.data) {
		switch p.data[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *fastParser) peek() byte {
	if p.i < len(p.data) {
		return p.data[p.i]
	}
	return 0
}

func (p *fastParser) lit(s string) bool {
	if len(p.data)-p.i >= len(s) && string(p.data[p.i:p.i+len(s)]) == s {
		p.i += len(s)
		return true
	}
	return false
}

// null consumes a null literal if one is next.
func (p *fastParser) null() bool {
	return p.peek() == 'n' && p.lit("null")
}

// object parses {"key": value, ...}, calling field with p positioned at
// each value; field must consume it. Keys that are one of known, or fold
// to one of them, or repeat, or need unescaping, make the parse fail.
func (p *fastParser) object(field func(key []byte) bool, known ...string) bool {
	if p.peek() != '{' {
		return false
	}
	p.i++
	p.ws()
	if p.peek() == '}' {
		p.i++
		return true
	}
	var seen uint
	for {
		p.ws()
		key, ok := p.plainString()
		if !ok {
			return false
		}
		for k, name := range known {
			if len(key) == len(name) && asciiEqualFold(key, name) {
				if string(key) != name || seen&(1<<k) != 0 {
					return false
				}
				seen |= 1 << k
			}
		}
		p.ws()
		if p.peek() != ':' {
			return false
		}
		p.i++
		p.ws()
		if !field(key) {
			return false
		}
		p.ws()
		switch p.peek() {
		case ',':
			p.i++
		case '}':
			p.i++
			return true
		default:
			return false
		}
	}
}

func asciiEqualFold(b []byte, s string) bool {
	for i := range len(b) {
		x, y := b[i], s[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// plainString reads a string without escapes, made of printable ASCII (the
// keys of a chunk). Anything else fails, so that folding rules of
// encoding/json for non-ASCII keys never come into play.
func (p *fastParser) plainString() ([]byte, bool) {
	if p.peek() != '"' {
		return nil, false
	}
	start := p.i + 1
	for j := start; j < len(p.data); j++ {
		c := p.data[j]
		switch {
		case c == '"':
			p.i = j + 1
			return p.data[start:j], true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return nil, false
		}
	}
	return nil, false
}

// stringValue reads a string (or null, leaving *dst nil). Strings with
// escapes are decoded by encoding/json itself; raw bytes must be valid
// UTF-8 without control characters.
func (p *fastParser) stringValue(dst **string) bool {
	if p.null() {
		*dst = nil
		return true
	}
	if p.peek() != '"' {
		return false
	}
	start := p.i
	escaped := false
	j := start + 1
	for ; j < len(p.data); j++ {
		c := p.data[j]
		if c == '\\' {
			escaped = true
			j++
			continue
		}
		if c == '"' {
			break
		}
		if c < 0x20 {
			return false
		}
	}
	if j >= len(p.data) {
		return false
	}
	p.i = j + 1
	raw := p.data[start:p.i]
	var s string
	if escaped {
		var ok bool
		if s, ok = unquote(raw); !ok {
			return false
		}
	} else {
		if !utf8.Valid(raw) {
			return false
		}
		// Zero-copy: the caller copies what it keeps.
		s = unsafe.String(unsafe.SliceData(raw[1:]), len(raw)-2)
	}
	*dst = p.str(s)
	return true
}

// intValue reads an integer literal (or null) into *dst.
func (p *fastParser) intValue(dst **int) bool {
	if p.null() {
		*dst = nil
		return true
	}
	start := p.i
	if !p.integerPart() {
		return false
	}
	switch p.peek() {
	case '.', 'e', 'E':
		return false
	}
	v, err := strconv.ParseInt(string(p.data[start:p.i]), 10, 0)
	if err != nil {
		return false
	}
	n := int(v)
	*dst = &n
	return true
}

// int64Value reads an integer literal into *dst; null leaves it unchanged,
// as encoding/json does.
func (p *fastParser) int64Value(dst *int64) bool {
	if p.null() {
		return true
	}
	start := p.i
	if !p.integerPart() {
		return false
	}
	switch p.peek() {
	case '.', 'e', 'E':
		return false
	}
	// Digits accumulate as a negative number, whose range holds MinInt64;
	// no string is made (this runs on every stamped chunk).
	neg, digits := p.data[start] == '-', p.data[start:p.i]
	if neg {
		digits = digits[1:]
	}
	var v int64
	for _, d := range digits {
		if v < (math.MinInt64+int64(d-'0'))/10 {
			return false // out of range: encoding/json refuses it too
		}
		v = v*10 - int64(d-'0')
	}
	if !neg {
		if v == math.MinInt64 {
			return false
		}
		v = -v
	}
	*dst = v
	return true
}

func (p *fastParser) choices(c *chunk) bool {
	if p.null() {
		c.Choices = nil
		return true
	}
	c.Choices = c.Choices[:0]
	if c.Choices == nil {
		c.Choices = make([]choice, 0, 1)
	}
	return p.array(func() bool {
		var ch choice
		if !p.object(func(key []byte) bool {
			switch string(key) {
			case "delta":
				if p.null() {
					return true
				}
				return p.delta(&ch.Delta)
			case "text":
				return p.stringValue(&ch.Text)
			case "finish_reason":
				return p.stringValue(&ch.FinishReason)
			}
			return p.skip()
		}, "delta", "text", "finish_reason") {
			return false
		}
		c.Choices = append(c.Choices, ch)
		return true
	})
}

// delta reads a choice's delta: content and the reasoning channel's two
// names as strings; tool_calls only when null or empty (a tool-call delta
// goes to encoding/json, the slower path, which plain content never takes).
func (p *fastParser) delta(d *delta) bool {
	return p.object(func(key []byte) bool {
		switch string(key) {
		case "content":
			return p.stringValue(&d.Content)
		case "reasoning":
			return p.stringValue(&d.Reasoning)
		case "reasoning_content":
			return p.stringValue(&d.ReasoningContent)
		case "tool_calls":
			if p.null() {
				d.ToolCalls = nil
				return true
			}
			if p.peek() != '[' {
				return false
			}
			p.i++
			p.ws()
			if p.peek() != ']' {
				return false
			}
			p.i++
			d.ToolCalls = []toolCall{}
			return true
		}
		return p.skip()
	}, "content", "reasoning", "reasoning_content", "tool_calls")
}

// array consumes a JSON array, calling elem at the start of each element.
func (p *fastParser) array(elem func() bool) bool {
	if p.peek() != '[' {
		return false
	}
	p.i++
	p.ws()
	if p.peek() == ']' {
		p.i++
		return true
	}
	for {
		p.ws()
		if !elem() {
			return false
		}
		p.ws()
		switch p.peek() {
		case ',':
			p.i++
		case ']':
			p.i++
			return true
		default:
			return false
		}
	}
}

func (p *fastParser) usage(c *chunk) bool {
	if p.null() {
		c.Usage = nil
		return true
	}
	u := &usage{}
	if !p.object(func(key []byte) bool {
		switch string(key) {
		case "prompt_tokens":
			return p.intValue(&u.PromptTokens)
		case "completion_tokens":
			return p.intValue(&u.CompletionTokens)
		}
		return p.skip()
	}, "prompt_tokens", "completion_tokens") {
		return false
	}
	c.Usage = u
	return true
}

// skip consumes any JSON value, checking its syntax.
func (p *fastParser) skip() bool {
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > maxDepth {
		return false
	}
	switch c := p.peek(); {
	case c == '{':
		return p.object(func([]byte) bool { return p.skip() })
	case c == '[':
		return p.array(p.skip)
	case c == '"':
		return p.skipString()
	case c == 't':
		return p.lit("true")
	case c == 'f':
		return p.lit("false")
	case c == 'n':
		return p.lit("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	}
	return false
}

// skipString consumes a string, checking its escapes and that it holds
// no control character (encoding/json accepts invalid UTF-8 there).
func (p *fastParser) skipString() bool {
	for j := p.i + 1; j < len(p.data); j++ {
		switch c := p.data[j]; {
		case c == '"':
			p.i = j + 1
			return true
		case c < 0x20:
			return false
		case c == '\\':
			j++
			if j >= len(p.data) {
				return false
			}
			switch p.data[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if j+4 >= len(p.data) {
					return false
				}
				for _, h := range p.data[j+1 : j+5] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return false
					}
				}
				j += 4
			default:
				return false
			}
		}
	}
	return false
}

// integerPart consumes a JSON number's optional minus sign and integer
// digits (no leading zeros).
func (p *fastParser) integerPart() bool {
	if p.peek() == '-' {
		p.i++
	}
	digits := p.i
	for p.i < len(p.data) && p.data[p.i] >= '0' && p.data[p.i] <= '9' {
		p.i++
	}
	return p.i > digits && (p.data[digits] != '0' || p.i-digits == 1)
}

// number consumes a JSON number.
func (p *fastParser) number() bool {
	if !p.integerPart() {
		return false
	}
	if p.peek() == '.' {
		p.i++
		f := p.i
		for p.i < len(p.data) && p.data[p.i] >= '0' && p.data[p.i] <= '9' {
			p.i++
		}
		if p.i == f {
			return false
		}
	}
	if c := p.peek(); c == 'e' || c == 'E' {
		p.i++
		if c := p.peek(); c == '+' || c == '-' {
			p.i++
		}
		e := p.i
		for p.i < len(p.data) && p.data[p.i] >= '0' && p.data[p.i] <= '9' {
			p.i++
		}
		if p.i == e {
			return false
		}
	}
	return true
}
