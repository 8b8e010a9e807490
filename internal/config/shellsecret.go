package config

import (
	"regexp"
	"sort"
	"strings"

	"github.com/rehearse/rehearse/internal/secret"
)

// secretSpan is a secret value inside an argv item: bytes [start, end) of
// argv[item], and the value the process sees there (quotes and escapes
// removed where the item is a shell string).
type secretSpan struct {
	item, start, end int
	value            string
}

// argWord is a word of an argv: an item of its own, or a word of a shell
// string inside an item (shell), bytes [start, end) of argv[item].
type argWord struct {
	item, start, end int
	shell            bool
}

// maxShellDepth bounds how deep shells inside shells are read
// (`sh -c "bash -c '…'"` is two).
const maxShellDepth = 4

// assignmentRE matches a variable assignment's name and its "=".
var assignmentRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// secretSpans returns the secret values argv carries: the value after a
// secret-named flag (--api-key X, --hf-token=X) and of a secret-named
// variable's assignment (HF_TOKEN=X), as separate items or as words of a
// shell string inside one (sh -c "FOO_TOKEN=abc vllm serve m --api-key
// 'X'"), in order.
func secretSpans(argv []string) []secretSpan {
	words := make([]argWord, len(argv))
	for i, a := range argv {
		words[i] = argWord{item: i, end: len(a)}
	}
	var out []secretSpan
	scanWords(argv, words, 0, &out)
	return out
}

// scanWords appends the secret values among words to out, reading the
// words that look like shell strings as such, depth shells deep.
func scanWords(argv []string, words []argWord, depth int, out *[]secretSpan) {
	for k := 0; k < len(words); k++ {
		w := words[k]
		raw := argv[w.item][w.start:w.end]
		if strings.HasPrefix(raw, "-") {
			name, _, hasValue := strings.Cut(raw, "=")
			switch {
			case !IsSecretName(strings.TrimLeft(name, "-")):
			case hasValue:
				addSpan(argv, argWord{w.item, w.start + len(name) + 1, w.end, w.shell}, out)
			case k+1 < len(words) && !strings.HasPrefix(words[k+1].text(argv), "-"):
				addSpan(argv, words[k+1], out)
				k++
			}
			continue
		}
		inner, isShell := w.shellString(argv)
		if m := assignmentRE.FindString(raw); m != "" && (w.shell || !isShell) {
			if IsSecretName(m[:len(m)-1]) {
				addSpan(argv, argWord{w.item, w.start + len(m), w.end, w.shell}, out)
			}
			continue
		}
		if isShell && depth < maxShellDepth {
			scanWords(argv, shellWords(argv[w.item], w.item, inner.start, inner.end), depth+1, out)
		}
	}
}

// text is the word as the process sees it.
func (w argWord) text(argv []string) string {
	raw := argv[w.item][w.start:w.end]
	if w.shell {
		return unquote(raw)
	}
	return raw
}

// shellString returns the bytes of w that are a shell string to read as
// words: an item with a blank or an operator in it, or a quoted shell word
// with a blank inside its quotes.
func (w argWord) shellString(argv []string) (argWord, bool) {
	raw := argv[w.item][w.start:w.end]
	if !w.shell {
		return w, strings.ContainsAny(raw, " \t\n;&|")
	}
	if inner, ok := quotedInner(raw); ok && strings.ContainsAny(inner, " \t\n") {
		return argWord{w.item, w.start + 1, w.end - 1, true}, true
	}
	return w, false
}

// addSpan appends the value w holds, when there is one: in a shell word,
// inside its quotes, and not a variable's expansion ("$KEY"), which is
// not the secret.
func addSpan(argv []string, w argWord, out *[]secretSpan) {
	raw := argv[w.item][w.start:w.end]
	if !w.shell {
		if raw != "" {
			*out = append(*out, secretSpan{w.item, w.start, w.end, raw})
		}
		return
	}
	v := unquote(raw)
	if v == "" || strings.HasPrefix(strings.TrimLeft(raw, `"`), "$") {
		return
	}
	if _, ok := quotedInner(raw); ok {
		w.start, w.end = w.start+1, w.end-1
	}
	*out = append(*out, secretSpan{w.item, w.start, w.end, v})
}

// redactSpans replaces each span's bytes in out (argv's copy) with
// secret.Redacted.
func redactSpans(out []string, spans []secretSpan) {
	sort.SliceStable(spans, func(i, j int) bool {
		if spans[i].item != spans[j].item {
			return spans[i].item < spans[j].item
		}
		return spans[i].start > spans[j].start // from the end, so offsets hold
	})
	for _, s := range spans {
		a := out[s.item]
		out[s.item] = a[:s.start] + secret.Redacted + a[s.end:]
	}
}

// isShellSep reports whether c ends an unquoted shell word.
func isShellSep(c byte) bool { return strings.IndexByte(" \t\n;&|()<>", c) >= 0 }

// shellWords splits s[start:end] into shell words (of item), keeping quotes
// and escapes in them; an unclosed quote runs to the end.
func shellWords(s string, item, start, end int) []argWord {
	var out []argWord
	for i := start; i < end; {
		if isShellSep(s[i]) {
			i++
			continue
		}
		w := i
		for i < end && !isShellSep(s[i]) {
			i = skipQuoted(s[:end], i) + 1
		}
		out = append(out, argWord{item, w, min(i, end), true})
	}
	return out
}

// skipQuoted returns the index of the last byte of the quoted part or
// escape that begins at s[i], or i for any other byte.
func skipQuoted(s string, i int) int {
	switch s[i] {
	case '\\':
		return min(i+1, len(s)-1)
	case '\'':
		if j := strings.IndexByte(s[i+1:], '\''); j >= 0 {
			return i + 1 + j
		}
		return len(s) - 1
	case '"':
		for j := i + 1; j < len(s); j++ {
			switch s[j] {
			case '\\':
				j++
			case '"':
				return j
			}
		}
		return len(s) - 1
	}
	return i
}

// quotedInner returns what is inside raw's quotes when raw is one quoted
// part ('…' or "…") and nothing else.
func quotedInner(raw string) (string, bool) {
	if len(raw) < 2 || (raw[0] != '\'' && raw[0] != '"') || skipQuoted(raw, 0) != len(raw)-1 || raw[len(raw)-1] != raw[0] {
		return "", false
	}
	return raw[1 : len(raw)-1], true
}

// unquote is the shell word raw as the process receives it: quotes
// removed, escapes applied ("\x" outside quotes, \" \\ \$ \` inside double
// quotes).
func unquote(raw string) string {
	if !strings.ContainsAny(raw, `'"\`) {
		return raw
	}
	var b strings.Builder
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; c {
		case '\'':
			j := skipQuoted(raw, i)
			b.WriteString(strings.TrimSuffix(raw[i+1:j+1], "'"))
			i = j
		case '"':
			for i++; i < len(raw) && raw[i] != '"'; i++ {
				if raw[i] == '\\' && i+1 < len(raw) && strings.IndexByte("\"\\$`", raw[i+1]) >= 0 {
					i++
				}
				b.WriteByte(raw[i])
			}
		case '\\':
			if i+1 < len(raw) {
				i++
				b.WriteByte(raw[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
