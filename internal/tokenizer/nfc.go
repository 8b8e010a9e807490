package tokenizer

import (
	"slices"
	"unicode/utf8"
)

// NFC as the library computes it: its own tables (tables_gen.go), canonical
// ordering by combining class, canonical composition, and no U+034F ever
// inserted after long runs of non-starters.

const (
	hangulSBase  = 0xAC00
	hangulLBase  = 0x1100
	hangulVBase  = 0x1161
	hangulTBase  = 0x11A7
	hangulLCount = 19
	hangulVCount = 21
	hangulTCount = 28
	hangulNCount = hangulVCount * hangulTCount
	hangulSCount = hangulLCount * hangulNCount
)

var composeTable map[uint64]rune

func init() {
	composeTable = make(map[uint64]rune, len(compositions))
	for _, c := range compositions {
		composeTable[uint64(c[0])<<32|uint64(c[1])] = c[2]
	}
}

func ccc(r rune) uint8 {
	if r < 0x300 {
		return 0
	}
	return combiningClass[r]
}

// nfc returns s (valid UTF-8) in Normalization Form C. Text whose runes all have a quick
// check of Yes and class 0 is returned as is, without copying; otherwise
// only the stretches around runes that may change are normalized.
//
// A rune that is not flagged (clsNFC) is a starter that composes with
// nothing before it, so nothing on its left interacts with anything on its
// right except through it: each stretch runs from the unflagged rune before
// a flagged one to the next unflagged rune.
func nfc(s string) string {
	var buf []byte
	done := 0  // s[:done] is in buf (or needs no copy while buf is nil)
	prev := -1 // start of the last unflagged rune
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			prev = i
			i++
			continue
		}
		r, n := decode(s, i)
		if classStage2[int(classStage1[r>>8])<<8|int(r&0xFF)]&clsNFC == 0 {
			prev = i
			i += n
			continue
		}
		start := i
		if prev >= done {
			start = prev
		}
		end := i + n
		for end < len(s) {
			r, n := utf8.DecodeRuneInString(s[end:])
			if runeClass(r)&clsNFC == 0 {
				break
			}
			end += n
		}
		if buf == nil {
			buf = make([]byte, 0, len(s)+8)
		}
		buf = append(buf, s[done:start]...)
		buf = appendNFC(buf, s[start:end])
		done, i, prev = end, end, -1
	}
	if buf == nil {
		return s
	}
	return string(append(buf, s[done:]...))
}

// appendNFC appends the NFC of s to dst: full decomposition with canonical
// ordering, then canonical composition.
func appendNFC(dst []byte, s string) []byte {
	d := make([]rune, 0, len(s))
	for _, r := range s {
		d = appendDecomposed(d, r)
	}
	orderMarks(d)
	d = compose(d)
	for _, r := range d {
		dst = utf8.AppendRune(dst, r)
	}
	return dst
}

func appendDecomposed(d []rune, r rune) []rune {
	if r >= hangulSBase && r < hangulSBase+hangulSCount {
		si := r - hangulSBase
		d = append(d, hangulLBase+si/hangulNCount, hangulVBase+(si%hangulNCount)/hangulTCount)
		if t := si % hangulTCount; t != 0 {
			d = append(d, hangulTBase+t)
		}
		return d
	}
	if dec, ok := decomposition[r]; ok {
		return append(d, dec...)
	}
	return append(d, r)
}

// orderMarks puts each run of non-starters in canonical order: a stable
// sort by combining class, O(n log n) however long the run.
func orderMarks(d []rune) {
	for i := 0; i < len(d); {
		if ccc(d[i]) == 0 {
			i++
			continue
		}
		j := i + 1
		sorted := true
		for j < len(d) && ccc(d[j]) != 0 {
			if ccc(d[j]) < ccc(d[j-1]) {
				sorted = false
			}
			j++
		}
		if !sorted {
			slices.SortStableFunc(d[i:j], func(a, b rune) int { return int(ccc(a)) - int(ccc(b)) })
		}
		i = j
	}
}

func composePair(a, b rune) (rune, bool) {
	// Hangul L + V, LV + T.
	if a >= hangulLBase && a < hangulLBase+hangulLCount && b >= hangulVBase && b < hangulVBase+hangulVCount {
		return hangulSBase + ((a-hangulLBase)*hangulVCount+(b-hangulVBase))*hangulTCount, true
	}
	if a >= hangulSBase && a < hangulSBase+hangulSCount && (a-hangulSBase)%hangulTCount == 0 &&
		b > hangulTBase && b < hangulTBase+hangulTCount {
		return a + (b - hangulTBase), true
	}
	c, ok := composeTable[uint64(a)<<32|uint64(b)]
	return c, ok
}

// compose is canonical composition over a decomposed, ordered sequence, in
// place: a rune joins the last starter unless a rune between them is a
// starter or has a class at least its own.
func compose(d []rune) []rune {
	if len(d) == 0 {
		return d
	}
	starter := -1
	var lastClass int
	if ccc(d[0]) == 0 {
		starter = 0
	} else {
		lastClass = 256
	}
	out := 1
	for i := 1; i < len(d); i++ {
		r := d[i]
		c := int(ccc(r))
		if starter >= 0 && (lastClass < c || lastClass == 0) {
			if comp, ok := composePair(d[starter], r); ok {
				d[starter] = comp
				continue
			}
		}
		if c == 0 {
			starter = out
		}
		lastClass = c
		d[out] = r
		out++
	}
	return d[:out]
}
