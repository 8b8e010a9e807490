package bundle

import "bytes"

// appendIndented appends src, one JSON value as encoding/json writes it
// compact (no space between tokens), to dst indented as json.Indent(dst,
// src, prefix, indent) indents it, byte for byte: a newline, prefix and
// one indent per level after each '{', '[' and ',' and before each
// closing '}' and ']', a space after each ':', an empty object or array
// kept as {} or []; strings copied as they are. It is json.Indent less
// its byte-by-byte scanner, which the records' indented encoding spent a
// fifth of a merge's time in; src must be valid compact JSON (what
// json.Marshal gives).
func appendIndented(dst, src []byte, prefix, indent string) []byte {
	depth := 0
	needIndent := false
	newline := func() {
		dst = append(dst, '\n')
		dst = append(dst, prefix...)
		for range depth {
			dst = append(dst, indent...)
		}
	}
	for i := 0; i < len(src); i++ {
		c := src[i]
		if needIndent && c != '}' && c != ']' {
			needIndent = false
			depth++
			newline()
		}
		switch c {
		case '"':
			end := stringEnd(src, i)
			dst = append(dst, src[i:end]...)
			i = end - 1
		case '{', '[':
			needIndent = true
			dst = append(dst, c)
		case ',':
			dst = append(dst, c)
			newline()
		case ':':
			dst = append(dst, c, ' ')
		case '}', ']':
			if needIndent {
				needIndent = false // {} and [] stay so
			} else {
				depth--
				newline()
			}
			dst = append(dst, c)
		default:
			// A number or a literal: copy it through its end.
			j := i + 1
			for j < len(src) && !indentStop[src[j]] {
				j++
			}
			dst = append(dst, src[i:j]...)
			i = j - 1
		}
	}
	return dst
}

// indentStop marks the bytes that end a number or literal in compact
// JSON.
var indentStop = func() (t [256]bool) {
	for _, c := range []byte(`"{}[],:`) {
		t[c] = true
	}
	return t
}()

// stringEnd is the index just past the closing quote of the string that
// opens at src[i].
func stringEnd(src []byte, i int) int {
	j := i + 1
	for {
		q := bytes.IndexByte(src[j:], '"')
		if q < 0 {
			return len(src)
		}
		q += j
		// The quote is escaped when an odd run of backslashes precedes it.
		k := q - 1
		for k > i && src[k] == '\\' {
			k--
		}
		if (q-1-k)%2 == 0 {
			return q + 1
		}
		j = q + 1
	}
}
