package bundle

import (
	"bytes"
	"encoding/binary"
	"io"
	"math/bits"
)

// arraySplitter cuts the elements of a JSON array of objects out of a
// stream positioned just past the array's '[', without decoding them: it
// finds each object's end by its braces outside strings, at memchr speed
// through the strings, where json.Decoder runs its scanner over every byte
// (most of the time of reading a big results.json). It checks what lies
// between the elements (space, commas, the closing bracket) and that each
// is an object; what is inside an object is the JSON decoder's to check,
// which decodes each element it hands out.
type arraySplitter struct {
	r     io.Reader
	buf   []byte
	pos   int
	err   error // the reader's, once met
	first bool
	done  bool
}

func newArraySplitter(r io.Reader) *arraySplitter {
	return &arraySplitter{r: r, buf: make([]byte, 0, readChunk), first: true}
}

// fill reads more after buf[keep:], moving that to the front; false when
// the reader has nothing more.
func (s *arraySplitter) fill(keep int) bool {
	if s.err != nil {
		return false
	}
	n := copy(s.buf[:cap(s.buf)], s.buf[keep:])
	s.buf = s.buf[:n]
	s.pos -= keep
	if len(s.buf) == cap(s.buf) {
		s.buf = append(s.buf, make([]byte, cap(s.buf))...)[:n]
	}
	m, err := s.r.Read(s.buf[n:cap(s.buf)])
	s.buf = s.buf[:n+m]
	if err != nil {
		s.err = err
	}
	return m > 0 || s.err == nil
}

// skipSpace moves past space; false at the end of the input.
func (s *arraySplitter) skipSpace() bool {
	for {
		for s.pos < len(s.buf) && isSpace(s.buf[s.pos]) {
			s.pos++
		}
		if s.pos < len(s.buf) {
			return true
		}
		if !s.fill(s.pos) {
			return false
		}
	}
}

// next is the next element (valid until the next call), io.EOF past the
// closing bracket, errMalformed for anything but objects separated by
// commas, or the reader's error.
func (s *arraySplitter) next() ([]byte, error) {
	if s.done {
		return nil, io.EOF
	}
	if !s.skipSpace() {
		return nil, s.readErr()
	}
	switch c := s.buf[s.pos]; {
	case c == ']':
		s.pos++
		s.done = true
		return nil, io.EOF
	case !s.first && c != ',':
		return nil, errMalformed
	case !s.first:
		s.pos++
		if !s.skipSpace() {
			return nil, s.readErr()
		}
	}
	s.first = false
	if s.buf[s.pos] != '{' {
		return nil, errMalformed
	}
	if end := fastEnd(s.buf, s.pos); end > 0 {
		start := s.pos
		s.pos = end
		return s.buf[start:end], nil
	}
	return s.scanObject()
}

// scanObject cuts out the object at s.pos by its braces outside strings,
// reading more as it needs (next's way where fastEnd cannot prove the
// end): a word at a time through numbers, space and literals, at memchr
// speed through strings.
func (s *arraySplitter) scanObject() ([]byte, error) {
	start, i, depth := s.pos, s.pos, 0
	for {
		if i == len(s.buf) {
			s.pos = i
			if !s.fill(start) {
				return nil, s.readErr()
			}
			i, start = s.pos, 0
			continue
		}
		if !splitSpecial[s.buf[i]] {
			// Numbers, space, literals, commas, colons: to the next
			// bracket, brace or quote, a word at a time.
			i++
			for i+8 <= len(s.buf) {
				n := splitCandidate(binary.LittleEndian.Uint64(s.buf[i:]))
				i += n
				if n < 8 {
					break
				}
			}
			for i < len(s.buf) && !splitSpecial[s.buf[i]] {
				i++
			}
			continue
		}
		switch s.buf[i] {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				s.pos = i + 1
				return s.buf[start : i+1], nil
			}
		case '"':
			// To the closing quote: one not preceded by an odd run of
			// backslashes.
			j := i + 1
			for {
				k := bytes.IndexByte(s.buf[j:], '"')
				if k < 0 {
					// Not in the buffer: read more, and look again from
					// the string's start.
					off := i - start
					s.pos = start
					if !s.fill(start) {
						return nil, s.readErr()
					}
					start, i = 0, off
					j = i + 1
					continue
				}
				q := j + k
				b := 0
				for q-1-b > i && s.buf[q-1-b] == '\\' {
					b++
				}
				if b%2 == 0 {
					i = q
					break
				}
				j = q + 1
			}
		}
		i++
	}
}

// fastEnd is the index past the closing brace of the object that opens
// at b[start], where two searches at memchr speed can tell it (0 where
// they cannot: the scan of next then decides): the first closing brace
// after it must follow a newline, a tab or a return with nothing but
// spaces between, and no brace may open before it. That brace is then
// the object's own. It is outside every string, as JSON strings hold none
// of those three raw (in a file whose strings do, the decoder refuses
// the element as it would the scan's). And it cannot close anything
// nested: that would have opened with a brace after start. Every record
// results.json writes ends so ("\n  }"), unless its strings hold braces.
func fastEnd(b []byte, start int) int {
	rest := b[start+1:]
	k := bytes.IndexByte(rest, '}')
	if k < 0 || bytes.IndexByte(rest[:k], '{') >= 0 {
		return 0
	}
	for j := k - 1; j >= 0; j-- {
		switch rest[j] {
		case ' ':
			continue
		case '\n', '\r', '\t':
			return start + 1 + k + 1
		}
		return 0
	}
	return 0
}

// splitCandidate is how many of the eight bytes of x (the first in its
// low byte) come before the first that may be a bracket, a brace or a
// quote: masked with 0xD9, the four brackets and braces are 0x59, as are
// only Y, _, y and DEL besides (which JSON has only inside strings, where
// the splitter does not look this way; should one be met, the byte loop
// after this decides). A zero byte of v is found by the borrow of
// subtracting one from each byte: the lowest borrow marks the first.
func splitCandidate(x uint64) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	b := x&(0xD9*ones) ^ 0x59*ones
	q := x ^ '"'*ones
	t := (b-ones)&^b&highs | (q-ones)&^q&highs
	return bits.TrailingZeros64(t) / 8
}

// splitSpecial are the bytes the splitter looks at: brackets, braces and
// quotes.
var splitSpecial = func() (t [256]bool) {
	for _, c := range "{}[]\"" {
		t[c] = true
	}
	return t
}()

func (s *arraySplitter) readErr() error {
	if s.err == nil || s.err == io.EOF {
		return errMalformed
	}
	return s.err
}

// rest is the input after the array's closing bracket.
func (s *arraySplitter) rest() io.Reader {
	return io.MultiReader(bytes.NewReader(bytes.Clone(s.buf[s.pos:])), s.r)
}
