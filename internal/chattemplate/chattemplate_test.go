package chattemplate

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/npmtest"
)

// hfJinja is the independent renderer checked against (transformers.js's),
// pinned.
const hfJinja = "@huggingface/jinja@0.5.13"

// testdata/tokenizer_config.json carries Qwen3-8B's chat template
// (Apache-2.0, as github.com/ardanlabs/jinja's testdata has it).
const qwen3Config = "testdata/tokenizer_config.json"

// renderCase is one prompt and its kwargs.
type renderCase struct {
	prompt string
	kwargs map[string]any
}

var renderCases = []renderCase{
	{"Hello", nil},
	{"Write a haiku about GPUs.\nKeep it short.", nil},
	{"Explain KV caches", map[string]any{"enable_thinking": false}},
	{"Explain KV caches", map[string]any{"enable_thinking": true}},
	{"  spaces, <tags> & \"quotes\"\t", map[string]any{"enable_thinking": false}},
	{"ünïcödé 你好 🎉", nil},
}

// TestRenderMatchesHuggingFaceJinja renders Qwen3's template for several
// prompts, with and without enable_thinking, and compares every output
// byte for byte with @huggingface/jinja's.
func TestRenderMatchesHuggingFaceJinja(t *testing.T) {
	prefix := npmtest.Prefix(t, hfJinja, "the chat template's check against "+hfJinja)
	tmpl, err := Load(qwen3Config)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(qwen3Config)
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Template string `json:"chat_template"`
	}
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	var cases []map[string]any
	var got []string
	for _, rc := range renderCases {
		out, err := tmpl.RenderUser(rc.prompt, rc.kwargs)
		if err != nil {
			t.Fatalf("%q: %v", rc.prompt, err)
		}
		got = append(got, out)
		d := map[string]any{"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
		for k, v := range rc.kwargs {
			d[k] = v
		}
		d["messages"] = []any{map[string]any{"role": "user", "content": rc.prompt}}
		d["add_generation_prompt"] = true
		cases = append(cases, d)
	}
	in, err := json.Marshal(map[string]any{"template": c.Template, "cases": cases})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", filepath.Join("testdata", "hfjinja.mjs"), prefix)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	var want []string
	if err := json.Unmarshal(out, &want); err != nil {
		t.Fatal(err)
	}
	if len(want) != len(got) {
		t.Fatalf("%d outputs from node, want %d", len(want), len(got))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("case %d (%q, %v):\n got %q\nwant %q", i, renderCases[i].prompt, renderCases[i].kwargs, got[i], want[i])
		}
	}
}

// TestRenderQwen3 pins what the template gives, so a check that skips still
// leaves the rendering tested: the generation prompt, and the empty think
// block enable_thinking=false adds.
func TestRenderQwen3(t *testing.T) {
	tmpl, err := Load(filepath.Dir(qwen3Config))
	if err != nil {
		t.Fatal(err)
	}
	got, err := tmpl.RenderUser("Hi", nil)
	if want := "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"; err != nil || got != want {
		t.Errorf("RenderUser = %q, %v; want %q", got, err, want)
	}
	got, err = tmpl.RenderUser("Hi", map[string]any{"enable_thinking": false})
	if want := "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"; err != nil || got != want {
		t.Errorf("RenderUser(enable_thinking=false) = %q, %v; want %q", got, err, want)
	}
}

// TestLoadErrors: no tokenizer_config.json, one without chat_template, and
// a template that fails at render time each name the file.
func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(filepath.Join(dir, "tokenizer.json")); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, ConfigFile)) {
		t.Errorf("missing config: err %v, want one naming %s", err, ConfigFile)
	}
	file := filepath.Join(dir, ConfigFile)
	if err := os.WriteFile(file, []byte(`{"eos_token": "</s>"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var e *Error
	if _, err := Load(dir); !errors.Is(err, ErrNone) || !errors.As(err, &e) || e.File != file {
		t.Errorf("no chat_template: err %v, want ErrNone naming %s", err, file)
	}
	if err := os.WriteFile(file, []byte(`{"chat_template": "{{ raise_exception('no user turns') }}"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tmpl, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tmpl.RenderUser("x", nil); err == nil || !strings.Contains(err.Error(), file) {
		t.Errorf("raising template: err %v, want one naming %s", err, file)
	}
}
