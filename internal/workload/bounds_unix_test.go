//go:build unix

package workload

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// longLineFile is a named pipe at dir/name through which head, then n
// bytes of fill, then tail are written as they are read: a line of any
// length that is never held whole by the test. The writer stops when the
// reader closes the pipe.
func longLineFile(t *testing.T, name, head string, fill byte, n int, tail string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		w, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		defer w.Close()
		if _, err := w.WriteString(head); err != nil {
			return
		}
		chunk := bytes.Repeat([]byte{fill}, 64<<10)
		for left := n; left > 0; left -= len(chunk) {
			if _, err := w.Write(chunk[:min(left, len(chunk))]); err != nil {
				return // the reader stopped: EPIPE
			}
		}
		w.WriteString(tail)
	}()
	t.Cleanup(func() {
		// A reader that never opened the pipe leaves the writer blocked in
		// its open: open the read end once, so that it ends.
		if r, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			r.Close()
		}
		<-done
	})
	return path
}

// TestLongLinesAreRefusedAtTheBound: a trace or dataset line (a ShareGPT
// entry) longer than MaxLineBytes is refused, naming the file and line,
// once MaxLineBytes of it are read: not read whole (a 2 GB line took 2.3 GB
// before "token too long"), not passed on whole to csv or json.
func TestLongLinesAreRefusedAtTheBound(t *testing.T) {
	const over = MaxLineBytes + 1<<20
	good := `{"timestamp": 0, "input_length": 3, "output_length": 1}` + "\n"
	cases := []struct {
		name, file, head string
		fill             byte
		tail             string
		spec             Spec
		want             string
	}{
		{"mooncake", "t.jsonl", good + good + `{"timestamp": 0, "x": "`, 'a', `"}` + "\n", Spec{Source: SourceTrace}, "t.jsonl:3: the line is longer than 64 MiB, the most one line of a trace or dataset may take"},
		{"azure", "t.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,3,1", ' ', "\n", Spec{Source: SourceTrace}, "t.csv:2: the line is longer than 64 MiB, the most one line of a trace or dataset may take"},
		{"chat_jsonl", "c.jsonl", `{"messages": [{"role": "user", "content": "`, 'a', `"}]}` + "\n", Spec{Source: SourceChatJSONL}, "c.jsonl:1: the line is longer than 64 MiB, the most one line of a trace or dataset may take"},
		{"custom_jsonl", "p.jsonl", `{"prompt": "a"}` + "\n" + `{"prompt": "`, 'a', `"}` + "\n", Spec{Source: SourceFile}, "p.jsonl:2: the line is longer than 64 MiB, the most one line of a trace or dataset may take"},
		{"custom_txt", "p.txt", "", 'a', "\n", Spec{Source: SourceFile}, "p.txt:1: the line is longer than 64 MiB, the most one line of a trace or dataset may take"},
		{"sharegpt", "sg.json", `[{"conversations": [{"from": "human", "value": "`, 'a', `"}]}]`, Spec{Source: SourceShareGPT}, "sg.json: entry 0 (byte 1): the entry is longer than 64 MiB, the most one entry"},
	}
	tok := qwen(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spec := c.spec
			spec.Path = longLineFile(t, c.file, c.head, c.fill, over, c.tail)
			_, err := Resolve(spec, Env{Tokenizer: tok})
			refusedInOneLine(t, err, c.want)
		})
	}
}
