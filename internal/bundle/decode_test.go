package bundle

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/contract"
)

// committedResults are results.json files the repository holds, of every
// shape it has: the streaming decoder must read each as the whole-file one.
func committedResults(t *testing.T) map[string][]byte {
	out := map[string][]byte{}
	for _, p := range []string{"testdata/minimal/results.json", "../../rehearsals/h200-qwen2.5-1.5b/results.json", "../../rehearsals/h200-capacity/results.json"} {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[p] = data
	}
	return out
}

func TestDecodeStreamMatchesWhole(t *testing.T) {
	for name, data := range committedResults(t) {
		got, gerr := decodeStream(strings.NewReader(string(data)))
		want, werr := decodeWhole(data)
		if (gerr == nil) != (werr == nil) {
			t.Fatalf("%s: stream error %v, whole-file error %v", name, gerr, werr)
		}
		if got != nil {
			if len(got.recordSums) != len(got.Records) {
				t.Errorf("%s: %d record sums for %d records", name, len(got.recordSums), len(got.Records))
			}
			got.recordSums = nil // the whole-file decoder takes none
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the streamed results differ from the whole-file ones", name)
		}
		if len(want.Records) == 0 {
			t.Errorf("%s: no records: the test compares nothing", name)
		}
	}
}

// Every malformed results.json reads with the whole-file decoder's message
// (naming the line), whichever way it is broken.
func TestDecodeMalformedKeepsMessages(t *testing.T) {
	data := string(committedResults(t)["testdata/minimal/results.json"])
	cases := map[string]string{
		"truncated":        data[:len(data)/2],
		"trailing":         data + "x",
		"no schema":        strings.Replace(data, `"schema"`, `"schemo"`, 1),
		"other schema":     strings.Replace(data, `"rehearse/results/v1"`, `"rehearse/results/v0"`, 1),
		"record not whole": strings.Replace(data, `"output_tokens"`, `"output_tokenz"`, 1),
		"bad type":         strings.Replace(data, `"concurrency": `, `"concurrency": "x", "c": `, 1),
		"not an object":    "[" + data + "]",
	}
	for name, in := range cases {
		_, serr := decodeStream(strings.NewReader(in))
		if !errors.Is(serr, errMalformed) {
			t.Errorf("%s: stream error %v, want errMalformed", name, serr)
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, ResultsFile), []byte(in), 0o644); err != nil {
			t.Fatal(err)
		}
		_, got := ReadResults(dir)
		_, want := decodeWhole([]byte(in))
		var fe *FileError
		if !errors.As(got, &fe) || fe.Name != ResultsFile || want == nil || fe.Msg != want.Error() {
			t.Errorf("%s: ReadResults says %v, the whole-file decoder %v", name, got, want)
		}
	}
}

func TestDecodeRecycledKeepsOrder(t *testing.T) {
	const n = 5*orderedBatch + 17
	i := 0
	next := func() ([]byte, error) {
		if i == n {
			return nil, io.EOF
		}
		i++
		return []byte(fmt.Sprint(i)), nil
	}
	var got []string
	err := decodeRecycled(next, func(raw []byte, out *string) { *out = string(raw) }, func(s *string) error {
		got = append(got, *s)
		if len(got) == n-3 {
			return errStop
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n-3 {
		t.Fatalf("%d items used, want %d (stopped)", len(got), n-3)
	}
	for k, s := range got {
		if s != fmt.Sprint(k+1) {
			t.Fatalf("item %d is %s: out of order", k, s)
		}
	}
	boom := errors.New("boom")
	i = 0
	err = decodeRecycled(func() ([]byte, error) {
		if i == 3 {
			return nil, boom
		}
		i++
		return []byte("x"), nil
	}, func(raw []byte, out *string) { *out = string(raw) }, func(*string) error { return nil })
	if err != boom {
		t.Errorf("error %v, want the reader's", err)
	}
}

func TestObjectKeys(t *testing.T) {
	var keys []string
	ok := objectKeys([]byte(` {"a": {"b": 1, "c": [{"d": 2}]}, "e\u0066": "x,\"y\":", "g": [1, {"h": 3}]}`), func(k []byte, _ int) { keys = append(keys, string(k)) })
	if !ok || strings.Join(keys, " ") != "a ef g" {
		t.Errorf("keys %q (%v), want a ef g", keys, ok)
	}
	if objectKeys([]byte(`[1]`), func([]byte, int) {}) {
		t.Error("an array is not an object")
	}
}

func TestUnmarshalRecordMatchesJSON(t *testing.T) {
	for _, raw := range []string{
		`{"server": "a", "chunk_times_s": [0.1, 2e-3 , 3], "text": "x"}`,
		`{"server": "a", "chunk_times_s": [], "text": "x"}`,
		`{"server": "a", "chunk_times_s": null}`,
		`{"server": "a", "chunk_times_s": [1e400]}`,
		`{"server": "a", "chunk_times_s": ["x"]}`,
		`{"server": "a"}`,
	} {
		chunks := -1
		objectKeys([]byte(raw), func(k []byte, at int) {
			if string(k) == "chunk_times_s" {
				chunks = at
			}
		})
		var got, want contract.Record
		gerr := unmarshalRecord([]byte(raw), chunks, &got)
		werr := json.Unmarshal([]byte(raw), &want)
		if fmt.Sprint(gerr) != fmt.Sprint(werr) || (werr == nil && !reflect.DeepEqual(got, want)) {
			t.Errorf("%s: got %+v (%v), json.Unmarshal %+v (%v)", raw, got, gerr, want, werr)
		}
	}
}

// encodeTo (WriteResults' encoder) writes the bytes encodeWhole writes.
func TestEncodeStreamsTheSameBytes(t *testing.T) {
	for name, data := range committedResults(t) {
		r, err := decodeWhole(data)
		if err != nil {
			t.Fatal(err)
		}
		r.Records[0].ChunkTimesS = nil
		var got bytes.Buffer
		if err := encodeTo(&got, r); err != nil {
			t.Fatal(err)
		}
		want, err := encodeWhole(r)
		if err != nil {
			t.Fatal(err)
		}
		if got.String() != string(want) {
			t.Errorf("%s: the streamed encoding differs from the whole one", name)
		}
	}
}
