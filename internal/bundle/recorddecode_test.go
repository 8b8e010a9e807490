package bundle

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/contract"
)

// sameRecord reports whether a and b are the same record bit for bit: its
// encoding tells -0 from 0, nil from empty and a nil pointer from one to
// zero, which reflect.DeepEqual does not all do.
func sameRecord(t *testing.T, a, b *contract.Record) bool {
	t.Helper()
	ja, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(ja, jb) && (a.ChunkTimesS == nil) == (b.ChunkTimesS == nil)
}

// checkFastRecord compares fastRecord on raw with what the decoder did
// before it, objectKeys and encoding/json: where fastRecord takes raw, the
// record, its required fields and its chunk_times_s index must be theirs,
// and encoding/json must take raw too.
func checkFastRecord(t *testing.T, raw []byte) (taken bool) {
	t.Helper()
	var want contract.Record
	werr := json.Unmarshal(raw, &want)
	required := recordFieldIndex()
	var wseen uint
	wchunks := -1
	keysOK := false
	if json.Valid(raw) { // objectKeys takes valid JSON only
		keysOK = objectKeys(raw, func(k []byte, at int) {
			wseen |= required[string(k)]
			if string(k) == "chunk_times_s" {
				wchunks = at
			}
		})
	}
	if keysOK && sumCompact(raw, wchunks) != sumCompactRef(raw, wchunks) {
		t.Fatalf("%q: sumCompact differs from its reference", raw)
	}
	var got contract.Record
	seen, chunks, ok := fastRecord(raw, &got, false)
	if ok {
		if werr != nil || !keysOK {
			t.Fatalf("%q: fastRecord took what encoding/json refuses (%v)", raw, werr)
		}
		if !sameRecord(t, &got, &want) {
			t.Fatalf("%q:\nfastRecord %+v\njson       %+v", raw, got, want)
		}
		if seen != wseen || chunks != wchunks {
			t.Fatalf("%q: fastRecord saw fields %b at %d, objectKeys %b at %d", raw, seen, chunks, wseen, wchunks)
		}
		var sum recordSum
		var again contract.Record
		if _, _, ok := fastRecordSum(raw, &again, false, &sum); !ok || sum != sumCompact(raw, wchunks) || !sameRecord(t, &again, &got) {
			t.Fatalf("%q: fastRecordSum's sum is not sumCompact's (taken %v)", raw, ok)
		}
	}
	// The pass of times only, on a record that decodes.
	if werr == nil {
		var times contract.Record
		if _, _, ok := fastRecord(raw, &times, true); ok {
			w := contract.Record{Kind: want.Kind, Wave: want.Wave, OK: want.OK, ChunkTimesS: want.ChunkTimesS}
			if !sameRecord(t, &times, &w) {
				t.Fatalf("%q: times only %+v, json %+v", raw, times, w)
			}
		}
	}
	return ok
}

// recordSeeds are records of every shape fastRecord meets or must refuse.
func recordSeeds() []string {
	one, two := 1, 2
	f := 0.25
	full := contract.Record{
		Kind: "recorded", Server: "vllm", Concurrency: 16, Repeat: 2, Wave: 7, Client: 3, Prompt: 5,
		IntendedStartS: 0.001, StartS: 0.0012345, EndS: 1.7596060420000001, FirstContentS: &f,
		ChunkTimesS: []float64{0.093993789, 0.117058605, 1.7596060420000001, 1e-9, 123456789.123, 0},
		FirstTokenS: &f, OK: false, ErrorKind: "timeout", Error: "read: <closed> & done", HTTPStatus: 503,
		Text: "Hello \"world\"\n\ttab é ☃ 😀 \u2028", OutputTokens: 12, UsageCompletionTokens: &one, UsagePromptTokens: &two,
		FinishReason: "length", ReasoningText: "think", ReasoningTokens: &one, ToolCallText: `{"a":1}`,
		Retried: "stale", InputTokens: &two, MaxTokens: 64, Session: &one, Turn: 2, Replica: &two,
		ClientAddedS: &contract.ClientAdded{N: 3, P50: 1e-5, P99: 2e-5, Max: 3e-5}, Worker: &one,
	}
	compact, _ := json.Marshal(full)
	indented, _ := json.MarshalIndent(full, "", "  ")
	var noEsc bytes.Buffer
	enc := json.NewEncoder(&noEsc)
	enc.SetEscapeHTML(false)
	enc.SetIndent(" ", " ")
	_ = enc.Encode(full)
	plain := contract.Record{Kind: "recorded", Server: "a", Text: "plain words", OK: true, ChunkTimesS: []float64{}}
	pj, _ := json.Marshal(plain)
	seeds := []string{
		string(compact), string(indented), strings.TrimSpace(noEsc.String()), string(pj),
		`{}`, ` { } `, `{"kind":null,"ok":null,"wave":null,"chunk_times_s":null,"first_content_s":null,"session":null}`,
		`{"kind":"recorded","Kind":"warmup"}`, `{"KIND":"x"}`, `{"kind":"a","kind":"b"}`,
		`{"unknown":1,"kind":"a"}`, `{"kind":"a","extra":{"x":[1,2,{"y":"}"}]}}`,
		`{"wave":1.0}`, `{"wave":1e2}`, `{"wave":-0}`, `{"wave":01}`, `{"wave":99999999999999999999}`,
		`{"wave":123456789012345678}`, `{"wave":-9223372036854775808}`, `{"wave":"1"}`,
		`{"start_s":1e400}`, `{"start_s":-1e400}`, `{"start_s":1e-400}`, `{"start_s":-0.0}`, `{"start_s":-0}`,
		`{"start_s":0.1000000000000000055511151231257827}`, `{"start_s":12345678901234567890123}`,
		`{"start_s":.5}`, `{"start_s":+1}`, `{"start_s":1.}`, `{"start_s":1e}`, `{"start_s":0x10}`,
		`{"start_s":Infinity}`, `{"start_s":NaN}`, `{"start_s":1E+5}`, `{"start_s":4.9e-324}`, `{"start_s":1.7976931348623157e308}`,
		`{"chunk_times_s":[]}`, `{"chunk_times_s":[ ]}`, `{"chunk_times_s":[1,]}`, `{"chunk_times_s":[,1]}`,
		`{"chunk_times_s":[1 2]}`, `{"chunk_times_s":["1"]}`, `{"chunk_times_s":[[1]]}`, `{"chunk_times_s":[null]}`,
		`{"chunk_times_s":[1],"chunk_times_s":[2,3]}`, `{"chunk_times_s":{}}`,
		`{"text":"a\u0000b"}`, `{"text":"\ud83d\ude00"}`, `{"text":"\ud83d"}`, `{"text":"\x"}`, "{\"text\":\"a\x01b\"}",
		"{\"text\":\"\xff\xfe\"}", "{\"text\":\"caf\xc3\xa9\"}", `{"text":"a\/b"}`, `{"text":1}`,
		`{"ok":true}`, `{"ok":false}`, `{"ok":"true"}`, `{"ok":tru}`, `{"ok":truex}`, `{"ok":nul}`,
		`{"client_added_s":{"n":1,"p50":0.5,"p99":1,"max":2}}`, `{"client_added_s":null}`, `{"client_added_s":{"n":"x"}}`,
		`{"client_added_s":{"n":1,}}`, `{"client_added_s":[1]}`, `{"client_added_s":}`,
		`{"kind":"a"} x`, `{"kind":"a"}}`, `{"kind":"a",}`, `{"kind" "a"}`, `{"kind":"a" "ok":true}`, `[1]`, `"x"`, ``,
		`{"kind":"a","session":1,"turn":2,"replica":0,"worker":3,"input_tokens":-1}`,
		`{"usage_completion_tokens":1.5}`, `{"max_tokens":null}`,
	}
	return seeds
}

func TestFastRecordIsEncodingJSON(t *testing.T) {
	taken := 0
	for _, s := range recordSeeds() {
		if checkFastRecord(t, []byte(s)) {
			taken++
		}
	}
	// The honest records must be taken (else there is no speed-up).
	for _, s := range recordSeeds()[:4] {
		var rec contract.Record
		if _, _, ok := fastRecord([]byte(s), &rec, false); !ok {
			t.Errorf("fastRecord left a plain record to encoding/json: %s", s)
		}
	}
	if taken < 20 {
		t.Errorf("fastRecord took only %d seeds", taken)
	}
}

// TestFastRecordCommitted runs every record of the committed bundles
// through both decoders.
func TestFastRecordCommitted(t *testing.T) {
	for name, data := range committedResults(t) {
		var r struct{ Records []json.RawMessage }
		if err := json.Unmarshal(data, &r); err != nil {
			t.Fatal(name, err)
		}
		for _, raw := range r.Records {
			if !checkFastRecord(t, raw) {
				t.Errorf("%s: fastRecord left a committed record to encoding/json: %.200s", name, raw)
			}
		}
	}
}

func FuzzRecordDecode(f *testing.F) {
	for _, s := range recordSeeds() {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkFastRecord(t, raw)
	})
}

// TestParseJSONFloat checks parseJSONFloat against strconv.ParseFloat bit
// for bit on numbers of every form JSON writes: shortest forms of random
// float64s, decimals of every length and exponent, and edge cases.
func TestParseJSONFloat(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	// Each number is parsed alone and followed by what may follow it in
	// a record (shortDecimal reads words past it).
	suffixes := []string{"", ",", ",\n    0.1234567", "\n   ]", "}       ", ", 12345678901234567"}
	var buf []byte
	pad := strings.Repeat(" ", 24)
	check := func(s string) {
		t.Helper()
		want, werr := strconv.ParseFloat(s, 64)
		for _, suffix := range suffixes {
			got, end, ok := parseJSONFloat([]byte(s+suffix), 0)
			if werr != nil || !jsonNumber([]byte(s)) {
				if ok && end == len(s) {
					t.Fatalf("%q then %q: parsed as %v, strconv: %v", s, suffix, got, werr)
				}
				continue
			}
			if !ok || end != len(s) || math.Float64bits(got) != math.Float64bits(want) {
				t.Fatalf("%q then %q: %v (%x, ok %v, end %d), strconv %v (%x)", s, suffix, got, math.Float64bits(got), ok, end, want, math.Float64bits(want))
			}
		}
		// timeDecimal, which wants 24 bytes to read and takes only numbers
		// with a point: where it takes one it is strconv's, and it ends
		// where the number does (what follows: the separators a list has,
		// then more digits within its reach).
		if strings.IndexByte(s, '.') < 0 {
			return
		}
		for _, suffix := range []string{",0.1234567", "]"} {
			in := append(append(buf[:0], s...), suffix...)
			in = append(in, pad...)
			buf = in
			got, end, ok := timeDecimal(in, 0)
			if !ok || (werr != nil || !jsonNumber([]byte(s))) && end != len(s) {
				continue // refused, or ended before what is not a number
			}
			if werr != nil || !jsonNumber([]byte(s)) || end != len(s) || math.Float64bits(got) != math.Float64bits(want) {
				t.Fatalf("%q then %q: timeDecimal %v (%x, end %d), strconv %v (%x, %v)", s, suffix, got, math.Float64bits(got), end, want, math.Float64bits(want), werr)
			}
		}
	}
	// What a rehearsal writes, timeDecimal takes.
	for _, s := range []string{"0.063977843", "5129.757370307", "123456.123456789", "1234567.1234567", "0.5", "12.018930701"} {
		if _, _, ok := timeDecimal([]byte(s+strings.Repeat(",", 24)), 0); !ok {
			t.Errorf("timeDecimal refused %q", s)
		}
	}
	for _, s := range []string{"0", "-0", "0.0", "-0.0", "0e0", "0e-400", "1", "-1", "1e22", "1e23", "9007199254740993",
		"4503599627370495", "4503599627370496", "4503599627370497", "1e15", "1e37", "9e37", "123456789012345e22",
		"0.000000000000000000000000001", "1e-22", "1e-23", "2.2250738585072014e-308", "4.9e-324", "5e-325",
		"1.7976931348623157e308", "1.7976931348623159e308", "0.1", "0.2", "0.3", "1.7596060420000001",
		"0.093993789", "1234567890123456789", "12345678901234567890", "1.234567890123456789012", "100000000000000000000000",
		"0.1000000000000000055511151231257827021181583404541015625", "1E5", "1e+05", "1e-05", "-1.5e-7",
		"000", "01", "1.", ".1", "-", "1e", "1e+", "+1",
		// Eight digits at a time (eightDigits): runs of 8 with and
		// without leading zeros, straddling the 19 digits kept.
		"12345678", "12345678.12345678", "0.00000000", "0.00000001", "0.000000001234567890123", "0.12345678e5",
		"1234567890123456.12345678", "12345678901.23456789", "99999999999999999999.99999999", "1.2345678a",
		"0.1234567/", "0.1234567:", "12345678e-30",
		// shortDecimal: 1 to 7 digits either side of the point.
		"0.069358", "-0.069358", "1234567.1234567", "9999999.9999999", "1.0000001", "0.0000001", "-0.0", "7", "-7",
		"1234567", "0.5e1", "1.5E-3", "10.000000", "0.00000000000",
		// and up to 15 digits after it (two words), 15 in all.
		"0.018930701", "12.018930701", "1234567.12345678", "1234567.123456789", "0.12345678", "0.123456789012345",
		"0.1234567890123456", "1.12345678901234", "1.123456789012345", "99.9999999999999", "0.000000001", "-0.018930701"} {
		check(s)
	}
	for range 200000 {
		x := math.Float64frombits(rng.Uint64())
		if math.IsNaN(x) || math.IsInf(x, 0) {
			continue
		}
		check(strconv.FormatFloat(x, 'g', -1, 64))
		check(strconv.FormatFloat(x, 'e', rng.IntN(20), 64))
		// What a rehearsal writes: nanosecond times of a few seconds.
		ns := rng.Int64N(1e12)
		check(strconv.FormatFloat(float64(ns)/1e9, 'f', -1, 64))
		check(strconv.FormatFloat(float64(ns)/1e9, 'f', rng.IntN(12), 64))
		check(strconv.FormatFloat(-float64(ns)/1e9, 'f', -1, 64))
		check(strconv.FormatFloat(float64(rng.Int64N(1e13))/1e6, 'f', -1, 64))
		// Random decimals: digits, a point, an exponent.
		var b strings.Builder
		if rng.IntN(2) == 0 {
			b.WriteByte('-')
		}
		b.WriteString(strconv.FormatUint(rng.Uint64()>>uint(rng.IntN(64)), 10))
		if rng.IntN(2) == 0 {
			b.WriteByte('.')
			for range rng.IntN(25) + 1 {
				b.WriteByte(byte('0' + rng.IntN(10)))
			}
		}
		if rng.IntN(2) == 0 {
			b.WriteString("e" + strconv.Itoa(rng.IntN(700)-350))
		}
		check(b.String())
	}
}

// BenchmarkParseJSONFloat parses chunk times as a rehearsal writes them
// (nanoseconds of a few seconds, as bench/bundle synthesizes them).
func BenchmarkParseJSONFloat(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	var nums [][]byte
	for range 1024 {
		nums = append(nums, []byte(strconv.FormatFloat(float64(rng.Int64N(1e12))/1e9, 'f', -1, 64)))
	}
	b.ResetTimer()
	for i := range b.N {
		if _, _, ok := parseJSONFloat(nums[i%len(nums)], 0); !ok {
			b.Fatal("not parsed")
		}
	}
}

// benchRecord is a record as bench/bundle synthesizes them (128 chunk
// times, about 600 bytes of text), indented as results.json holds it.
func benchRecord(b *testing.B) []byte {
	ft := 0.0521
	chunks := make([]float64, 128)
	for k := range chunks {
		chunks[k] = float64(int64((0.0521+0.0137*float64(k))*1e6+0.5)) / 1e6
	}
	u := 128
	rec := contract.Record{Kind: "recorded", Server: "vllm-a", Concurrency: 64, Repeat: 1, Wave: 4, Client: 17, Prompt: 3,
		IntendedStartS: 0, StartS: 0.000123, EndS: chunks[127], FirstContentS: &ft, ChunkTimesS: chunks, OK: true,
		Text: strings.Repeat("cache key value attention layer ", 19), OutputTokens: 128, UsageCompletionTokens: &u, UsagePromptTokens: &u, FinishReason: "length"}
	raw, err := json.MarshalIndent(rec, "  ", " ")
	if err != nil {
		b.Fatal(err)
	}
	return raw
}

func BenchmarkRecordDecode(b *testing.B) {
	raw := benchRecord(b)
	b.Run("fastRecord", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			var rec contract.Record
			if _, _, ok := fastRecord(raw, &rec, false); !ok {
				b.Fatal("not taken")
			}
		}
	})
	b.Run("fastRecordSum", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			var rec contract.Record
			var sum recordSum
			if _, _, ok := fastRecordSum(raw, &rec, false, &sum); !ok {
				b.Fatal("not taken")
			}
		}
	})
	b.Run("times-only", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			var rec contract.Record
			if _, _, ok := fastRecord(raw, &rec, true); !ok {
				b.Fatal("not taken")
			}
		}
	})
	b.Run("before", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		required := recordFieldIndex()
		for b.Loop() {
			var rec contract.Record
			var seen uint
			chunks := -1
			objectKeys(raw, func(k []byte, at int) {
				seen |= required[string(k)]
				if string(k) == "chunk_times_s" {
					chunks = at
				}
			})
			if err := unmarshalRecord(raw, chunks, &rec); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("before-times-only", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			var rec contract.Record
			if !decodeTimes(raw, &rec) {
				b.Fatal("not taken")
			}
		}
	})
	b.Run("sumCompact", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			sumCompact(raw, 100)
		}
	})
}

// sumCompactRef is sumCompact as it was written first, byte by byte: the
// reference the run-copying one is checked against.
func sumCompactRef(raw []byte, chunks int) recordSum {
	bp := sumBufs.Get().(*[]byte)
	out := (*bp)[:0]
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case isSpace(c):
			i++
		case c == '"':
			j := i + 1
			out = append(out, '"')
			for j < len(raw) && raw[j] != '"' {
				switch raw[j] {
				case '\\':
					out = append(out, raw[j], raw[j+1])
					j += 2
					continue
				case '<':
					out = append(out, `\u003c`...)
				case '>':
					out = append(out, `\u003e`...)
				case '&':
					out = append(out, `\u0026`...)
				default:
					out = append(out, raw[j])
				}
				j++
			}
			out = append(out, '"')
			i = j + 1
		case i == chunks && c == '[':
			j := i + 1
			for j < len(raw) && isSpace(raw[j]) {
				j++
			}
			if j < len(raw) && raw[j] == ']' {
				out = append(out, "null"...)
				i = j + 1
				continue
			}
			out = append(out, c)
			i++
		default:
			out = append(out, c)
			i++
		}
	}
	sum := sumBytes(out)
	*bp = out
	sumBufs.Put(bp)
	return sum
}

// BenchmarkChunkTimes decodes a list of 100 chunk times as a rehearsal
// writes them (nanoseconds, seconds into a wave), a number at a time.
func BenchmarkChunkTimes(b *testing.B) {
	var list []byte
	list = append(list, '[')
	for k := range 100 {
		if k > 0 {
			list = append(list, ',')
		}
		list = strconv.AppendFloat(list, float64(63977843+10105248*int64(k))/1e9, 'f', -1, 64)
	}
	list = append(list, "],\n   \"ok\": true\n  }"...)
	b.SetBytes(int64(len(list)))
	for b.Loop() {
		d := recDecoder{b: list}
		var v []float64
		if !d.floats(&v) || len(v) != 100 {
			b.Fatal("not decoded")
		}
	}
}
