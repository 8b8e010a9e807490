package config

import (
	"strings"
	"testing"
)

func TestParseSegment(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == SegmentIndexEnv {
				return v
			}
			return ""
		}
	}
	for _, tc := range []struct {
		in, env string
		want    Segment
		err     string
	}{
		{in: "0/4", want: Segment{0, 4}},
		{in: "3/4", want: Segment{3, 4}},
		{in: "auto/4", env: "2", want: Segment{2, 4}},
		{in: "auto/4", err: "not set"},
		{in: "auto/4", env: "4", err: "from 0 to 3"},
		{in: "4/4", err: "from 0 to 3"},
		{in: "-1/4", err: "from 0 to 3"},
		{in: "1/0", err: "at least 1"},
		{in: "1", err: "want i/N"},
	} {
		got, err := ParseSegment(tc.in, env(tc.env))
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: error %v, want one saying %q", tc.in, err, tc.err)
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("%q: %v %v, want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestSegmentInTheFile(t *testing.T) {
	const head = "model: {id: m}\nworkload: {concurrencies: [4]}\n"
	r, err := Parse([]byte(head+"servers: [{name: v, base_url: \"http://127.0.0.1:1\"}]\nsegment: \"1/2\"\n"), "t.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if r.Segment != (Segment{1, 2}) {
		t.Errorf("segment %v", r.Segment)
	}
	_, err = Parse([]byte(head+"servers: [{name: v, launch: [x, \"{port}\"]}]\nsegment: \"1/2\"\n"), "t.yaml", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "segment") || !strings.Contains(err.Error(), "launched") {
		t.Errorf("a launched server in a split plan: %v", err)
	}
	_, err = Parse([]byte(head+"servers: [{name: v, base_url: \"http://127.0.0.1:1\"}]\nsegment: \"2/2\"\n"), "t.yaml", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "segment") {
		t.Errorf("segment 2/2: %v", err)
	}
}

// FuzzParseSegment: any text either parses to an index below its count, or
// is refused; a parsed segment prints back as itself.
func FuzzParseSegment(f *testing.F) {
	for _, s := range []string{"0/4", "3/4", "auto/2", "4/4", "-1/2", "1/0", "x", "1/2/3", " 1/2 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		seg, err := ParseSegment(s, func(string) string { return "1" })
		if err != nil {
			return
		}
		if seg.Index < 0 || seg.Index >= seg.Count || seg.Count < 1 {
			t.Fatalf("%q parsed to %+v", s, seg)
		}
		back, err := ParseSegment(seg.String(), nil)
		if err != nil || back != seg {
			t.Fatalf("%q: %+v prints as %q, which parses to %+v %v", s, seg, seg.String(), back, err)
		}
	})
}
