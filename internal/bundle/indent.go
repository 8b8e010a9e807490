package bundle

import "bytes"

// appendIndented appends src, one JSON value as encoding/json writes it
// compact (no space between tokens), to dst indented as json.Indent(dst,
// src, prefix, indent) indents it, byte for byte, but for one thing: an
// array of numbers alone stays on one line as src has it ([0.1,0.25]).
// Otherwise: a newline, prefix and one indent per level after each '{',
// '[' and ',' and before each closing '}' and ']', a space after each ':',
// an empty object or array kept as {} or []; strings copied as they are.
// It is json.Indent less its byte-by-byte scanner, which the records'
// indented encoding spent a fifth of a merge's time in; src must be valid
// compact JSON (what json.Marshal gives). The arrays of numbers are the
// records' chunk times, a third of results.json indented one per line: on
// one line they are the journal's bytes, which verify hashes as they are,
// and no whitespace to skip.
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
		case '[':
			if end := numberArrayEnd(src, i); end > 0 {
				dst = append(dst, src[i:end]...)
				i = end - 1
				continue
			}
			needIndent = true
			dst = append(dst, c)
		case '{':
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

// numberArrayEnd is the index just past the ']' closing the array that
// opens at src[i] when it holds numbers alone (at least one), else 0.
func numberArrayEnd(src []byte, i int) int {
	j := i + 1
	if j >= len(src) || !numberByte[src[j]] || src[j] == ',' {
		return 0
	}
	for ; j < len(src) && numberByte[src[j]]; j++ {
	}
	if j < len(src) && src[j] == ']' {
		return j + 1
	}
	return 0
}

// numberByte marks the bytes of numbers and the commas between them.
var numberByte = func() (t [256]bool) {
	for _, c := range []byte("0123456789.eE+-,") {
		t[c] = true
	}
	return t
}()

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
