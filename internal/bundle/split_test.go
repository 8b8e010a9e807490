package bundle

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/rehearse/rehearse/internal/contract"
)

// TestArraySplitterIsTheDecoders cuts random arrays of objects (strings
// with braces, quotes, backslashes; nested values; odd spacing), read a
// byte or a few at a time through a tiny buffer, and checks each element
// against json.Decoder's, and the rest after the array.
func TestArraySplitterIsTheDecoders(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	pieces := []string{`"a"`, `"{"`, `"}"`, `"\""`, `"\\"`, `"\\\""`, `"x\\\\"`, `"[]"`, `1`, `-2.5e3`, `true`, `null`, `[1, {"k": "}"}]`, `{"n": {"m": "\\{"}}`,
		"[0.069358, 0.078843,\n    0.088329, 12345678901234567890]", `"YyZ_"`, `[true, false, null, -0.5e-7]`,
		// What fastEnd must not take for an object's end: a brace after
		// an escaped newline, after spaces in a string, closing a nested
		// object on its own line.
		`"x\n  }"`, `" }"`, `"\t}"`, "{\"in\": 1\n  }", "[{}\n ]", `"{"`}
	// How an object closes: the last three are fastEnd's.
	closings := []string{"}", " }", "  }", "\n}", "\n  }", " \t }", "\r\n }"}
	for n := range 600 {
		var objs []string
		for range rng.IntN(6) {
			var b strings.Builder
			b.WriteString("{")
			for k := range rng.IntN(5) {
				if k > 0 {
					b.WriteString(",")
				}
				fmt.Fprintf(&b, "%s\"k%d\" :%s%s", strings.Repeat(" ", rng.IntN(3)), k, strings.Repeat("\n", rng.IntN(2)), pieces[rng.IntN(len(pieces))])
			}
			b.WriteString(closings[rng.IntN(len(closings))])
			objs = append(objs, b.String())
		}
		text := "[" + strings.Join(objs, " ,\n ") + " ] , \"after\": 1}"
		var r io.Reader = strings.NewReader(text[1:])
		size := 4
		switch n % 3 {
		case 0:
			r = iotest.OneByteReader(r)
		case 1:
			r = iotest.HalfReader(r)
		default:
			size = 1 << 16 // whole: the word-at-a-time search runs
		}
		s := &arraySplitter{r: r, buf: make([]byte, 0, size), first: true}
		dec := json.NewDecoder(strings.NewReader(text))
		dec.Token()
		for dec.More() {
			var want json.RawMessage
			if err := dec.Decode(&want); err != nil {
				t.Fatal(err)
			}
			got, err := s.next()
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%s: element %q (%v), the decoder's %q", text, got, err, want)
			}
		}
		if _, err := s.next(); err != io.EOF {
			t.Fatalf("%s: %v past the last element", text, err)
		}
		rest, _ := io.ReadAll(s.rest())
		if string(rest) != ` , "after": 1}` {
			t.Fatalf("%s: rest %q", text, rest)
		}
	}
	for _, bad := range []string{`{"a":1} {"b":2}]`, `1]`, `{"a":1},]`, `{"a":"}`, `{"a":1}`, `[]]`} {
		s := newArraySplitter(strings.NewReader(bad))
		var err error
		for err == nil {
			_, err = s.next()
		}
		if err == io.EOF && !strings.HasSuffix(bad, "]") {
			t.Errorf("%s: cut without an error", bad)
		}
		if err == io.EOF && (strings.Contains(bad, "} {") || bad == "1]" || strings.Contains(bad, ",]") || bad == "[]]") {
			t.Errorf("%s: cut without an error", bad)
		}
	}
}

// TestFastEndTakesWrittenRecords checks that the splitter cuts the records
// results.json writes without scanning them, but for those whose strings
// hold braces, and that a brace in a string with a raw newline before it
// (not JSON) cut there is refused by the decoder, as the scan's cut is.
func TestFastEndTakesWrittenRecords(t *testing.T) {
	res := &Results{Schema: Schema}
	for i := range 50 {
		text := fmt.Sprintf("token %d", i)
		if i%10 == 3 {
			text = "func() { return }" // braces in a string: the scan's
		}
		res.Records = append(res.Records, contract.Record{Kind: contract.KindRecorded, Server: "s", Wave: 0, Client: i, OK: true,
			StartS: 0.1, EndS: 1.5, ChunkTimesS: []float64{0.2, 0.3}, Text: text})
	}
	var buf bytes.Buffer
	if err := encodeTo(&buf, res); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	at := bytes.Index(data, []byte(`"records": [`)) + len(`"records": [`)
	s := newArraySplitter(bytes.NewReader(data[at:]))
	fast := 0
	for n := 0; ; n++ {
		if !s.skipSpace() {
			t.Fatal("no records end")
		}
		j := s.pos // the whole file is in the buffer: where next starts
		for j < len(s.buf) && (s.buf[j] == ',' || isSpace(s.buf[j])) {
			j++
		}
		if j < len(s.buf) && s.buf[j] == '{' && fastEnd(s.buf, j) > 0 {
			fast++
		}
		raw, err := s.next()
		if err == io.EOF {
			break
		}
		var rec contract.Record
		if err != nil || json.Unmarshal(raw, &rec) != nil || rec.Client != n {
			t.Fatalf("record %d: %q, %v", n, raw, err)
		}
	}
	if fast != 45 {
		t.Errorf("%d of 50 records cut without a scan, want the 45 without braces in their text", fast)
	}

	// Not JSON: a raw newline in a string, a brace after it.
	bad := "{\"text\": \"a\n }\", \"kind\": \"recorded\"\n}"
	if end := fastEnd([]byte(bad), 0); end != strings.Index(bad, "}")+1 {
		t.Fatalf("fastEnd %d", end)
	}
	var rec contract.Record
	if _, _, ok := fastRecordSum([]byte(bad[:strings.Index(bad, "}")+1]), &rec, false, nil); ok {
		t.Error("the decoder took a cut inside a string")
	}
	if json.Valid([]byte(bad)) {
		t.Error("a raw newline in a string is JSON")
	}
}

// TestJSONNumberIsJSONs checks jsonNumber against encoding/json on numbers
// and near-numbers.
func TestJSONNumberIsJSONs(t *testing.T) {
	for _, s := range []string{"0", "-0", "1", "12", "1.5", "-1.25e-7", "1E9", "1e+3", "0.001", "+1", ".5", "1.", "01", "-", "1e", "1e+", "0x1p3", "Inf", "NaN", "1_0", "--1", "1.2.3", "", " 1", "2e308"} {
		if got, want := jsonNumber([]byte(s)), json.Valid([]byte(s)) && s != "" && s[0] != ' '; got != want {
			t.Errorf("jsonNumber(%q) = %v, encoding/json: %v", s, got, want)
		}
	}
}

// TestVerifyStreamingWithoutRecords checks that a results.json with no
// records key is left to verify holding the records (which reports it).
func TestVerifyStreamingWithoutRecords(t *testing.T) {
	dir := t.TempDir()
	data := `{"schema": "` + Schema + `", "waves": []}`
	if err := os.WriteFile(filepath.Join(dir, ResultsFile), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteSumsKnown(dir, nil); err != nil {
		t.Fatal(err)
	}
	d, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var rep Report
	if _, done, err := d.verifyStreaming(context.Background(), Options{}, &rep); done || err != nil {
		t.Fatalf("streamed a results.json without records: %v %v", done, err)
	}
	if rep, err := VerifyWith(context.Background(), dir, Options{}); err == nil && len(rep.Problems) == 0 {
		t.Log("verify found nothing wrong with it") // whatever it finds, it must not panic
	}
}

// TestVerifyStreamingOfOddFiles checks tiny results.json files of odd
// shapes both ways: where the streaming path takes one, its report is
// verify's holding the records.
func TestVerifyStreamingOfOddFiles(t *testing.T) {
	for _, data := range []string{
		`{"schema": "` + Schema + `", "waves": [], "records": null}`,
		`{"schema": "` + Schema + `", "waves": [], "records": []}`,
		`{"schema": "` + Schema + `", "records": [], "waves": []}`,
		`{"schema": "` + Schema + `", "waves": [], "records": [] , "aggregates": []}`,
		`{"schema": "` + Schema + `", "waves": [], "records": [{"kind": "recorded"}]}`,
		`{"schema": "` + Schema + `", "waves": [], "records": [1]}`,
		`{"schema": "` + Schema + `", "waves": [], "records": []} trailing`,
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, ResultsFile), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := WriteSumsKnown(dir, nil); err != nil {
			t.Fatal(err)
		}
		streamed, took, _, held := VerifyBothWays(dir, Options{})
		if took && !reflect.DeepEqual(streamed, held) {
			t.Errorf("%s: streamed\n%+v\nheld\n%+v", data, streamed, held)
		}
	}
}

// TestSplitCandidate checks the word-at-a-time search for brackets,
// braces and quotes against a byte loop, on words of the bytes found
// between a record's strings and of every byte.
func TestSplitCandidate(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	candidate := func(c byte) bool { return splitSpecial[c] || c == 'Y' || c == '_' || c == 'y' || c == 0x7F }
	jsonish := []byte(" \n\t\r0123456789.-+eE,:truefalsn{}[]\"")
	for n := range 400000 {
		var w [8]byte
		for i := range w {
			if n%2 == 0 {
				w[i] = jsonish[rng.IntN(len(jsonish))]
			} else {
				w[i] = byte(rng.IntN(256))
			}
		}
		want := 8
		for i, c := range w {
			if candidate(c) {
				want = i
				break
			}
		}
		if got := splitCandidate(binary.LittleEndian.Uint64(w[:])); got != want {
			t.Fatalf("%q: %d, want %d", w, got, want)
		}
	}
}
