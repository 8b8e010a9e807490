package workload

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func FuzzChatPrompt(f *testing.F) {
	f.Add([]byte(`{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}`))
	f.Add([]byte(`{"messages": [{"role": "system", "content": ""}, {"role": "user", "content": "x"}], "output_len": 9}`))
	f.Add([]byte(`{"messages": [{"role": 1}]}`))
	// Hostile lengths (issue 28).
	for _, v := range hostileLengths {
		f.Add([]byte(`{"messages": [{"role": "user", "content": "x"}], "max_tokens": ` + v + `}`))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		p, err := chatPrompt(line, Env{}.tokenBound())
		if err != nil {
			return
		}
		if strings.TrimSpace(p.Text) == "" || len(p.Messages) == 0 || p.MaxTokens < 0 || p.MaxTokens > MaxSourceTokens {
			t.Fatalf("accepted %q as %+v", line, p)
		}
	})
}

func FuzzShareGPT(f *testing.F) {
	f.Add([]byte(shareGPT))
	f.Add([]byte(`[{"conversations": [{"from": "human", "value": "a"}, {"from": "gpt", "value": "b"}]}]`))
	f.Add([]byte(`[{"conversations": 3}]`))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "sg.json")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		set, err := Resolve(Spec{Source: SourceShareGPT, Path: path}, Env{})
		if err != nil {
			return
		}
		for _, p := range set.Prompts {
			if strings.TrimSpace(p.Text) == "" {
				t.Fatalf("accepted an empty prompt from %q", data)
			}
		}
	})
}

// hostileLengths are lengths a hostile or broken file gives (issue 28).
var hostileLengths = []string{"2000000000", "100000000", "1048577", "-1", "0", "1e300", "2e9", "NaN", "-0", "9223372036854775807", "9223372036854775808"}

// FuzzTraceLines: whatever a Mooncake or Azure trace holds, its reader
// refuses it, or hands on lines whose lengths are within the bound and
// whose times are finite, without panicking.
func FuzzTraceLines(f *testing.F) {
	f.Add([]byte(`{"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [0, 1]}`+"\n"), false)
	f.Add([]byte("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n"), true)
	for _, v := range hostileLengths {
		f.Add([]byte(`{"timestamp": 0, "input_length": `+v+`, "output_length": 1}`+"\n"), false)
		f.Add([]byte(`{"timestamp": 0, "input_length": 1, "output_length": `+v+`}`+"\n"), false)
		f.Add([]byte(`{"timestamp": `+v+`, "input_length": 1, "output_length": 1, "hash_ids": [`+v+`]}`+"\n"), false)
		f.Add([]byte("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,"+v+",1\n"), true)
		f.Add([]byte("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,1,"+v+"\n"), true)
	}
	f.Fuzz(func(t *testing.T, data []byte, azure bool) {
		read := readMooncake
		if azure {
			read = readAzure
		}
		bound := Env{}.tokenBound()
		read(bytes.NewReader(data), "f", bound, func(l traceLine) error {
			if l.input < 1 || l.input > bound.max || l.output < 0 || l.output > bound.max || math.IsNaN(l.atMS) || math.IsInf(l.atMS, 0) {
				t.Fatalf("%q: accepted line %+v", data, l)
			}
			return nil
		})
	})
}
