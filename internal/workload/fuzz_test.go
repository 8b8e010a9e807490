package workload

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func FuzzChatPrompt(f *testing.F) {
	f.Add([]byte(`{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}`))
	f.Add([]byte(`{"messages": [{"role": "system", "content": ""}, {"role": "user", "content": "x"}], "output_len": 9}`))
	f.Add([]byte(`{"messages": [{"role": 1}]}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		p, err := chatPrompt(line, Env{}.tokenBound())
		if err != nil {
			return
		}
		if strings.TrimSpace(p.Text) == "" || len(p.Messages) == 0 || p.MaxTokens < 0 {
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
