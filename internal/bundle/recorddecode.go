package bundle

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"math/bits"
	"strconv"
	"unicode/utf8"

	"github.com/rehearse/rehearse/internal/contract"
)

// fastRecord decodes one record's JSON into rec, which must be zero, in a
// single pass over its bytes, with no reflection: records are the bulk of
// every bundle, and encoding/json spends most of its time on them in
// reflection and in its scanner. It returns the required fields it met
// (a bit each, as recordFieldIndex gives them) and the index in raw where
// chunk_times_s's value begins (-1: none).
//
// It takes only what it is sure to decode exactly as json.Unmarshal would:
// an object whose keys are Record's own, spelled exactly, each once, with
// values of their field's JSON type. Anything else — an unknown key or one
// differing in case (json.Unmarshal ignores the first and folds the
// second), a duplicate, a number that does not fit its field, a syntax
// error — returns ok false, with rec possibly half written: the caller
// zeroes it and decodes the record with encoding/json, which then decides
// (and gives its error). A string with escapes or non-ASCII bytes is
// handed to encoding/json alone, as is client_added_s; chunk times and the
// other floats are parsed in place (parseJSONFloat: bit for bit
// strconv.ParseFloat, which is what encoding/json calls).
//
// timesOnly decodes kind, wave, ok and chunk_times_s and skips the other
// values (as decodeTimes does: the record was checked whole on an earlier
// pass); seen and the syntax of the skipped values are then not checked.
func fastRecord(raw []byte, rec *contract.Record, timesOnly bool) (seen uint, chunks int, ok bool) {
	return fastRecordSum(raw, rec, timesOnly, nil)
}

// fastRecordSum is fastRecord, also setting *sum, where sum is not nil, to
// the record's sumCompact, which it takes in the same pass: the bytes
// between the space it skips are what sumCompact copies.
func fastRecordSum(raw []byte, rec *contract.Record, timesOnly bool, sum *recordSum) (seen uint, chunks int, ok bool) {
	d := recDecoder{b: raw}
	if sum != nil {
		bp := sumBufs.Get().(*[]byte)
		d.sum, d.out = true, (*bp)[:0]
		defer func() {
			if ok {
				d.flush(len(d.b))
				*sum = sumBytes(d.out)
			}
			*bp = d.out
			sumBufs.Put(bp)
		}()
	}
	chunks = -1
	d.space()
	if !d.byte('{') {
		return 0, -1, false
	}
	var met uint64 // Record fields met, by fieldIndex
	d.space()
	if d.peek() == '}' {
		d.i++
	} else {
		for {
			d.space()
			key, ok := d.plainKey()
			if !ok {
				return 0, -1, false
			}
			d.space()
			if !d.byte(':') {
				return 0, -1, false
			}
			d.space()
			f := recordFieldNum(key)
			if f < 0 || met&(1<<f) != 0 {
				return 0, -1, false // unknown, folded or duplicate: encoding/json's
			}
			met |= 1 << f
			seen |= requiredBits[f]
			if f == fChunkTimes {
				chunks = d.i
			}
			if timesOnly && !timesField(f) {
				if !d.skip() {
					return 0, -1, false
				}
			} else if !d.value(f, rec) {
				return 0, -1, false
			}
			d.space()
			c := d.peek()
			d.i++
			if c == '}' {
				break
			}
			if c != ',' {
				return 0, -1, false
			}
		}
	}
	d.space()
	if d.i != len(d.b) {
		return 0, -1, false
	}
	return seen, chunks, true
}

// Record fields, numbered for fastRecord.
const (
	fKind = iota
	fServer
	fConcurrency
	fRepeat
	fWave
	fClient
	fPrompt
	fIntendedStart
	fStart
	fEnd
	fFirstContent
	fChunkTimes
	fFirstToken
	fOK
	fErrorKind
	fError
	fHTTPStatus
	fText
	fOutputTokens
	fUsageCompletion
	fUsagePrompt
	fFinishReason
	fReasoningText
	fReasoningTokens
	fToolCallText
	fRetried
	fInputTokens
	fMaxTokens
	fSession
	fTurn
	fReplica
	fClientAdded
	fWorker
	fRetryAfter
	fRedacted
	fRequest
	fModel

	fieldCount // the number of record fields
)

// requiredBits is each field's bit in recordFieldIndex, 0 for a field
// that is not required.
var requiredBits = func() (bits [fieldCount]uint) {
	for k, bit := range recordFieldIndex() {
		bits[recordFieldNum([]byte(k))] = bit
	}
	return bits
}()

// recordFieldNum is the field whose JSON name is key exactly, -1 for none.
func recordFieldNum(key []byte) int {
	switch string(key) {
	case "kind":
		return fKind
	case "server":
		return fServer
	case "concurrency":
		return fConcurrency
	case "repeat":
		return fRepeat
	case "wave":
		return fWave
	case "client":
		return fClient
	case "prompt":
		return fPrompt
	case "intended_start_s":
		return fIntendedStart
	case "start_s":
		return fStart
	case "end_s":
		return fEnd
	case "first_content_s":
		return fFirstContent
	case "chunk_times_s":
		return fChunkTimes
	case "first_token_s":
		return fFirstToken
	case "ok":
		return fOK
	case "error_kind":
		return fErrorKind
	case "error":
		return fError
	case "http_status":
		return fHTTPStatus
	case "text":
		return fText
	case "output_tokens":
		return fOutputTokens
	case "usage_completion_tokens":
		return fUsageCompletion
	case "usage_prompt_tokens":
		return fUsagePrompt
	case "finish_reason":
		return fFinishReason
	case "reasoning_text":
		return fReasoningText
	case "reasoning_tokens":
		return fReasoningTokens
	case "tool_call_text":
		return fToolCallText
	case "retried":
		return fRetried
	case "input_tokens":
		return fInputTokens
	case "max_tokens":
		return fMaxTokens
	case "session":
		return fSession
	case "turn":
		return fTurn
	case "replica":
		return fReplica
	case "client_added_s":
		return fClientAdded
	case "worker":
		return fWorker
	case "retry_after_s":
		return fRetryAfter
	case "redacted":
		return fRedacted
	case "request":
		return fRequest
	case "model":
		return fModel
	}
	return -1
}

// recDecoder is fastRecord's position in a record's bytes.
type recDecoder struct {
	b []byte
	i int
	// sum: out is the record in sumCompact's form up to b[last], the
	// bytes from there on not yet looked at or plain.
	sum  bool
	out  []byte
	last int
}

// flush copies the plain bytes up to b[to] to out.
func (d *recDecoder) flush(to int) {
	if d.sum {
		d.out = append(d.out, d.b[d.last:to]...)
		d.last = to
	}
}

func (d *recDecoder) space() {
	b, i := d.b, d.i
	if i < len(b) && b[i] <= ' ' && isSpace(b[i]) {
		d.flush(i)
		i++
		// Indentation: the spaces of a word at a time.
		for i+8 <= len(b) {
			n := bits.TrailingZeros64(binary.LittleEndian.Uint64(b[i:])^0x2020202020202020) / 8
			i += n
			if n < 8 {
				break
			}
		}
		for i < len(b) && b[i] <= ' ' && isSpace(b[i]) {
			i++
		}
		d.last = i
	}
	d.i = i
}

func (d *recDecoder) peek() byte {
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

func (d *recDecoder) byte(c byte) bool {
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

// plainKey reads a key of plain ASCII letters, digits and underscores (as
// every Record key is); false for anything else.
func (d *recDecoder) plainKey() ([]byte, bool) {
	if !d.byte('"') {
		return nil, false
	}
	start := d.i
	for d.i < len(d.b) {
		c := d.b[d.i]
		if c == '"' {
			k := d.b[start:d.i]
			d.i++
			return k, true
		}
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return nil, false
		}
		d.i++
	}
	return nil, false
}

// null reads null; false, moving nowhere, where the value is not null.
func (d *recDecoder) null() bool {
	if bytes.HasPrefix(d.b[d.i:], []byte("null")) && d.delimited(d.i+4) {
		d.i += 4
		return true
	}
	return false
}

// delimited reports whether a literal or number ending before j ends there.
func (d *recDecoder) delimited(j int) bool {
	if j >= len(d.b) {
		return true
	}
	c := d.b[j]
	return isSpace(c) || c == ',' || c == '}' || c == ']'
}

// value decodes field f's value into rec.
func (d *recDecoder) value(f int, rec *contract.Record) bool {
	if s := strField(f, rec); s != nil {
		return d.str(s)
	}
	switch f {
	case fConcurrency:
		return d.int(&rec.Concurrency)
	case fRepeat:
		return d.int(&rec.Repeat)
	case fWave:
		return d.int(&rec.Wave)
	case fClient:
		return d.int(&rec.Client)
	case fPrompt:
		return d.int(&rec.Prompt)
	case fHTTPStatus:
		return d.int(&rec.HTTPStatus)
	case fOutputTokens:
		return d.int(&rec.OutputTokens)
	case fMaxTokens:
		return d.int(&rec.MaxTokens)
	case fTurn:
		return d.int(&rec.Turn)
	case fUsageCompletion:
		return d.intPtr(&rec.UsageCompletionTokens)
	case fUsagePrompt:
		return d.intPtr(&rec.UsagePromptTokens)
	case fReasoningTokens:
		return d.intPtr(&rec.ReasoningTokens)
	case fInputTokens:
		return d.intPtr(&rec.InputTokens)
	case fSession:
		return d.intPtr(&rec.Session)
	case fReplica:
		return d.intPtr(&rec.Replica)
	case fWorker:
		return d.intPtr(&rec.Worker)
	case fRequest:
		return d.intPtr(&rec.Request)
	case fIntendedStart:
		return d.float(&rec.IntendedStartS)
	case fStart:
		return d.float(&rec.StartS)
	case fEnd:
		return d.float(&rec.EndS)
	case fFirstContent:
		return d.floatPtr(&rec.FirstContentS)
	case fFirstToken:
		return d.floatPtr(&rec.FirstTokenS)
	case fOK:
		return d.bool(&rec.OK)
	case fRedacted:
		return d.bool(&rec.Redacted)
	case fRetryAfter:
		return d.floatPtr(&rec.RetryAfterS)
	case fChunkTimes:
		return d.floats(&rec.ChunkTimesS)
	case fClientAdded:
		return d.clientAdded(&rec.ClientAddedS)
	}
	return false
}

// strField is rec's string field f, nil where f is not a string field.
func strField(f int, rec *contract.Record) *string {
	switch f {
	case fKind:
		return &rec.Kind
	case fServer:
		return &rec.Server
	case fErrorKind:
		return &rec.ErrorKind
	case fError:
		return &rec.Error
	case fText:
		return &rec.Text
	case fFinishReason:
		return &rec.FinishReason
	case fReasoningText:
		return &rec.ReasoningText
	case fToolCallText:
		return &rec.ToolCallText
	case fRetried:
		return &rec.Retried
	case fModel:
		return &rec.Model
	}
	return nil
}

// timesField reports whether a times-only pass decodes field f (kind,
// wave, ok, chunk_times_s); it skips the others.
func timesField(f int) bool {
	switch f {
	case fKind, fWave, fOK, fChunkTimes:
		return true
	}
	return false
}

// clientAdded decodes client_added_s into v by encoding/json, which
// checks it, after skipping past it; summing, its bytes go to out in
// compact form.
func (d *recDecoder) clientAdded(v **contract.ClientAdded) bool {
	start := d.i
	if !d.skip() {
		return false
	}
	if d.sum {
		d.flush(start)
		d.out = appendCompact(d.out, d.b[start:d.i], -1)
		d.last = d.i
	}
	return json.Unmarshal(d.b[start:d.i], v) == nil
}

// str decodes a string (null leaves it as it is, as encoding/json does).
func (d *recDecoder) str(s *string) bool {
	if d.null() {
		return true
	}
	if !d.byte('"') {
		return false
	}
	b, i := d.b, d.i
	start := i
	for i < len(b) && !strSpecial[b[i]] {
		i++
	}
	if i < len(b) && b[i] == '"' {
		d.i = i + 1
		*s = string(b[start:i])
		return true
	}
	// Escapes or non-ASCII: encoding/json's own decoding of the string
	// (it replaces invalid UTF-8, it checks the escapes), unless it is
	// valid UTF-8 without escapes, which it keeps as it is.
	escaped := false
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			d.i = i + 1
			body := b[start:i]
			if !escaped && utf8.Valid(body) {
				*s = string(body)
				return true
			}
			return json.Unmarshal(b[start-1:d.i], s) == nil
		case c < 0x20:
			return false // a syntax error: encoding/json's
		case c == '\\':
			escaped = true
			i += 2
			continue
		case c == '<' || c == '>' || c == '&':
			// json.Marshal escapes them, as the journal's line has them.
			if d.sum {
				d.flush(i)
				d.out = append(d.out, htmlEscapes[c]...)
				d.last = i + 1
			}
		}
		i++
	}
	return false
}

var htmlEscapes = [256]string{'<': `\u003c`, '>': `\u003e`, '&': `\u0026`}

// strSpecial are the bytes that end a string's plain run: the quote, the
// backslash, control bytes (an error), non-ASCII bytes, and what
// json.Marshal escapes for HTML (sumCompact's form has them escaped).
var strSpecial = func() (t [256]bool) {
	for c := range t {
		t[c] = c == '"' || c == '\\' || c < 0x20 || c >= 0x80 || c == '<' || c == '>' || c == '&'
	}
	return t
}()

// int decodes an integer that fits in 18 digits; null leaves it as it is.
func (d *recDecoder) int(v *int) bool {
	if d.null() {
		return true
	}
	n, ok := d.integer()
	if ok {
		*v = n
	}
	return ok
}

func (d *recDecoder) intPtr(v **int) bool {
	if d.null() {
		*v = nil
		return true
	}
	n, ok := d.integer()
	if ok {
		*v = &n
	}
	return ok
}

// integer reads -?(0|[1-9][0-9]*) of at most 18 digits, delimited: what
// strconv.ParseInt takes and an int holds. Anything else (a fraction or
// exponent, which encoding/json refuses for an int, or more digits) is
// false.
func (d *recDecoder) integer() (int, bool) {
	i := d.i
	neg := false
	if i < len(d.b) && d.b[i] == '-' {
		neg = true
		i++
	}
	start := i
	n := 0
	for i < len(d.b) && d.b[i] >= '0' && d.b[i] <= '9' {
		n = n*10 + int(d.b[i]-'0')
		i++
	}
	digits := i - start
	if digits == 0 || digits > 18 || (digits > 1 && d.b[start] == '0') || !d.delimited(i) {
		return 0, false
	}
	d.i = i
	if neg {
		n = -n
	}
	return n, true
}

func (d *recDecoder) float(v *float64) bool {
	if d.null() {
		return true
	}
	f, ok := d.number()
	if ok {
		*v = f
	}
	return ok
}

func (d *recDecoder) floatPtr(v **float64) bool {
	if d.null() {
		*v = nil
		return true
	}
	f, ok := d.number()
	if ok {
		*v = &f
	}
	return ok
}

func (d *recDecoder) bool(v *bool) bool {
	rest := d.b[d.i:]
	switch {
	case bytes.HasPrefix(rest, []byte("true")) && d.delimited(d.i+4):
		*v = true
		d.i += 4
	case bytes.HasPrefix(rest, []byte("false")) && d.delimited(d.i+5):
		*v = false
		d.i += 5
	default:
		return d.null()
	}
	return true
}

// floats decodes an array of numbers (null: nil; []: empty, not nil, as
// encoding/json leaves a nil slice it decodes [] into).
func (d *recDecoder) floats(v *[]float64) bool {
	if d.null() {
		*v = nil
		return true
	}
	open := d.i
	if !d.byte('[') {
		return false
	}
	if d.sum {
		// An empty list is null in sumCompact's form.
		j := d.i
		for j < len(d.b) && isSpace(d.b[j]) {
			j++
		}
		if j < len(d.b) && d.b[j] == ']' {
			d.flush(open)
			d.out = append(d.out, "null"...)
			d.i, d.last = j+1, j+1
			*v = []float64{}
			return true
		}
	}
	n := 0
	if end := bytes.IndexByte(d.b[d.i:], ']'); end >= 0 {
		n = bytes.Count(d.b[d.i:d.i+end], []byte{','}) + 1
	}
	out := make([]float64, 0, n)
	d.space()
	if d.byte(']') {
		*v = out
		return true
	}
	for {
		// A compact list (numbers and commas alone, as results.json
		// writes chunk times) goes a number at a time without the space
		// checks; anything else goes the general way below.
		// The position is kept in a local, not in d, while it goes.
		b, i := d.b, d.i
		for i < len(b) && b[i] > ' ' {
			f, end, ok := timeDecimal(b, i)
			if !ok {
				f, end, ok = shortDecimal(b, i)
			}
			if !ok || end >= len(b) || b[end] != ',' && b[end] != ']' {
				break
			}
			out = append(out, f)
			i = end + 1
			if b[end] == ']' {
				d.i = i
				*v = out
				return true
			}
		}
		d.i = i
		d.space()
		f, ok := d.number()
		if !ok {
			return false
		}
		out = append(out, f)
		d.space()
		if d.byte(']') {
			*v = out
			return true
		}
		if !d.byte(',') {
			return false
		}
	}
}

// number reads a JSON number, delimited, and gives the float64
// strconv.ParseFloat gives for it (which is what encoding/json decodes a
// float64 with); false for anything that is not a JSON number or that
// strconv refuses (out of range).
func (d *recDecoder) number() (float64, bool) {
	f, end, ok := parseJSONFloat(d.b, d.i)
	if !ok || !d.delimited(end) {
		return 0, false
	}
	d.i = end
	return f, true
}

// float64pow10 are the powers of ten a float64 holds exactly.
var float64pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// parseJSONFloat parses the JSON number
// (-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?) that begins at b[i]
// and returns it and the index past it; false where there is none. Its
// value is strconv.ParseFloat's, bit for bit: where the decimal mantissa
// has at most 19 significant digits and is below 2^52, and the power of
// ten is within ±22, the float64 is the exact mantissa multiplied or
// divided by an exact power of ten, one correctly rounded operation
// (Clinger's fast path, which strconv takes first too); anything else goes
// to strconv itself.
func parseJSONFloat(b []byte, i int) (float64, int, bool) {
	if f, end, ok := shortDecimal(b, i); ok {
		return f, end, true
	}
	start := i
	neg := false
	if i < len(b) && b[i] == '-' {
		neg = true
		i++
	}
	var mant uint64
	nd := 0 // significant digits in mant
	trunc := false
	exp := 0
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i+8 <= len(b) && nd+8 <= 19 {
			x, ok := eightDigits(b[i:])
			if !ok {
				break
			}
			mant = mant*1e8 + x
			nd += 8
			i += 8
		}
		for ; i < len(b); i++ {
			c := b[i] - '0'
			if c > 9 {
				break
			}
			if nd < 19 {
				mant = mant*10 + uint64(c)
				nd++
				continue
			}
			trunc = trunc || c != 0
			exp++ // a digit not kept: its place
		}
	default:
		return 0, 0, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		fs := i
		for i+8 <= len(b) && nd+8 <= 19 {
			x, ok := eightDigits(b[i:])
			if !ok {
				break
			}
			if mant == 0 {
				nd += digitCount(x) // leading zeros move the point only
			} else {
				nd += 8
			}
			mant = mant*1e8 + x
			exp -= 8
			i += 8
		}
		for ; i < len(b); i++ {
			c := b[i] - '0'
			if c > 9 {
				break
			}
			if nd < 19 {
				// A leading zero (mant still 0) moves the point only.
				mant = mant*10 + uint64(c)
				if mant != 0 {
					nd++
				}
				exp--
				continue
			}
			trunc = trunc || c != 0
		}
		if i == fs {
			return 0, 0, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		eneg := false
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			eneg = b[i] == '-'
			i++
		}
		es := i
		e := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			if e < 10000 {
				e = e*10 + int(b[i]-'0')
			}
			i++
		}
		if i == es {
			return 0, 0, false
		}
		if eneg {
			e = -e
		}
		exp += e
	}
	if !trunc && mant>>52 == 0 {
		f := float64(mant)
		if neg {
			f = -f
		}
		switch {
		case mant == 0 || exp == 0:
			return f, i, true
		case exp > 0 && exp <= 15+22:
			if exp > 22 {
				f *= float64pow10[exp-22]
				exp = 22
			}
			if f <= 1e15 && f >= -1e15 {
				return f * float64pow10[exp], i, true
			}
		case exp < 0 && exp >= -22:
			return f / float64pow10[-exp], i, true
		}
	}
	f, err := strconv.ParseFloat(string(b[start:i]), 64)
	if err != nil || math.IsInf(f, 0) {
		return 0, 0, false
	}
	return f, i, true
}

// shortDecimal is parseJSONFloat's path for what a rehearsal writes: an
// integer part of 1 to 7 digits (no leading zero) and, optionally, a
// point and 1 to 15 digits (a rehearsal's times have nine: nanoseconds),
// at most 15 digits in all, then neither a digit nor an exponent; each run
// of digits is read a word at a time. Such a mantissa is below 10^15 <
// 2^53, so the float64 is the exact mantissa divided by an exact power of
// ten, correctly rounded: strconv's value. False for anything else, left
// to the rest of parseJSONFloat.
func shortDecimal(b []byte, i int) (float64, int, bool) {
	neg := i < len(b) && b[i] == '-'
	if neg {
		i++
	}
	if i+8 > len(b) {
		return 0, 0, false
	}
	x := binary.LittleEndian.Uint64(b[i:])
	k := leadingDigits(x)
	if k == 0 || k == 8 || k > 1 && b[i] == '0' {
		return 0, 0, false
	}
	mant := digitsValue(x, k)
	i += k
	m := 0
	if b[i] == '.' {
		i++
		if i+8 > len(b) {
			return 0, 0, false
		}
		y := binary.LittleEndian.Uint64(b[i:])
		if m = leadingDigits(y); m == 0 {
			return 0, 0, false
		}
		if m == 8 {
			// Eight digits, and up to seven more in the next word.
			mant = mant*1e8 + digitsValue(y, 8)
			i += 8
			if i+8 > len(b) {
				return 0, 0, false
			}
			z := binary.LittleEndian.Uint64(b[i:])
			m2 := leadingDigits(z)
			if m2 == 8 || k+8+m2 > 15 {
				return 0, 0, false
			}
			if m2 > 0 {
				mant = mant*uint64pow10[m2] + digitsValue(z, m2)
				i += m2
			}
			m = 8 + m2
		} else {
			mant = mant*uint64pow10[m] + digitsValue(y, m)
			i += m
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		return 0, 0, false
	}
	f := float64(mant)
	if neg {
		f = -f
	}
	if m > 0 {
		f /= float64pow10[m]
	}
	return f, i, true
}

// timeDecimal is shortDecimal for a time as results.json writes it, 1 to
// 7 digits, a point and 1 to 15 digits, 15 digits in all, with at least
// 24 bytes from b[i] on (false for anything else, shortDecimal's then).
// It finds where the number ends from two words loaded at once, so the
// next number's position waits on a few operations, not on three loads
// one after another; its value comes after, off that path.
func timeDecimal(b []byte, i int) (float64, int, bool) {
	if i+24 > len(b) {
		return 0, 0, false
	}
	w0, w1 := binary.LittleEndian.Uint64(b[i:]), binary.LittleEndian.Uint64(b[i+8:])
	n0, n1 := nonDigits(w0), nonDigits(w1)
	if n0 == 0 {
		return 0, 0, false // eight digits before the point, or none
	}
	p := bits.TrailingZeros64(n0) / 8 // the point's place
	if p == 0 || p > 1 && b[i] == '0' || b[i+p] != '.' {
		return 0, 0, false
	}
	// The first byte after the point that is not a digit.
	var q int
	if rest := n0 &^ (1<<(8*p+8) - 1); rest != 0 {
		q = bits.TrailingZeros64(rest) / 8
	} else if n1 != 0 {
		q = 8 + bits.TrailingZeros64(n1)/8
	} else if c := b[i+16]; c < '0' || c > '9' {
		q = 16 // fifteen digits and the point
	} else {
		return 0, 0, false
	}
	// The digits after the point; with those before it, at most 15 (q is
	// at most 16), so the mantissa is exact.
	m := q - p - 1
	if m == 0 || b[i+q]|0x20 == 'e' {
		return 0, 0, false
	}
	mant := digitsValue(w0, p)
	frac := binary.LittleEndian.Uint64(b[i+p+1:])
	switch {
	case m <= 8:
		mant = mant*uint64pow10[m] + digitsValue(frac, m)
	case m == 9: // nanoseconds
		mant = mant*1e9 + digitsValue(frac, 8)*10 + uint64(b[i+p+9]-'0')
	default:
		mant = mant*uint64pow10[m] + digitsValue(frac, 8)*uint64pow10[m-8] + digitsValue(binary.LittleEndian.Uint64(b[i+p+9:]), m-8)
	}
	// Below 2^53: as a signed integer, one conversion instruction.
	return float64(int64(mant)) / float64pow10[m], i + q, true
}

// nonDigits is x (eight bytes, the first in its low byte) with a byte not
// zero where x's is not a decimal digit, zero where it is.
func nonDigits(x uint64) uint64 {
	hi := (x & 0xF0F0F0F0F0F0F0F0) ^ 0x3030303030303030                        // 0 where the high nibble is 3
	lo := ((x & 0x0F0F0F0F0F0F0F0F) + 0x0606060606060606) & 0xF0F0F0F0F0F0F0F0 // not 0 where the low one is above 9
	return hi | lo
}

// uint64pow10 are the powers of ten below 10^16.
var uint64pow10 = [...]uint64{1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15}

// leadingDigits is how many of the eight bytes of x (the first in its
// low byte) are decimal digits before the first that is not.
func leadingDigits(x uint64) int {
	return bits.TrailingZeros64(nonDigits(x)) / 8
}

// digitsValue is the value of the first k (1 to 8) bytes of x, digits:
// the others are shifted out (the borrow of subtracting '0' from them
// runs only upwards, into them) and zeros shifted in above the first
// digit.
func digitsValue(x uint64, k int) uint64 {
	x = (x - 0x3030303030303030) << (8 * (8 - k))
	x = x*10 + x>>8
	return ((x&0x000000FF000000FF)*(100+1000000<<32) + (x>>16&0x000000FF000000FF)*(1+10000<<32)) >> 32
}

// eightDigits is the value of b[:8] where those are eight decimal digits
// (false otherwise), read as one little-endian word (SWAR: the digits
// checked and combined in a few multiplications, not one at a time).
func eightDigits(b []byte) (uint64, bool) {
	x := binary.LittleEndian.Uint64(b)
	if x&0xF0F0F0F0F0F0F0F0 != 0x3030303030303030 || (x+0x0606060606060606)&0xF0F0F0F0F0F0F0F0 != 0x3030303030303030 {
		return 0, false
	}
	x -= 0x3030303030303030
	x = x*10 + x>>8 // pairs of digits
	x = ((x&0x000000FF000000FF)*(100+1000000<<32) + (x>>16&0x000000FF000000FF)*(1+10000<<32)) >> 32
	return x, true
}

// digitCount is the number of decimal digits of x below 10^8 (0 for 0).
func digitCount(x uint64) int {
	n := 0
	for ; x > 0; x /= 10 {
		n++
	}
	return n
}

// skip moves past one JSON value without decoding it (fastRecord's
// timesOnly pass, and client_added_s before encoding/json decodes it,
// which checks it).
func (d *recDecoder) skip() bool {
	depth := 0
	for d.i < len(d.b) {
		switch c := d.b[d.i]; c {
		case '"':
			// To the closing quote: one not preceded by an odd run of
			// backslashes.
			j := d.i + 1
			for {
				k := bytes.IndexByte(d.b[j:], '"')
				if k < 0 {
					return false
				}
				q := j + k
				n := 0
				for q-1-n > d.i && d.b[q-1-n] == '\\' {
					n++
				}
				if n%2 == 0 {
					d.i = q
					break
				}
				j = q + 1
			}
			d.i++
			if depth == 0 {
				return true
			}
		case '{', '[':
			depth++
			d.i++
		case '}', ']':
			if depth == 0 {
				return true // the end of the record: a value was empty
			}
			depth--
			d.i++
			if depth == 0 {
				return true
			}
		case ',':
			if depth == 0 {
				return true
			}
			d.i++
		default:
			d.i++
		}
	}
	return depth == 0
}
