package bundle

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/rehearse/rehearse/internal/contract"
)

// TestSumCompactIsTheJournalLine checks the sum of a record as results.json
// indents it against the sum of the line the journal writes for it, and
// that a changed byte changes the sum.
func TestSumCompactIsTheJournalLine(t *testing.T) {
	fc := 0.25
	rec := contract.Record{Kind: contract.KindRecorded, Server: "a b", Wave: 3, OK: true, StartS: 0.1, FirstContentS: &fc, EndS: 1.5,
		ChunkTimesS: []float64{0.25, 0.5, 1e-7}, Text: "  spaced \"quoted\" \\ <b>text</b> & \n\t ", OutputTokens: 5}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("  ", " ")
	if err := enc.Encode(&rec); err != nil {
		t.Fatal(err)
	}
	indented := buf.Bytes()
	line, err := json.Marshal(Entry{Record: &rec})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(indented, []byte("\n")) {
		t.Fatal("the record is not indented: the test compares nothing")
	}
	sum := sumCompact(indented, bytes.Index(indented, []byte(`"chunk_times_s": [`))+len(`"chunk_times_s": `))
	if !sameSum(sum, line) {
		t.Fatalf("the indented record's sum is not its journal line's:\n%s\n%s", indented, line)
	}
	// An empty chunk list: results.json writes [], the journal null.
	none := rec
	none.ChunkTimesS = []float64{}
	buf.Reset()
	if err := enc.Encode(&none); err != nil {
		t.Fatal(err)
	}
	none.ChunkTimesS = nil
	noneLine, _ := json.Marshal(Entry{Record: &none})
	if !sameSum(sumCompact(buf.Bytes(), bytes.Index(buf.Bytes(), []byte(`[]`))), noneLine) {
		t.Fatalf("an empty chunk list's sum is not its journal line's:\n%s\n%s", buf.Bytes(), noneLine)
	}
	for _, edit := range []func([]byte) []byte{
		func(b []byte) []byte { return bytes.Replace(b, []byte("1.5"), []byte("1.6"), 1) },
		func(b []byte) []byte { return bytes.Replace(b, []byte("spaced "), []byte("spaced"), 1) },
		func(b []byte) []byte { return bytes.Replace(b, []byte(`"a b"`), []byte(`"ab"`), 1) },
		func(b []byte) []byte { return b[:len(b)-1] },
	} {
		if sameSum(sum, edit(bytes.Clone(line))) {
			t.Errorf("a changed line has the record's sum: %s", edit(bytes.Clone(line)))
		}
	}
}

// TestInternerSharesEqualStrings checks that interned strings keep their
// values and that equal texts end up as one string.
func TestInternerSharesEqualStrings(t *testing.T) {
	in := newInterner()
	a := contract.Record{Server: "s", Text: string([]byte("same text"))}
	b := contract.Record{Server: "s", Text: string([]byte("same text")), FinishReason: "stop"}
	in.record(&a)
	in.record(&b)
	if b.Text != "same text" || b.Server != "s" || b.FinishReason != "stop" {
		t.Fatalf("interning changed a record: %+v", b)
	}
	if unsafe.StringData(a.Text) != unsafe.StringData(b.Text) {
		t.Fatal("two equal texts are still two strings")
	}
}

// TestDecodeTimesIsTheWholeDecode checks decodeTimes's fields against the
// whole decode of the same record, and that it leaves to the whole decode
// what it cannot be sure of.
func TestDecodeTimesIsTheWholeDecode(t *testing.T) {
	for _, raw := range []string{
		`{"kind": "recorded", "wave": 3, "ok": true, "chunk_times_s": [0.5, 1e-3, 2]}`,
		"{\n  \"kind\": \"warmup\",\n  \"ok\": false,\n  \"wave\": 12,\n  \"chunk_times_s\": []\n}",
		`{"ok": true, "wave": 1, "kind": "recorded"}`,
		`{"kind": "recorded", "wave": 1, "ok": true, "chunk_times_s": [1], "wave": 2}`,
		`{"kind": "rec\"orded", "wave": 1, "ok": true, "chunk_times_s": [1]}`,
		`{"Kind": "warmup", "kind": "recorded", "wave": 1, "ok": true, "chunk_times_s": [1]}`,
		`{"kind": "recorded", "wave": 1, "ok": true, "chunk_times_s": null}`,
	} {
		var want contract.Record
		if err := json.Unmarshal([]byte(raw), &want); err != nil {
			t.Fatal(err)
		}
		var got contract.Record
		if !decodeTimes([]byte(raw), &got) {
			if strings.Contains(raw, `\"`) || strings.Contains(raw, `"Kind"`) || strings.Contains(raw, "null") {
				continue // left to the whole decode, as it must be
			}
			t.Fatalf("%s: not decoded", raw)
		}
		if got.Kind != want.Kind || got.Wave != want.Wave || got.OK != want.OK || !reflect.DeepEqual(got.ChunkTimesS, want.ChunkTimesS) {
			t.Errorf("%s: %+v, whole decode %+v", raw, got, want)
		}
	}
}

// sameSum reports whether the journal's record line holds the record whose
// results.json bytes hash to sum, as the journal comparison decides it
// (lineSum's sum equal to the record's).
func sameSum(sum recordSum, line []byte) bool {
	s, ok := lineSum(line)
	return ok && s == sum
}
