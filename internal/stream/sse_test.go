package stream

import (
	"reflect"
	"testing"
)

type decoded struct {
	Name, Data string
}

func decodeAll(parts ...string) []decoded {
	var d Decoder
	var out []decoded
	emit := func(ev Event) { out = append(out, decoded{ev.Name, string(ev.Data)}) }
	for _, p := range parts {
		d.Feed([]byte(p), emit)
	}
	d.Finish(emit)
	return out
}

func TestDecoder(t *testing.T) {
	cases := []struct {
		name  string
		parts []string
		want  []decoded
	}{
		{"one event", []string{"data: a\n\n"}, []decoded{{"", "a"}}},
		{"no space after colon", []string{"data:a\n\n"}, []decoded{{"", "a"}}},
		{"only one space is stripped", []string{"data:  a\n\n"}, []decoded{{"", " a"}}},
		{"several per read", []string{"data: a\n\ndata: b\n\ndata: [DONE]\n\n"}, []decoded{{"", "a"}, {"", "b"}, {"", "[DONE]"}}},
		{"split mid-field", []string{"da", "ta: {\"x\":", "1}\n", "\n"}, []decoded{{"", `{"x":1}`}}},
		{"CRLF", []string{"data: a\r\n\r\ndata: b\r\n\r\n"}, []decoded{{"", "a"}, {"", "b"}}},
		{"CRLF split between CR and LF", []string{"data: a\r", "\n\r", "\ndata: b\r\n\r\n"}, []decoded{{"", "a"}, {"", "b"}}},
		{"lone CR", []string{"data: a\r\rdata: b\r\r"}, []decoded{{"", "a"}, {"", "b"}}},
		{"comments ignored", []string{": ping\n\n: keep-alive\ndata: a\n\n"}, []decoded{{"", "a"}}},
		{"multi-line data", []string{"data: a\ndata: b\n\n"}, []decoded{{"", "a\nb"}}},
		{"event name", []string{"event: error\ndata: {}\n\ndata: x\n\n"}, []decoded{{"error", "{}"}, {"", "x"}}},
		{"other fields ignored", []string{"id: 7\nretry: 10\ndata: a\n\n"}, []decoded{{"", "a"}}},
		{"field without colon", []string{"data\n\n"}, []decoded{{"", ""}}},
		{"blank lines without data dispatch nothing", []string{"\n\n\n"}, nil},
		{"unterminated last event is dispatched at the end", []string{"data: a\n\ndata: [DONE]"}, []decoded{{"", "a"}, {"", "[DONE]"}}},
		{"byte by byte", split1("data: héllo\r\n\r\n"), []decoded{{"", "héllo"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := decodeAll(c.parts...)
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
}

func split1(s string) []string {
	var out []string
	for i := 0; i < len(s); i++ {
		out = append(out, s[i:i+1])
	}
	return out
}

// FuzzDecoder checks that the events do not depend on how the stream is
// cut into reads, and that the decoder never panics.
func FuzzDecoder(f *testing.F) {
	f.Add([]byte("data: a\n\ndata: [DONE]\n\n"), uint8(3))
	f.Add([]byte("data:{\"choices\":[]}\r\n\r\n: c\r\ndata: b\r\r"), uint8(1))
	f.Add([]byte("event: error\ndata: x\ndata: y\n\n"), uint8(7))
	f.Fuzz(func(t *testing.T, data []byte, step uint8) {
		whole := decodeAll(string(data))
		n := int(step)%16 + 1
		var parts []string
		for i := 0; i < len(data); i += n {
			parts = append(parts, string(data[i:min(i+n, len(data))]))
		}
		pieces := decodeAll(parts...)
		if !reflect.DeepEqual(whole, pieces) {
			t.Fatalf("reads of %d bytes decode to %q, one read to %q", n, pieces, whole)
		}
	})
}
