package secret

import (
	"sort"
)

// Redacted is written in place of a secret: in records, server logs,
// argv and environments shown in a bundle.
const Redacted = "[redacted]"

// MinLen is the shortest secret scrubbed: a shorter value ("1", "abc") is
// everywhere in a log or a reply, and replacing it would garble every line
// without hiding anything.
const MinLen = 4

// Matcher finds any of its patterns at an offset of a text, the longest
// first, and tells whether the end of a text may begin one.
type Matcher struct {
	patterns []string // longest first
	starts   [256]bool
}

// NewMatcher returns a Matcher of the non-empty patterns given.
func NewMatcher(patterns []string) *Matcher {
	m := &Matcher{}
	for _, p := range patterns {
		if p != "" {
			m.patterns = append(m.patterns, p)
		}
	}
	sort.SliceStable(m.patterns, func(i, j int) bool { return len(m.patterns[i]) > len(m.patterns[j]) })
	for _, p := range m.patterns {
		m.starts[p[0]] = true
	}
	return m
}

// Pattern is the k-th pattern, as Match numbers them.
func (m *Matcher) Pattern(k int) string { return m.patterns[k] }

// Starts reports whether some pattern begins with the byte c: a scan
// skips every other byte at the cost of one look-up.
func (m *Matcher) Starts(c byte) bool { return m.starts[c] }

// Match returns the longest pattern b begins with (its index and length),
// or -1 and 0.
func (m *Matcher) Match(b []byte) (int, int) { return matchAt(m, b) }

// MayStart reports whether b, the end of what arrived so far, is the
// beginning of a pattern longer than n bytes.
func (m *Matcher) MayStart(b []byte, n int) bool { return mayStart(m, b, n) }

// text is what a Matcher reads: a log's bytes or a record's string.
type text interface{ ~string | ~[]byte }

func matchAt[T text](m *Matcher, b T) (int, int) {
	for k, p := range m.patterns {
		if len(b) >= len(p) && string(b[:len(p)]) == p {
			return k, len(p)
		}
	}
	return -1, 0
}

func mayStart[T text](m *Matcher, b T, n int) bool {
	for _, p := range m.patterns {
		if len(b) < len(p) && len(p) > n && p[:len(b)] == string(b) {
			return true
		}
	}
	return false
}

// Values returns the secrets of values that are scrubbed: those of MinLen
// bytes or more, each once, in their order.
func Values(values []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, v := range values {
		if len(v) >= MinLen && !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// Set is the secrets a rehearsal must not write. A nil *Set holds none,
// and its Scrub costs nothing.
type Set struct {
	m *Matcher
}

// New returns the Set of values (see Values), or nil when none of them is
// a secret to scrub.
func New(values ...string) *Set {
	v := Values(values)
	if len(v) == 0 {
		return nil
	}
	return &Set{m: NewMatcher(v)}
}

// Scrub returns s with every secret replaced by Redacted, in one
// pass, and whether it replaced any. As at the end of a log, a tail of s
// that begins a secret (MinLen bytes of it or more: a reply cut short in
// the middle of one) is replaced too.
func (set *Set) Scrub(s string) (string, bool) {
	if set == nil {
		return s, false
	}
	var out []byte
	start := 0
	for i := 0; i < len(s); {
		if !set.m.starts[s[i]] {
			i++
			continue
		}
		_, n := matchAt(set.m, s[i:])
		if n == 0 && len(s)-i >= MinLen && mayStart(set.m, s[i:], 0) {
			n = len(s) - i
		}
		if n == 0 {
			i++
			continue
		}
		out = append(out, s[start:i]...)
		out = append(out, Redacted...)
		i += n
		start = i
	}
	if out == nil {
		return s, false
	}
	return string(append(out, s[start:]...)), true
}

// Text is Scrub's string alone, for a line or a message.
func (set *Set) Text(s string) string {
	out, _ := set.Scrub(s)
	return out
}
