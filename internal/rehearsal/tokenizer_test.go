package rehearsal

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeCache makes a Hugging Face cache layout holding tokenizer.json for
// model at commit (none for an empty model) and points HF_HUB_CACHE at it.
func fakeCache(t *testing.T, model, commit string) string {
	t.Helper()
	hub := t.TempDir()
	t.Setenv("HF_HUB_CACHE", hub)
	if model == "" {
		return ""
	}
	org, name, _ := strings.Cut(model, "/")
	dir := filepath.Join(hub, "models--"+org+"--"+name, "snapshots", commit)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "tokenizer.json")
	if err := os.WriteFile(path, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const tokServer = "servers: [{name: v, launch: [vllm, '{port}']}]\n"

func TestTokenizerLookupOrder(t *testing.T) {
	cached := fakeCache(t, "Qwen/Qwen2.5-1.5B-Instruct", "989aa79")
	other := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := os.WriteFile(other, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	model := "model: {id: Qwen/Qwen2.5-1.5B-Instruct, revision: 989aa79}\n"
	for _, c := range []struct {
		name, yaml    string
		path, variant string
		note          string
	}{
		{"the model's own file in the cache", model, cached, "", ""},
		{"an explicit path wins", model + "tokenizer: {path: " + other + "}\n", other, "", ""},
		{"a named variant wins", model + "tokenizer: {variant: qwen3}\n", "", "qwen3", ""},
		{"an explicit cached model", "model: {id: m}\ntokenizer: {model: Qwen/Qwen2.5-1.5B-Instruct, revision: 989aa79}\n", cached, "", ""},
		{"not cached: the bundled Qwen2.5", "model: {id: Qwen/Qwen2.5-7B, revision: x}\n", "", "qwen2.5", "was not in the Hugging Face cache"},
		{"not cached, not Qwen2: the bundled Qwen3", "model: {id: org/other}\n", "", "qwen3", "org/other's own tokenizer.json"},
	} {
		got, err := chooseTokenizer(parse(t, c.yaml+tokServer))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got.Path != c.path || got.Variant != c.variant || !strings.Contains(got.Note, c.note) || (c.note == "" && got.Note != "") {
			t.Errorf("%s: got %+v", c.name, got)
		}
	}
	_, err := chooseTokenizer(parse(t, "model: {id: m}\ntokenizer: {model: Qwen/Qwen3-8B, revision: abc}\n"+tokServer))
	if err == nil || !strings.HasPrefix(err.Error(), "tokenizer.model: ") {
		t.Errorf("an explicit model that is not cached must be an error: %v", err)
	}
	// A file that is not a tokenizer fails with the key that named it.
	_, _, _, err = OpenTokenizer(parse(t, model+"tokenizer: {path: "+other+"}\n"+tokServer))
	if err == nil || !strings.HasPrefix(err.Error(), "tokenizer.path: ") {
		t.Errorf("bad tokenizer file: %v", err)
	}
}
