package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/tokenizer"
)

// qwenFolder is a model folder holding the embedded Qwen tokenizer.json and
// a tokenizer_config.json with Qwen3's chat template.
func qwenFolder(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	data, err := tokenizer.EmbeddedJSON()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join("..", "chattemplate", "testdata", "tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if os.WriteFile(filepath.Join(dir, "tokenizer.json"), data, 0o644) != nil || os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), cfg, 0o644) != nil {
		t.Fatal("writing the model folder")
	}
	return dir
}

// Without --skip-chat-template, bench serve sends each custom prompt
// rendered through the tokenizer's chat template as the completions prompt,
// with --chat-template-kwargs, and counts its input tokens as rendered.
func TestServeCustomChatTemplate(t *testing.T) {
	model := qwenFolder(t)
	data := filepath.Join(t.TempDir(), "data.jsonl")
	os.WriteFile(data, []byte(`{"prompt": "What is the capital of India?"}`+"\n"), 0o644)
	l := newVLLMLog(t, "Qwen/Qwen3-8B")
	_, _, _, res := serveRun(t, l, "--model Qwen/Qwen3-8B --tokenizer "+model+" --dataset-name custom --dataset-path "+data+
		" --num-prompts 2 --chat-template-kwargs {\"enable_thinking\":false}")
	want := "<|im_start|>user\nWhat is the capital of India?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
	got := l.requests()
	if len(got) != 2 || got[0].body["prompt"] != want || got[0].path != "/v1/completions" {
		t.Fatalf("%d requests, first %s %v; want the prompt %q", len(got), got[0].path, got[0].body, want)
	}
	tok, err := tokenizer.Embedded(tokenizer.VariantQwen3)
	if err != nil {
		t.Fatal(err)
	}
	r := res.Records[0]
	if r.InputTokens == nil || *r.InputTokens != tok.Count(want) {
		t.Errorf("input tokens %v, want %d (the rendered prompt's)", r.InputTokens, tok.Count(want))
	}
}

// A tokenizer with no chat template beside it stops before any request,
// naming the file and --skip-chat-template (exit 2); so do kwargs that are
// no JSON object.
func TestServeCustomChatTemplateStops(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data.jsonl")
	os.WriteFile(data, []byte(`{"prompt": "hi"}`+"\n"), 0o644)
	bare := t.TempDir()
	tj, _ := tokenizer.EmbeddedJSON()
	os.WriteFile(filepath.Join(bare, "tokenizer.json"), tj, 0o644)
	l := newVLLMLog(t, "m")
	for _, c := range []struct{ extra, want string }{
		{"--tokenizer " + bare, filepath.Join(bare, "tokenizer_config.json")},
		{"--tokenizer qwen3", "embedded"},
		{"--tokenizer " + qwenFolder(t) + " --chat-template-kwargs [1]", "not a JSON object"},
	} {
		args := append([]string{"bench", "serve", "--base-url", l.URL, "--model", "m", "--dataset-name", "custom", "--dataset-path", data}, strings.Fields(c.extra)...)
		code, _, errs := runMain(context.Background(), args...)
		if code != 2 || !strings.Contains(errs, c.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("%s: exit %d, stderr %q; want 2 and one line naming %q", c.extra, code, errs, c.want)
		}
		if c.want != "not a JSON object" && !strings.Contains(errs, "--skip-chat-template") {
			t.Errorf("%s: stderr %q does not say --skip-chat-template", c.extra, errs)
		}
	}
	if n := len(l.requests()); n != 0 {
		t.Errorf("%d requests sent; want none", n)
	}
}

// A rehearsal file asks for the same client-side rendering with
// workload.prompts.chat_template and chat_template_kwargs: rehearse run
// sends each prompt of the file rendered, as bench serve's custom dataset
// does; the keys are refused on a source that is not a prompts file, and
// the kwargs without the template.
func TestRunChatTemplateKey(t *testing.T) {
	model := qwenFolder(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.jsonl"), []byte(`{"prompt": "What is the capital of India?"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l := newVLLMLog(t, "Qwen/Qwen3-8B")
	head := "model: {id: Qwen/Qwen3-8B}\nservers: [{name: s, base_url: \"" + l.URL + "\"}]\ntokenizer: {path: " + model + "}\n" +
		"workload: {concurrencies: [1], repeats: 1, endpoint: /v1/completions, prompts: "
	for name, c := range map[string]struct{ prompts, want string }{
		"ok":     {`{path: p.jsonl, chat_template: true, chat_template_kwargs: {enable_thinking: false}}`, ""},
		"source": {`{source: synthetic, input_len: {fixed: 8}, output_len: {fixed: 2}, chat_template: true}`, "workload.prompts.chat_template: renders the prompts of a prompts file"},
		"kwargs": {`{path: p.jsonl, chat_template_kwargs: {enable_thinking: false}}`, "workload.prompts.chat_template_kwargs: given without chat_template: true"},
	} {
		file := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(file, []byte(head+c.prompts+"}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		code, _, errs := runMain(context.Background(), "run", "-f", file, "-o", filepath.Join(dir, "out-"+name))
		if c.want != "" {
			if code != 2 || !strings.Contains(errs, c.want) {
				t.Errorf("%s: exit %d, stderr %q; want 2 and %q", name, code, errs, c.want)
			}
			continue
		}
		if code != 0 {
			t.Fatalf("%s: exit %d, stderr %q", name, code, errs)
		}
	}
	want := "<|im_start|>user\nWhat is the capital of India?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
	got := l.requests()
	if len(got) == 0 || got[len(got)-1].body["prompt"] != want {
		t.Fatalf("%d requests; want the last to send the rendered prompt %q, got %v", len(got), want, got[len(got)-1].body)
	}
}
