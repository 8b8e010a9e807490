package bundle

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/rehearse/rehearse/internal/contract"
)

// errMalformed is what decodeStream returns for a results.json it cannot
// take as it streams: the caller decodes it whole instead, which names what
// is wrong with a line number (describeJSONError).
var errMalformed = errors.New("malformed results.json")

// decodeStream decodes results.json from in as decodeWhole does, one record at a
// time: nothing holds the file whole, and each record's bytes are decoded
// once into its contract.Record and scanned once for its keys. Any problem
// of the JSON itself (syntax, a type, a missing field, trailing data) is
// errMalformed, or the reader's own error (an interruption); the checks of
// SPEC §2 are finishDecode's.
func decodeStream(in io.Reader) (*Results, error) { return decodeVisitSums(in, nil, true) }

// decodeLean is decodeStream without the records' sums, which only
// verify's journal comparison reads (a sixth of a decode's time).
func decodeLean(in io.Reader) (*Results, error) { return decodeVisitSums(in, nil, false) }

// recordVisitor takes results.json's records as decodeVisit reads them,
// instead of their being kept.
type recordVisitor struct {
	// begin is handed what results.json holds before its records (waves
	// with their ids); false refuses the file (errUnsupported).
	begin func(head *Results) bool
	// work runs for each record on the decoding cores, in any order;
	// what it writes to x comes to record. Nil: nothing.
	work func(rec *contract.Record, x *recordWork)
	// record gets each record and its work in order, its index i.
	record func(i int, rec *contract.Record, x *recordWork)
	// timesOnly: record needs only kind, wave, ok and chunk_times_s;
	// the other fields may be left zero.
	timesOnly bool
	// ctx, where not nil, stops the pass when it ends: it is looked at
	// every stopEvery records, whatever the reader does (a file's read
	// may hand over many records at once).
	ctx context.Context
}

// stopEvery is how many records a pass over them takes between two looks
// at its context.
const stopEvery = 2048

// recordWork is what visitor.work computed for a record.
type recordWork struct {
	found []miscount // its re-counted miscounts (index unset)
}

// errUnsupported is decodeVisit's error for a file its visitor refused,
// or whose records come before the waves they need.
var errUnsupported = errors.New("results.json cannot be verified as it streams")

// decodeVisit is decodeStream, handing each record to v (where not nil)
// in place of keeping it: the results come back without records, and
// with their sums (recordSums).
func decodeVisit(in io.Reader, v *recordVisitor) (*Results, error) {
	return decodeVisitSums(in, v, true)
}

// decodeVisitSums is decodeVisit, summing the records only where
// wantSums.
func decodeVisitSums(in io.Reader, v *recordVisitor, wantSums bool) (*Results, error) {
	dec := json.NewDecoder(in)
	if t, err := dec.Token(); err != nil {
		return nil, readErr(err)
	} else if t != json.Delim('{') {
		return nil, errMalformed
	}
	s := &streamedObject{rest: []byte{'{'}, firstRest: true, required: recordFieldIndex()}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, readErr(err)
		}
		key, ok := t.(string)
		if !ok {
			return nil, errMalformed
		}
		if dec, err = s.member(dec, in, key, v, wantSums); err != nil {
			return nil, err
		}
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return nil, readErr(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, readErr(err) // something after the object
	}
	r, keys, err := s.results(wantSums)
	if err != nil {
		return nil, err
	}
	return finishDecode(r, keys, v != nil)
}

// streamedObject is what decodeVisitSums has read of results.json's
// object so far: its records (where kept) and their sums, its waves and
// aggregates still raw, and every other member, raw, in rest (an object
// still open). missingRecord is the first record's lack of a required
// field.
type streamedObject struct {
	records       []contract.Record
	sums          []recordSum
	waves, aggs   []json.RawMessage
	haveWaves     bool
	haveRecs      bool
	rest          []byte
	firstRest     bool
	raw           json.RawMessage
	required      map[string]uint
	missingRecord error
}

// member reads the value of the member key at dec's position and returns
// the decoder to go on with (the records are read past dec, which another
// decoder then follows).
func (s *streamedObject) member(dec *json.Decoder, in io.Reader, key string, v *recordVisitor, wantSums bool) (*json.Decoder, error) {
	switch {
	case strings.EqualFold(key, "records"):
		return s.readRecords(dec, in, v, wantSums)
	case strings.EqualFold(key, "waves"):
		s.haveWaves = true
		s.waves = nil
		if err := dec.Decode(&s.waves); err != nil {
			return nil, readErr(err)
		}
	case strings.EqualFold(key, "aggregates"):
		s.aggs = nil
		if err := dec.Decode(&s.aggs); err != nil {
			return nil, readErr(err)
		}
	default:
		if err := dec.Decode(&s.raw); err != nil {
			return nil, readErr(err)
		}
		if !s.firstRest {
			s.rest = append(s.rest, ',')
		}
		s.firstRest = false
		k, _ := json.Marshal(key)
		s.rest = append(append(append(s.rest, k...), ':'), s.raw...)
	}
	return dec, nil
}

// readRecords reads the records array at dec's position (decodeRecords),
// first handing v (where not nil) what came before it: records before
// the waves, a second records array, or v's refusal are errUnsupported.
func (s *streamedObject) readRecords(dec *json.Decoder, in io.Reader, v *recordVisitor, wantSums bool) (*json.Decoder, error) {
	s.sums = s.sums[:0]
	sumsTo := &s.sums
	if !wantSums {
		sumsTo = nil
	}
	if v != nil {
		if s.haveRecs || !s.haveWaves {
			return nil, errUnsupported
		}
		head, err := decodeHead(append(bytes.Clone(s.rest), '}'), s.waves)
		if err != nil {
			return nil, err
		}
		if !v.begin(head) {
			return nil, errUnsupported
		}
	}
	s.haveRecs = true
	var err error
	s.records, s.missingRecord, dec, err = decodeRecords(dec, in, s.required, s.records[:0], sumsTo, v)
	if err != nil {
		return nil, err
	}
	return dec, nil
}

// results is the Results the whole object read holds (records without
// sums unless wantSums) and the keys its waves and aggregates carried;
// errMalformed for another schema, a record lacking a required field, or
// a wave or aggregate that does not decode.
func (s *streamedObject) results(wantSums bool) (*Results, *storedKeys, error) {
	var r Results
	if err := json.Unmarshal(append(s.rest, '}'), &r); err != nil {
		return nil, nil, errMalformed
	}
	if r.Schema != Schema {
		return nil, nil, errMalformed
	}
	if s.missingRecord != nil {
		return nil, nil, errMalformed
	}
	keys, err := rawKeys(s.waves, s.aggs)
	if err != nil {
		return nil, nil, err
	}
	if s.haveWaves {
		r.Waves = make([]contract.Wave, len(s.waves))
		for i, raw := range s.waves {
			if err := json.Unmarshal(raw, &r.Waves[i]); err != nil {
				return nil, nil, errMalformed
			}
		}
	}
	if s.aggs != nil {
		r.Aggregates = make([]contract.Aggregate, len(s.aggs))
		for i, raw := range s.aggs {
			if err := json.Unmarshal(raw, &r.Aggregates[i]); err != nil {
				return nil, nil, errMalformed
			}
		}
	}
	if s.haveRecs {
		r.Records = s.records
		if wantSums {
			r.recordSums = s.sums
		}
	}
	return &r, keys, nil
}

// rawKeys is the keys each raw wave and aggregate carries; errMalformed
// where one is no object or a wave lacks a required field.
func rawKeys(waves, aggs []json.RawMessage) (*storedKeys, error) {
	keys := &storedKeys{waves: make([]map[string]bool, len(waves)), aggregates: make([]map[string]bool, len(aggs))}
	for i, raw := range waves {
		m, err := checkFields(raw, requiredWaveFields)
		if err != nil {
			return nil, errMalformed
		}
		keys.waves[i] = keySet(m)
	}
	for i, raw := range aggs {
		m, err := checkFields(raw, nil)
		if err != nil {
			return nil, errMalformed
		}
		keys.aggregates[i] = aggregateKeys(m)
	}
	return keys, nil
}

// decodeRecords decodes the records array at dec's position, appending to
// out; missing is the first record that lacks a required field.
//
// The array is cut into records by an arraySplitter reading in (the
// reader beneath dec), not by dec; the decoder returned goes on after it,
// at the next key of the object the records are in.
func decodeRecords(dec *json.Decoder, in io.Reader, required map[string]uint, out []contract.Record, sums *[]recordSum, v *recordVisitor) (recs []contract.Record, missing error, after *json.Decoder, err error) {
	t, err := dec.Token()
	if err != nil {
		return nil, nil, nil, readErr(err)
	}
	if t == nil {
		return nil, nil, dec, nil // null
	}
	if t != json.Delim('[') {
		return nil, nil, nil, errMalformed
	}
	split := newArraySplitter(io.MultiReader(dec.Buffered(), in))
	rd := &recordDecoder{required: required, all: uint(1)<<len(required) - 1, sums: sums != nil, v: v}
	n := 0
	texts := newInterner()
	err = decodeRecycled(split.next, rd.decode, func(it *recordItem) error {
		if it.bad {
			return errMalformed
		}
		if !it.complete && missing == nil {
			missing = errMalformed
		}
		if sums != nil {
			*sums = append(*sums, it.sum)
		}
		if v != nil {
			if v.ctx != nil && n%stopEvery == 0 && v.ctx.Err() != nil {
				return Interrupted(v.ctx)
			}
			v.record(n, &it.rec, &it.work)
			n++
			return nil
		}
		texts.record(&it.rec)
		out = append(out, it.rec)
		return nil
	})
	if err != nil {
		return nil, nil, nil, readErr(err)
	}
	if after, err = afterArray(split); err != nil {
		return nil, nil, nil, err
	}
	if out == nil {
		out = []contract.Record{}
	}
	return out, missing, after, nil
}

// recordItem is one record as decodeRecords' workers decode it.
type recordItem struct {
	rec      contract.Record
	sum      recordSum
	work     recordWork
	bad      bool // not an object, or not a record
	complete bool // every required field is there
}

// recordDecoder decodes decodeRecords' records: required indexes the
// required fields' bits (all of them set: all), sums asks for the
// records' sums, and v (where not nil) for its work or times only.
type recordDecoder struct {
	required map[string]uint
	all      uint
	sums     bool
	v        *recordVisitor
}

// decode decodes one record's bytes into it: by fastRecord where it can
// (its times only where v asks for no more), else by encoding/json, which
// says whether the record is one.
func (d *recordDecoder) decode(raw []byte, it *recordItem) {
	v := d.v
	if v != nil && v.timesOnly {
		if _, _, ok := fastRecord(raw, &it.rec, true); ok {
			it.complete = true
			return
		}
		it.rec = contract.Record{}
		if decodeTimes(raw, &it.rec) {
			it.complete = true
			return
		}
		it.rec = contract.Record{}
	}
	sum := &it.sum
	if !d.sums {
		sum = nil
	}
	if seen, _, ok := fastRecordSum(raw, &it.rec, false, sum); ok {
		it.complete = seen == d.all
		if v != nil && v.work != nil {
			v.work(&it.rec, &it.work)
		}
		return
	}
	it.rec = contract.Record{} // fastRecord's half, then encoding/json's word
	var seen uint
	chunks := -1
	if !objectKeys(raw, func(k []byte, at int) {
		seen |= d.required[string(k)]
		if string(k) == "chunk_times_s" {
			chunks = at
		}
	}) {
		it.bad = true
		return
	}
	it.complete = seen == d.all
	it.bad = unmarshalRecord(raw, chunks, &it.rec) != nil
	if d.sums {
		it.sum = sumCompact(raw, chunks)
	}
	if !it.bad && v != nil && v.work != nil {
		v.work(&it.rec, &it.work)
	}
}

// afterArray is a decoder going on after the array split has cut: a comma
// there is the next key's, as the opening brace of an object; a closing
// brace ends the object.
func afterArray(split *arraySplitter) (*json.Decoder, error) {
	rest := bufio.NewReader(split.rest())
	c, err := skipSpaceByte(rest)
	if err != nil {
		return nil, readErr(err)
	}
	var prefix string
	switch c {
	case ',':
		prefix = "{"
	case '}':
		prefix = "{}"
	default:
		return nil, errMalformed
	}
	after := json.NewDecoder(io.MultiReader(strings.NewReader(prefix), rest))
	if _, err := after.Token(); err != nil {
		return nil, readErr(err)
	}
	return after, nil
}

// skipSpaceByte reads past space and returns the byte after it.
func skipSpaceByte(r *bufio.Reader) (byte, error) {
	for {
		c, err := r.ReadByte()
		if err != nil || !isSpace(c) {
			return c, err
		}
	}
}

// internMax is how many distinct strings an interner keeps.
const internMax = 1 << 16

// interner makes repeated strings of the records one string: a rehearsal
// sends a pool of prompts again and again, and a server at temperature 0
// answers each with the same text, so a bundle of a million records holds
// far fewer distinct texts (and a handful of servers, kinds and finish
// reasons). A string is immutable: sharing one changes no record. It keeps
// the first internMax distinct strings; the others stay as they are.
type interner struct{ m map[string]string }

func newInterner() *interner { return &interner{m: map[string]string{}} }

func (in *interner) intern(s *string) {
	if *s == "" {
		return
	}
	if t, ok := in.m[*s]; ok {
		*s = t
		return
	}
	if len(in.m) < internMax {
		in.m[*s] = *s
	}
}

// record interns rec's strings.
func (in *interner) record(rec *contract.Record) {
	for _, s := range []*string{&rec.Kind, &rec.Server, &rec.ErrorKind, &rec.Error, &rec.Text, &rec.FinishReason, &rec.ReasoningText, &rec.ToolCallText, &rec.Retried, &rec.Model} {
		in.intern(s)
	}
}

// decodeTimes decodes a record's kind, wave, ok and chunk_times_s from its
// JSON as unmarshalRecord does, and no other field; false where it cannot
// be sure to (a key that differs from one of those only in case, which
// encoding/json would take, or a value it does not parse): the caller
// decodes the record whole.
func decodeTimes(raw []byte, rec *contract.Record) bool {
	kind, wave, ok, chunks := -1, -1, -1, -1
	exact := true
	if !objectKeys(raw, func(k []byte, at int) {
		switch string(k) {
		case "kind":
			kind = at
		case "wave":
			wave = at
		case "ok":
			ok = at
		case "chunk_times_s":
			chunks = at
		default:
			for _, name := range []string{"kind", "wave", "ok", "chunk_times_s"} {
				if strings.EqualFold(string(k), name) {
					exact = false
				}
			}
		}
	}) || !exact {
		return false
	}
	value := func(at int) []byte {
		if at < 0 {
			return nil
		}
		end := at
		for end < len(raw) && raw[end] != ',' && raw[end] != '}' && !(raw[end] == '"' && end > at) {
			end++
		}
		if end < len(raw) && raw[end] == '"' {
			end++
		}
		return raw[at:end]
	}
	if kind >= 0 && json.Unmarshal(value(kind), &rec.Kind) != nil {
		return false
	}
	if wave >= 0 && json.Unmarshal(value(wave), &rec.Wave) != nil {
		return false
	}
	if ok >= 0 && json.Unmarshal(value(ok), &rec.OK) != nil {
		return false
	}
	if chunks >= 0 {
		times, fine := parseChunkTimes(raw, chunks)
		if !fine {
			return false
		}
		rec.ChunkTimesS = times
	}
	return true
}

// decodeHead decodes what results.json holds before its records: rest,
// the object of its other keys so far, and its waves, each with its id
// (its index where absent).
func decodeHead(rest []byte, waves []json.RawMessage) (*Results, error) {
	var r Results
	if err := json.Unmarshal(rest, &r); err != nil || r.Schema != Schema {
		return nil, errMalformed
	}
	r.Waves = make([]contract.Wave, len(waves))
	for i, raw := range waves {
		m, err := checkFields(raw, requiredWaveFields)
		if err != nil {
			return nil, errMalformed
		}
		if err := json.Unmarshal(raw, &r.Waves[i]); err != nil {
			return nil, errMalformed
		}
		if _, ok := m["id"]; !ok {
			r.Waves[i].ID = i
		}
	}
	return &r, nil
}

// readErr is a decoder's error: the reader's own (an interruption) as it
// is, anything about the JSON errMalformed.
func readErr(err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case err == nil, err == io.EOF, errors.Is(err, errMalformed), errors.Is(err, io.ErrUnexpectedEOF):
		return errMalformed
	case errors.As(err, &se), errors.As(err, &te):
		return fmt.Errorf("%w: %v", errMalformed, err)
	}
	var ie *json.InvalidUnmarshalError
	if errors.As(err, &ie) {
		return errMalformed
	}
	if strings.HasPrefix(err.Error(), "json: ") || strings.HasPrefix(err.Error(), "invalid character") {
		return fmt.Errorf("%w: %v", errMalformed, err)
	}
	return err
}

// recordFieldIndex gives each required record field a bit.
func recordFieldIndex() map[string]uint {
	m := make(map[string]uint, len(contract.RequiredRecordFields))
	for i, f := range contract.RequiredRecordFields {
		m[f] = 1 << i
	}
	return m
}

// objectKeys calls f with each top-level key of the JSON object raw and the
// index in raw where its value begins; raw
// must be valid JSON (as a json.Decoder hands it out). False if raw is
// not an object.
func objectKeys(raw []byte, f func(key []byte, value int)) bool {
	i := 0
	for i < len(raw) && isSpace(raw[i]) {
		i++
	}
	if i == len(raw) || raw[i] != '{' {
		return false
	}
	depth, wantKey := 0, false
	for ; i < len(raw); i++ {
		switch c := raw[i]; c {
		case '"':
			j, escaped := i+1, false
			for ; j < len(raw) && raw[j] != '"'; j++ {
				if raw[j] == '\\' {
					escaped = true
					j++
				}
			}
			if depth == 1 && wantKey {
				if escaped {
					var k string
					if json.Unmarshal(raw[i:j+1], &k) == nil {
						f([]byte(k), valueAt(raw, j+1))
					}
				} else {
					f(raw[i+1:j], valueAt(raw, j+1))
				}
				wantKey = false
			}
			i = j
		case '{', '[':
			depth++
			wantKey = c == '{' && depth == 1
		case '}', ']':
			depth--
		case ',':
			wantKey = depth == 1
		}
	}
	return true
}

// valueAt is where the value of the key that ends before i begins: past
// the colon and any space.
func valueAt(raw []byte, i int) int {
	for i < len(raw) && (isSpace(raw[i]) || raw[i] == ':') {
		i++
	}
	return i
}

// unmarshalRecord decodes one record's JSON into rec as json.Unmarshal
// does, but parses its chunk_times_s array (at index chunks of raw, -1:
// none), most of a record's bytes, with strconv directly: encoding/json
// spends several times longer on each number through reflection.
func unmarshalRecord(raw []byte, chunks int, rec *contract.Record) error {
	times, end, ok := chunkTimes(raw, chunks)
	if !ok {
		return json.Unmarshal(raw, rec)
	}
	rest := make([]byte, 0, len(raw)-(end+1-chunks)+4)
	rest = append(append(append(rest, raw[:chunks]...), "null"...), raw[end+1:]...)
	if err := json.Unmarshal(rest, rec); err != nil {
		return err
	}
	rec.ChunkTimesS = times
	return nil
}

// parseChunkTimes is chunk_times_s's array at raw[chunks] as
// unmarshalRecord parses it; false where it leaves it to encoding/json.
func parseChunkTimes(raw []byte, chunks int) ([]float64, bool) {
	times, _, ok := chunkTimes(raw, chunks)
	return times, ok
}

// chunkTimes parses the array of numbers at raw[chunks] with strconv and
// returns it and the index of its closing bracket; false for anything else
// (then encoding/json decodes it, with its error where there is one).
func chunkTimes(raw []byte, chunks int) ([]float64, int, bool) {
	if chunks < 0 || chunks >= len(raw) || raw[chunks] != '[' {
		return nil, 0, false
	}
	end := chunks + 1
	for end < len(raw) && raw[end] != ']' {
		if c := raw[end]; c == '"' || c == '[' || c == '{' {
			return nil, 0, false // not an array of numbers
		}
		end++
	}
	if end == len(raw) {
		return nil, 0, false
	}
	times := []float64{}
	body := raw[chunks+1 : end]
	for len(body) > 0 {
		item := body
		if k := bytes.IndexByte(body, ','); k >= 0 {
			item, body = body[:k], body[k+1:]
		} else {
			body = nil
		}
		item = bytes.TrimSpace(item)
		if len(item) == 0 {
			if len(times) == 0 && body == nil {
				break // []
			}
			return nil, 0, false
		}
		if !jsonNumber(item) {
			return nil, 0, false // encoding/json's error
		}
		v, err := strconv.ParseFloat(string(item), 64)
		if err != nil {
			return nil, 0, false // out of range: its error
		}
		times = append(times, v)
	}
	return times, end, true
}

// jsonNumber reports whether b is a number as JSON writes one
// (-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?): strconv also takes
// "+1", ".5", "0x1p3", "Inf", which encoding/json refuses.
func jsonNumber(b []byte) bool {
	i := 0
	digits := func() int {
		j := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i - j
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	if i < len(b) && b[i] == '0' {
		i++
	} else if i >= len(b) || b[i] < '1' || b[i] > '9' || digits() == 0 {
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(b)
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// finishDecode is what a decode does once the JSON is decoded: a wave's
// absent id is its index, and the records are checked against SPEC §2;
// visited: the records went to a visitor, which checks them (and their
// waves' plans) itself.
func finishDecode(r *Results, keys *storedKeys, visited bool) (*Results, error) {
	for i := range r.Waves {
		if !keys.waves[i]["id"] {
			r.Waves[i].ID = i
		}
	}
	r.stored = keys
	if probs := checkRecordsOf(r, !visited); len(probs) > 0 {
		return nil, &InvalidError{Results: r, Problems: probs}
	}
	return r, nil
}
