package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBadDatasetRefusedBeforeAnyRequest: an empty or malformed dataset is
// one line and exit 2, and no bundle is started.
func TestBadDatasetRefusedBeforeAnyRequest(t *testing.T) {
	cases := []struct{ name, content, prompts, want string }{
		{"sg.json", `[{"conversations": []}]`, "{source: sharegpt, path: sg.json}", "sg.json: no usable entries (skipped: 1 empty)"},
		{"sg.json", `[{"conversations": 3}]`, "{source: sharegpt, path: sg.json}", "sg.json: entry 0 (byte"},
		{"p.jsonl", "{\"prompt\": \"a\"}\n{\"prompt\": 3}\n", "{source: file, path: p.jsonl}", `p.jsonl:2: "prompt" is 3, want a string`},
	}
	for _, c := range cases {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, c.name), []byte(c.content), 0o644); err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(dir, "r.yaml")
		yaml := "model: {id: m}\ntokenizer: {variant: qwen3}\nservers: [{name: s, base_url: \"http://127.0.0.1:9\"}]\nworkload:\n  prompts: " + c.prompts + "\n"
		if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, "out")
		code, _, stderr := run(t, "run", "-f", file, "-o", out)
		if code != 2 || !strings.Contains(stderr, c.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%s: exit %d, stderr %q, want 2 and one line with %q", c.prompts, code, stderr, c.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%s: a bundle folder was made", c.prompts)
		}
	}
}
