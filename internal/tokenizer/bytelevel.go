package tokenizer

import "unicode/utf8"

// byteToRune is GPT-2's byte-to-character table used by ByteLevel: printable
// bytes stand for themselves, the other 68 are moved to U+0100 onwards in
// byte order.
var byteToRune [256]rune

// runeToByte inverts byteToRune: runeToByte[r] is the byte plus one, 0 for
// runes outside the alphabet (all of which are below 324).
var runeToByte [324]uint16

func init() {
	n := 0
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			byteToRune[b] = rune(b)
		} else {
			byteToRune[b] = rune(256 + n)
			n++
		}
		runeToByte[byteToRune[b]] = uint16(b) + 1
	}
}

// byteLevelDecode maps a token written in the ByteLevel alphabet back to the
// bytes it stands for. ok is false when a character is outside the alphabet.
func byteLevelDecode(tok string) ([]byte, bool) {
	return appendByteLevelDecode(make([]byte, 0, len(tok)), tok)
}

func appendByteLevelDecode(out []byte, tok string) ([]byte, bool) {
	for _, r := range tok {
		if r < 0 || int(r) >= len(runeToByte) || runeToByte[r] == 0 {
			return nil, false
		}
		out = append(out, byte(runeToByte[r]-1))
	}
	return out, true
}

// byteLevelEncode writes raw bytes in the ByteLevel alphabet.
func byteLevelEncode(b []byte) string {
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = utf8.AppendRune(out, byteToRune[c])
	}
	return string(out)
}

// appendLossy appends b to dst as valid UTF-8 the way Rust's
// String::from_utf8_lossy does: each maximal invalid subpart (the longest
// prefix of a well-formed sequence, or one byte) becomes one U+FFFD.
func appendLossy(dst []byte, b []byte) []byte {
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			dst = append(dst, c)
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if r != utf8.RuneError || size > 1 {
			dst = append(dst, b[i:i+size]...)
			i += size
			continue
		}
		dst = append(dst, "\uFFFD"...)
		i += maximalSubpart(b[i:])
	}
	return dst
}

// maximalSubpart is the length of the invalid sequence at the start of b
// that Unicode's "maximal subpart" practice replaces with one U+FFFD.
func maximalSubpart(b []byte) int {
	c := b[0]
	var need int
	lo, hi := byte(0x80), byte(0xBF)
	switch {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		need = 2
	case c == 0xED:
		need, hi = 2, 0x9F
	case c == 0xF0:
		need, lo = 3, 0x90
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	case c == 0xF4:
		need, hi = 3, 0x8F
	default:
		return 1
	}
	n := 1
	for k := 0; k < need && n < len(b); k++ {
		x := b[n]
		if x < lo || x > hi {
			break
		}
		lo, hi = 0x80, 0xBF
		n++
	}
	return n
}
