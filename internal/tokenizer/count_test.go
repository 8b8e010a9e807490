package tokenizer

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// TestWriteCounts: a text's count (and ids), JSON Lines in order, and a bad
// line a *LineError naming the input and line, after the lines before it
// are written.
func TestWriteCounts(t *testing.T) {
	tok, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := tok.WriteCounts(strings.NewReader("Hello world"), &out, CountOptions{Name: "stdin", IDs: true}); err != nil {
		t.Fatal(err)
	}
	ids := tok.Encode("Hello world")
	if want := "2\n[" + strconv.Itoa(ids[0]) + "," + strconv.Itoa(ids[1]) + "]\n"; len(ids) != 2 || out.String() != want {
		t.Errorf("text: %q, want %q", out.String(), want)
	}
	out.Reset()
	in := `{"text": "Hello world"}` + "\n" + `{"text": ""}` + "\n" + `{"txt": 1}` + "\n"
	err = tok.WriteCounts(strings.NewReader(in), &out, CountOptions{Name: "in.jsonl", JSONL: true})
	want := `{"count":2,"ids":[` + strconv.Itoa(ids[0]) + "," + strconv.Itoa(ids[1]) + "]}\n" + `{"count":0,"ids":[]}` + "\n"
	if le, ok := errors.AsType[*LineError](err); !ok || le.Line != 3 || err.Error() != `in.jsonl:3: no "text" field` || out.String() != want {
		t.Errorf("JSON Lines: %q, %v; want %q and line 3's error", out.String(), err, want)
	}
	for _, bad := range []string{"\n", "{\n"} {
		err := tok.WriteCounts(strings.NewReader(bad), &out, CountOptions{Name: "stdin", JSONL: true})
		if _, ok := errors.AsType[*LineError](err); !ok || !strings.HasPrefix(err.Error(), "stdin:1: ") {
			t.Errorf("%q: %v, want a *LineError at stdin:1", bad, err)
		}
	}
}
