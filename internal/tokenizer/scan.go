package tokenizer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// A tokenizer.json is mostly model.vocab and model.merges: hundreds of
// thousands of short strings. jsonScanner reads those two directly, which is
// several times faster than encoding/json, and hands every other (small)
// value to encoding/json.
type jsonScanner struct {
	data []byte
	pos  int
}

func (s *jsonScanner) errorf(format string, a ...any) error {
	return fmt.Errorf("JSON at byte %d: %s", s.pos, fmt.Sprintf(format, a...))
}

func (s *jsonScanner) ws() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

func (s *jsonScanner) expect(c byte) error {
	s.ws()
	if s.pos >= len(s.data) || s.data[s.pos] != c {
		if s.pos >= len(s.data) {
			return s.errorf("unexpected end, want %q", c)
		}
		return s.errorf("found %q, want %q", s.data[s.pos], c)
	}
	s.pos++
	return nil
}

// peek returns the next non-space byte, 0 at the end.
func (s *jsonScanner) peek() byte {
	s.ws()
	if s.pos >= len(s.data) {
		return 0
	}
	return s.data[s.pos]
}

// str reads a JSON string and returns its value.
func (s *jsonScanner) str() (string, error) {
	if err := s.expect('"'); err != nil {
		return "", err
	}
	start := s.pos
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		switch {
		case c == '"':
			v := s.data[start:s.pos]
			s.pos++
			if !utf8.Valid(v) {
				return "", s.errorf("string is not valid UTF-8")
			}
			return string(v), nil
		case c == '\\':
			return s.strSlow(start)
		case c < 0x20:
			return "", s.errorf("control character in string")
		}
		s.pos++
	}
	return "", s.errorf("unterminated string")
}

func (s *jsonScanner) strSlow(start int) (string, error) {
	buf := append([]byte(nil), s.data[start:s.pos]...)
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		switch {
		case c == '"':
			s.pos++
			if !utf8.Valid(buf) {
				return "", s.errorf("string is not valid UTF-8")
			}
			return string(buf), nil
		case c < 0x20:
			return "", s.errorf("control character in string")
		case c != '\\':
			buf = append(buf, c)
			s.pos++
			continue
		}
		if s.pos+1 >= len(s.data) {
			return "", s.errorf("unterminated escape")
		}
		e := s.data[s.pos+1]
		s.pos += 2
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, err := s.hex4()
			if err != nil {
				return "", err
			}
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if s.pos+1 < len(s.data) && s.data[s.pos] == '\\' && s.data[s.pos+1] == 'u' {
					save := s.pos
					s.pos += 2
					if r2, err = s.hex4(); err != nil {
						return "", err
					}
					if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
						r = d
					} else {
						s.pos = save
						r = utf8.RuneError
					}
				} else {
					r = utf8.RuneError
				}
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return "", s.errorf("bad escape \\%c", e)
		}
	}
	return "", s.errorf("unterminated string")
}

func (s *jsonScanner) hex4() (rune, error) {
	if s.pos+4 > len(s.data) {
		return 0, s.errorf("short \\u escape")
	}
	v, err := strconv.ParseUint(string(s.data[s.pos:s.pos+4]), 16, 32)
	if err != nil {
		return 0, s.errorf("bad \\u escape %q", s.data[s.pos:s.pos+4])
	}
	s.pos += 4
	return rune(v), nil
}

// integer reads a non-negative JSON integer.
func (s *jsonScanner) integer() (int, error) {
	s.ws()
	start := s.pos
	for s.pos < len(s.data) && s.data[s.pos] >= '0' && s.data[s.pos] <= '9' {
		s.pos++
	}
	v, err := strconv.Atoi(string(s.data[start:s.pos]))
	if err != nil || s.pos-start > 10 {
		s.pos = start
		return 0, s.errorf("want a non-negative integer id")
	}
	return v, nil
}

// skip moves past one JSON value of any kind and returns its bytes; the
// value is checked by encoding/json when it is decoded.
func (s *jsonScanner) skip() ([]byte, error) {
	s.ws()
	start := s.pos
	if s.pos >= len(s.data) {
		return nil, s.errorf("unexpected end, want a value")
	}
	switch s.data[s.pos] {
	case '"':
		if _, err := s.str(); err != nil {
			return nil, err
		}
		return s.data[start:s.pos], nil
	case '{', '[':
		depth := 0
		for s.pos < len(s.data) {
			switch s.data[s.pos] {
			case '"':
				if _, err := s.str(); err != nil {
					return nil, err
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					s.pos++
					return s.data[start:s.pos], nil
				}
			}
			s.pos++
		}
		return nil, s.errorf("unexpected end")
	}
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return s.data[start:s.pos], nil
		}
		s.pos++
	}
	return s.data[start:s.pos], nil
}

// object calls field for each key of the object that starts next.
func (s *jsonScanner) object(field func(key string) error) error {
	if err := s.expect('{'); err != nil {
		return err
	}
	if s.peek() == '}' {
		s.pos++
		return nil
	}
	for {
		key, err := s.str()
		if err != nil {
			return err
		}
		if err := s.expect(':'); err != nil {
			return err
		}
		if err := field(key); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.pos++
		case '}':
			s.pos++
			return nil
		default:
			return s.errorf("want ',' or '}'")
		}
	}
}

// array calls elem for each element of the array that starts next.
func (s *jsonScanner) array(elem func(i int) error) error {
	if err := s.expect('['); err != nil {
		return err
	}
	if s.peek() == ']' {
		s.pos++
		return nil
	}
	for i := 0; ; i++ {
		if err := elem(i); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.pos++
		case ']':
			s.pos++
			return nil
		default:
			return s.errorf("want ',' or ']'")
		}
	}
}

// splitFile reads a tokenizer.json: model.vocab and model.merges are decoded
// here (vocab keyed by raw bytes, merges as raw-byte pairs); the other values
// are decoded by encoding/json into f.
func splitFile(data []byte, f *fileJSON) (vocab map[string]int, merges [][2]string, err error) {
	s := &jsonScanner{data: data}
	var rest, model bytes.Buffer
	addRaw := func(b *bytes.Buffer, key string, raw []byte) {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(raw)
	}
	sawVocab, sawMerges := false, false
	err = s.object(func(key string) error {
		if key != "model" {
			raw, err := s.skip()
			if err != nil {
				return err
			}
			addRaw(&rest, key, raw)
			return nil
		}
		if s.peek() != '{' {
			return fmt.Errorf("model is not an object")
		}
		return s.object(func(mkey string) error {
			switch mkey {
			case "vocab":
				sawVocab = true
				var err error
				vocab, err = s.vocab()
				return err
			case "merges":
				sawMerges = true
				var err error
				merges, err = s.merges()
				return err
			}
			raw, err := s.skip()
			if err != nil {
				return err
			}
			addRaw(&model, mkey, raw)
			return nil
		})
	})
	if err != nil {
		return nil, nil, err
	}
	if s.peek() != 0 {
		return nil, nil, s.errorf("data after the top-level object")
	}
	if !sawVocab {
		return nil, nil, fmt.Errorf("model.vocab is missing")
	}
	if !sawMerges {
		merges = nil
	}
	if err := json.Unmarshal([]byte("{"+rest.String()+"}"), f); err != nil {
		return nil, nil, err
	}
	if err := json.Unmarshal([]byte("{"+model.String()+"}"), &f.Model); err != nil {
		return nil, nil, fmt.Errorf("model: %v", err)
	}
	return vocab, merges, nil
}

// vocab reads model.vocab: token (in the ByteLevel alphabet) → id, keyed by
// the raw bytes each token stands for.
func (s *jsonScanner) vocab() (map[string]int, error) {
	v := make(map[string]int, 1<<17)
	var buf []byte
	err := s.object(func(tok string) error {
		id, err := s.integer()
		if err != nil {
			return fmt.Errorf("model.vocab %q: %v", tok, err)
		}
		var ok bool
		buf, ok = appendByteLevelDecode(buf[:0], tok)
		if !ok {
			return fmt.Errorf("model.vocab token %q is not byte-level (a character outside the ByteLevel alphabet)", tok)
		}
		if prev, dup := v[string(buf)]; dup {
			return fmt.Errorf("model.vocab tokens %d and %d stand for the same bytes %q", prev, id, buf)
		}
		v[string(buf)] = id
		return nil
	})
	return v, err
}

// merges reads model.merges in either format the library writes: "a b"
// strings, or ["a", "b"] pairs; sides are returned as raw bytes.
func (s *jsonScanner) merges() ([][2]string, error) {
	if s.peek() == 'n' {
		if _, err := s.skip(); err != nil {
			return nil, err
		}
		return nil, nil
	}
	out := make([][2]string, 0, 1<<17)
	var bufA, bufB []byte
	err := s.array(func(i int) error {
		var a, b string
		if s.peek() == '[' {
			n := 0
			err := s.array(func(k int) error {
				t, err := s.str()
				if err != nil {
					return err
				}
				switch k {
				case 0:
					a = t
				case 1:
					b = t
				}
				n++
				return nil
			})
			if err != nil {
				return fmt.Errorf("model.merges[%d]: %v", i, err)
			}
			if n != 2 {
				return fmt.Errorf("model.merges[%d] has %d tokens, want 2", i, n)
			}
		} else {
			line, err := s.str()
			if err != nil {
				return fmt.Errorf("model.merges[%d]: %v", i, err)
			}
			var ok bool
			a, b, ok = cutSpace(line)
			if !ok {
				return fmt.Errorf("model.merges[%d] %q is not two tokens separated by one space", i, line)
			}
		}
		var ok1, ok2 bool
		bufA, ok1 = appendByteLevelDecode(bufA[:0], a)
		bufB, ok2 = appendByteLevelDecode(bufB[:0], b)
		if !ok1 || !ok2 {
			return fmt.Errorf("model.merges[%d] (%q, %q) is not byte-level", i, a, b)
		}
		out = append(out, [2]string{string(bufA), string(bufB)})
		return nil
	})
	return out, err
}

func cutSpace(s string) (string, string, bool) {
	i := bytes.IndexByte([]byte(s), ' ')
	if i < 0 || bytes.IndexByte([]byte(s[i+1:]), ' ') >= 0 {
		return "", "", false
	}
	return s[:i], s[i+1:], true
}
