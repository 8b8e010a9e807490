package export

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf16"
)

// VLLMObject is one vLLM result: a JSON object whose keys keep their
// order, as a Python dict does.
type VLLMObject = object

// set sets key k to v where the object has it (a Python dict keeps a key's
// first place when a later update changes its value), else appends it.
func (o object) set(k string, v any) object {
	for i := range o {
		if o[i].k == k {
			o[i].v = v
			return o
		}
	}
	return append(o, field{k, v})
}

// Get returns the value of key k and whether the object has it.
func (o object) Get(k string) (any, bool) {
	for _, f := range o {
		if f.k == k {
			return f.v, true
		}
	}
	return nil, false
}

// PyJSON is the object as Python's json.dump writes it with its defaults,
// as vLLM writes its result file: ", " and ": " between items, every
// character outside printable ASCII escaped, floats as repr prints them
// (1.0, 1e-05, Infinity, NaN).
func (o object) PyJSON() []byte {
	var b bytes.Buffer
	pyValue(&b, o)
	return b.Bytes()
}

func pyValue(b *bytes.Buffer, v any) {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case object:
		b.WriteByte('{')
		for i, f := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			pyString(b, f.k)
			b.WriteString(": ")
			pyValue(b, f.v)
		}
		b.WriteByte('}')
	case string:
		pyString(b, x)
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case int:
		b.WriteString(strconv.Itoa(x))
	case float64:
		b.WriteString(pyRepr(x))
	default:
		pyReflect(b, v)
	}
}

// pyReflect writes the lists (and anything else) the result holds.
func pyReflect(b *bytes.Buffer, v any) {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Slice {
		b.WriteByte('[')
		for i := range rv.Len() {
			if i > 0 {
				b.WriteString(", ")
			}
			pyValue(b, rv.Index(i).Interface())
		}
		b.WriteByte(']')
		return
	}
	data, err := json.Marshal(v)
	if err != nil {
		data = []byte("null")
	}
	b.Write(data)
}

// pyString is json.dumps of a str with ensure_ascii: \", \\, \n, \r, \t,
// \b, \f, and \uXXXX (UTF-16) for every other character outside ' '…'~'.
func pyString(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r >= ' ' && r <= '~':
			b.WriteRune(r)
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			fmt.Fprintf(b, `\u%04x\u%04x`, r1, r2)
		default:
			fmt.Fprintf(b, `\u%04x`, r)
		}
	}
	b.WriteByte('"')
}

// pyRepr is Python's repr of a float: the shortest digits that read back,
// fixed notation while the decimal point falls within 16 digits of them
// (always with a fractional part: 4.0), exponent notation otherwise
// (1e-05, 1.5e+16); nan, inf and -inf as json.dump writes them.
func pyRepr(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // -d.dddde±XX
	sign := ""
	if strings.HasPrefix(e, "-") {
		sign, e = "-", e[1:]
	}
	mant, exp, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	x, _ := strconv.Atoi(exp)
	decpt := x + 1
	switch {
	case decpt <= -4 || decpt > 16:
		m := digits[:1]
		if len(digits) > 1 {
			m += "." + digits[1:]
		}
		es := "+"
		if x < 0 {
			es, x = "-", -x
		}
		return fmt.Sprintf("%s%se%s%02d", sign, m, es, x)
	case decpt <= 0:
		return sign + "0." + strings.Repeat("0", -decpt) + digits
	case decpt >= len(digits):
		return sign + digits + strings.Repeat("0", decpt-len(digits)) + ".0"
	}
	return sign + digits[:decpt] + "." + digits[decpt:]
}
