package tokenizer

import "unicode/utf8"

// splitKind names one of the pre-tokenizer regexes implemented by hand.
type splitKind uint8

const (
	splitQwen2  splitKind = iota + 1 // Qwen2/2.5/3: one digit per piece
	splitLlama3                      // Llama 3: up to three digits per piece
	splitGPT2                        // GPT-2 ByteLevel regex
)

func (k splitKind) String() string {
	switch k {
	case splitQwen2:
		return "qwen2"
	case splitLlama3:
		return "llama3"
	case splitGPT2:
		return "gpt2"
	}
	return "unknown"
}

// The splitter only sees valid UTF-8 (Encode replaces invalid bytes first),
// so runes are decoded without checks.

// decode returns the rune at s[i] and its size; s[i:] starts with a valid
// multi-byte sequence.
func decode(s string, i int) (rune, int) {
	c := s[i]
	switch {
	case c < 0xE0:
		return rune(c&0x1F)<<6 | rune(s[i+1]&0x3F), 2
	case c < 0xF0:
		return rune(c&0x0F)<<12 | rune(s[i+1]&0x3F)<<6 | rune(s[i+2]&0x3F), 3
	}
	return rune(c&0x07)<<18 | rune(s[i+1]&0x3F)<<12 | rune(s[i+2]&0x3F)<<6 | rune(s[i+3]&0x3F), 4
}

// at decodes the rune at s[i] and returns it with its size and class.
func at(s string, i int) (rune, int, uint8) {
	c := s[i]
	if c < utf8.RuneSelf {
		return rune(c), 1, asciiClass[c]
	}
	r, n := decode(s, i)
	return r, n, classStage2[int(classStage1[r>>8])<<8|int(r&0xFF)]
}

func classAt(s string, i int) (uint8, int) {
	c := s[i]
	if c < utf8.RuneSelf {
		return asciiClass[c], 1
	}
	r, n := decode(s, i)
	return classStage2[int(classStage1[r>>8])<<8|int(r&0xFF)], n
}

// scanWith returns the end of the run of runes starting at i whose class
// has any of bits.
func scanWith(s string, i int, bits uint8) int {
	for i < len(s) {
		c, n := classAt(s, i)
		if c&bits == 0 {
			return i
		}
		i += n
	}
	return i
}

// scanOther returns the end of the run of runes starting at i that are
// neither letter, number nor white space.
func scanOther(s string, i int) int {
	for i < len(s) {
		c, n := classAt(s, i)
		if c&(clsL|clsN|clsS) != 0 {
			return i
		}
		i += n
	}
	return i
}

func scanNewlines(s string, i int) int {
	for i < len(s) && (s[i] == '\r' || s[i] == '\n') {
		i++
	}
	return i
}

// contraction returns the byte length of the contraction suffix at s[i:]
// ('s, 't, 're, 've, 'm, 'll, 'd after the apostrophe), 0 if none.
// foldCase matches as Oniguruma's (?i) does, where ſ (U+017F) folds to s.
func contraction(s string, i int, foldCase bool) int {
	if i >= len(s) {
		return 0
	}
	lower := func(j int) (byte, int) {
		c := s[j]
		if c < utf8.RuneSelf {
			if foldCase && c >= 'A' && c <= 'Z' {
				c += 'a' - 'A'
			}
			return c, 1
		}
		if foldCase && c == 0xC5 && j+1 < len(s) && s[j+1] == 0xBF { // ſ
			return 's', 2
		}
		return 0, 1
	}
	c, n := lower(i)
	switch c {
	case 's', 't', 'm', 'd':
		return n
	case 'r', 'v', 'l':
		if i+n >= len(s) {
			return 0
		}
		c2, n2 := lower(i + n)
		if (c == 'l' && c2 == 'l') || (c != 'l' && c2 == 'e') {
			return n + n2
		}
	}
	return 0
}

// next returns the end of the pre-tokenizer match that starts at s[i]
// (i < len(s)). The implemented patterns cover every character, so their
// matches tile the text and each one starts where the last ended.
func (k splitKind) next(s string, i int) int {
	if k == splitGPT2 {
		return nextGPT2(s, i)
	}
	r0, n0, c0 := at(s, i)
	// (?i:'s|'t|'re|'ve|'m|'ll|'d)
	if r0 == '\'' {
		if l := contraction(s, i+1, true); l > 0 {
			return i + 1 + l
		}
	}
	// \p{L}+ or [^\r\n\p{L}\p{N}]\p{L}+
	if c0&clsL != 0 {
		return scanWith(s, i+n0, clsL)
	}
	if c0&clsN == 0 && r0 != '\r' && r0 != '\n' && i+n0 < len(s) {
		if c1, n1 := classAt(s, i+n0); c1&clsL != 0 {
			return scanWith(s, i+n0+n1, clsL)
		}
	}
	// \p{N} (Qwen2) or \p{N}{1,3} (Llama 3)
	if c0&clsN != 0 {
		j := i + n0
		if k == splitLlama3 {
			for d := 1; d < 3 && j < len(s); d++ {
				c, n := classAt(s, j)
				if c&clsN == 0 {
					break
				}
				j += n
			}
		}
		return j
	}
	// ' ?[^\s\p{L}\p{N}]+[\r\n]*'
	if c0&clsS == 0 {
		return scanNewlines(s, scanOther(s, i+n0))
	}
	if r0 == ' ' && i+1 < len(s) {
		if c1, n1 := classAt(s, i+1); c1&(clsL|clsN|clsS) == 0 {
			return scanNewlines(s, scanOther(s, i+1+n1))
		}
	}
	return nextSpace(s, i, true)
}

// nextSpace matches at a white-space rune: \s*[\r\n]+ (when newlines is
// set), then \s+(?!\S), then \s+.
func nextSpace(s string, i int, newlines bool) int {
	j := scanWith(s, i, clsS)
	if newlines {
		// \r and \n are single bytes and never inside a multi-byte rune.
		for p := j - 1; p >= i; p-- {
			if s[p] == '\r' || s[p] == '\n' {
				return p + 1
			}
		}
	}
	if j == len(s) {
		return j
	}
	_, last := utf8.DecodeLastRuneInString(s[i:j])
	if j-last > i {
		return j - last
	}
	return j
}

// nextGPT2 is the GPT-2 pattern:
// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
func nextGPT2(s string, i int) int {
	r0, n0, c0 := at(s, i)
	if r0 == '\'' {
		if l := contraction(s, i+1, false); l > 0 {
			return i + 1 + l
		}
	}
	start := i
	if r0 == ' ' && i+1 < len(s) {
		c1, n1 := classAt(s, i+1)
		if c1&clsS == 0 {
			start, c0, n0 = i+1, c1, n1
		}
	}
	switch {
	case c0&clsL != 0:
		return scanWith(s, start+n0, clsL)
	case c0&clsN != 0:
		return scanWith(s, start+n0, clsN)
	case c0&clsS == 0:
		return scanOther(s, start+n0)
	}
	return nextSpace(s, i, false)
}
