package bundle

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// appendIndented must indent as json.Indent does, byte for byte, but for
// arrays of numbers alone, which stay on one line.
func checkIndent(t *testing.T, src []byte) {
	t.Helper()
	var indented bytes.Buffer
	if err := json.Indent(&indented, src, "  ", " "); err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	want := collapseNumberArrays(indented.Bytes())
	if got := appendIndented([]byte("x"), src, "  ", " "); string(got[1:]) != want {
		t.Fatalf("%s:\nindented %s\nwant %s", src, got[1:], want)
	}
}

// collapseNumberArrays puts each array of json.Indent's output that holds
// numbers alone back on one line, as compact JSON has it; it reads
// strings as JSON does, so a string's brackets are left alone.
func collapseNumberArrays(b []byte) string {
	var out []byte
	inString, escaped := false, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[':
			var compact []byte
			j, digits := i+1, false
			for ; j < len(b) && strings.IndexByte("0123456789.eE+-, \n", b[j]) >= 0; j++ {
				if b[j] >= '0' && b[j] <= '9' {
					digits = true
				}
				if b[j] != ' ' && b[j] != '\n' {
					compact = append(compact, b[j])
				}
			}
			if digits && j < len(b) && b[j] == ']' {
				out = append(out, '[')
				out = append(out, compact...)
				out = append(out, ']')
				i = j
				continue
			}
		}
		out = append(out, c)
	}
	return string(out)
}

func TestAppendIndentedIsJSONIndent(t *testing.T) {
	for _, s := range []string{
		`{}`, `[]`, `{"a":[]}`, `{"a":{}}`, `[[],[{}],{"":[]}]`, `1`, `"x"`, `null`, `true`,
		`{"a":"\"","b":"\\","c":"\\\"","d":"\\\\","e":"{[,:]}","f":"\u2028é\ud83d\ude00"}`,
		`[-0,1e-7,1.5e+300,-12.25,0.000001,123456789012345678]`,
		`{"k":[{"x":null,"y":[true,false]},{"z":"]"}],"w":{"v":{"u":[]}}}`,
	} {
		checkIndent(t, []byte(s))
	}
	// Records as the writer encodes them: the committed bundles'.
	for _, raw := range committedResults(t) {
		r, err := decodeWhole(raw)
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range r.Records {
			data, err := json.Marshal(rec)
			if err != nil {
				t.Fatal(err)
			}
			checkIndent(t, data)
		}
	}
	// Random values of every shape, strings of awkward bytes.
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{`"`, `\`, `{`, `}`, `[`, `]`, `,`, `:`, " ", "a", "é", "\u2028", "\x01", "<", "\n", "\\\""}
	str := func() string {
		var b strings.Builder
		for range rng.IntN(6) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	var value func(depth int) any
	value = func(depth int) any {
		switch k := rng.IntN(8); {
		case depth > 4 || k == 0:
			return rng.NormFloat64() * 1e6
		case k == 1:
			return str()
		case k == 2:
			return nil
		case k == 3:
			return rng.IntN(2) == 0
		case k < 6:
			var xs []any
			for range rng.IntN(4) {
				xs = append(xs, value(depth+1))
			}
			if xs == nil {
				return []any{}
			}
			return xs
		default:
			m := map[string]any{}
			for range rng.IntN(4) {
				m[str()] = value(depth + 1)
			}
			return m
		}
	}
	for range 20000 {
		data, err := json.Marshal(value(0))
		if err != nil {
			t.Fatal(err)
		}
		checkIndent(t, data)
	}
}

// FuzzAppendIndented: any compact JSON indents as json.Indent does.
func FuzzAppendIndented(f *testing.F) {
	f.Add([]byte(`{"a":["\"\\",{}],"b":[]}`))
	f.Fuzz(func(t *testing.T, src []byte) {
		var c bytes.Buffer
		if json.Compact(&c, src) != nil || !bytes.Equal(c.Bytes(), src) {
			return // not compact JSON
		}
		checkIndent(t, src)
	})
}
