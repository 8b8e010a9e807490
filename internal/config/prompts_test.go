package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/workload"
)

const promptsHead = "model: {id: m}\nservers: [{name: s, launch: [x, '{port}']}]\nworkload:\n  prompts: "

func TestPromptSourceMappings(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.jsonl"), []byte("{\"prompt\":\"a\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		yaml string
		want workload.Spec
	}{
		{"[a, b]", workload.Spec{Inline: []string{"a", "b"}}},
		{"p.jsonl", workload.Spec{Path: filepath.Join(dir, "p.jsonl")}},
		{"{source: file, path: p.jsonl}", workload.Spec{Source: "file", Path: filepath.Join(dir, "p.jsonl")}},
		{"{source: builtin}", workload.Spec{Source: "builtin"}},
		{"{source: chat_jsonl, path: p.jsonl, max_model_len: 4096}",
			workload.Spec{Source: "chat_jsonl", Path: filepath.Join(dir, "p.jsonl"), Dataset: &workload.Dataset{MaxModelLen: 4096}}},
		{"{source: sharegpt, path: p.jsonl, use_output_len: true, max_model_len: 2048, count: 5}",
			workload.Spec{Source: "sharegpt", Path: filepath.Join(dir, "p.jsonl"), Dataset: &workload.Dataset{UseOutputLen: true, MaxModelLen: 2048, Count: 5}}},
		{"{source: synthetic, input_len: {fixed: 1024}, output_len: {mean: 128, range_ratio: 0.5}, count: 10, seed: 3, ignore_eos: true}",
			workload.Spec{Source: "synthetic", Synthetic: &workload.Synthetic{InputLen: workload.Length{Fixed: 1024},
				OutputLen: workload.Length{Mean: 128, RangeRatio: 0.5}, Count: 10, Seed: 3, IgnoreEOS: true}}},
		{"{source: synthetic, input_len: {mean: 1000, sd: 100}, output_len: {fixed: 64}, count: 1}",
			workload.Spec{Source: "synthetic", Synthetic: &workload.Synthetic{InputLen: workload.Length{Mean: 1000, SD: 100},
				OutputLen: workload.Length{Fixed: 64}, Count: 1}}},
	}
	for _, c := range cases {
		r, err := Parse([]byte(promptsHead+c.yaml+"\n"), "r.yaml", dir)
		if err != nil {
			t.Errorf("%s: %v", c.yaml, err)
			continue
		}
		got := r.Workload.Prompts.Spec()
		if got.Source != c.want.Source || got.Path != c.want.Path || strings.Join(got.Inline, "|") != strings.Join(c.want.Inline, "|") ||
			(got.Synthetic == nil) != (c.want.Synthetic == nil) || (got.Synthetic != nil && *got.Synthetic != *c.want.Synthetic) ||
			(got.Dataset == nil) != (c.want.Dataset == nil) || (got.Dataset != nil && *got.Dataset != *c.want.Dataset) {
			t.Errorf("%s: spec %+v (synthetic %+v), want %+v", c.yaml, got, got.Synthetic, c.want)
		}
	}
}

func TestPromptSourceProblems(t *testing.T) {
	cases := []struct{ yaml, want string }{
		{"{source: nope}", `workload.prompts.source: "nope": want one of builtin, chat_jsonl, file, prefix_repetition, sharegpt, synthetic`},
		{"{source: chat_jsonl, path: x, use_output_len: true}", "workload.prompts.use_output_len: the chat_jsonl source always takes"},
		{"{source: chat_jsonl}", "workload.prompts.path: empty (the chat_jsonl source reads a file)"},
		{"{source: sharegpt}", "workload.prompts.path: empty (the sharegpt source reads a file)"},
		{"{source: sharegpt, path: x, seed: 2}", "not the sharegpt source's"},
		{"{source: sharegpt, path: x, max_model_len: -1}", "workload.prompts.max_model_len: -1: must be 0"},
		{"{source: synthetic, input_len: {fixed: 1}, output_len: {fixed: 1}, count: 1, use_output_len: true}", "not the synthetic source's"},
		{"{source: file}", "workload.prompts.path: empty (the file source reads a file)"},
		{"{source: file, path: missing.jsonl}", "workload.prompts.path: "},
		{"{source: file, path: x, count: 3}", "workload.prompts: the file source takes path alone"},
		{"{source: synthetic, path: x, input_len: {fixed: 1}, output_len: {fixed: 1}, count: 1}", "workload.prompts.path: the synthetic source reads no file"},
		{"{source: synthetic, output_len: {fixed: 1}, count: 1}", "workload.prompts.input_len: give fixed, or mean"},
		{"{source: synthetic, input_len: {fixed: 1}, output_len: {mean: 5, range_ratio: 2}, count: 1}", "workload.prompts.output_len: range_ratio 2: want 0 ≤ r < 1"},
		{"{source: synthetic, input_len: {fixed: 1}, output_len: {fixed: 1}}", "workload.prompts.count: 0: must be at least 1"},
		{"{source: synthetic, input_len: {fixed: 1, lenght: 2}, output_len: {fixed: 1}, count: 1}", "workload.prompts.input_len.lenght: unknown key"},
		{"{source: synthetic, input_len: {fixed: big}, output_len: {fixed: 1}, count: 1}", "workload.prompts.input_len.fixed: want a whole number"},
		{"{sourse: synthetic}", "workload.prompts.sourse: unknown key"},
		{"{source: builtin, seed: 3}", "workload.prompts: the builtin source takes no parameters"},
	}
	for _, c := range cases {
		_, err := Parse([]byte(promptsHead+c.yaml+"\n"), "r.yaml", t.TempDir())
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.yaml, err, c.want)
		}
	}
	// Every problem at once, each with its path.
	_, err := Parse([]byte(promptsHead+"{source: synthetic, input_len: {mean: -3}, output_len: {fixed: -1}, count: -2}\n"), "r.yaml", t.TempDir())
	for _, want := range []string{"workload.prompts.input_len: mean -3", "workload.prompts.output_len: fixed -1", "workload.prompts.count: -2"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("all problems: %v, want %q", err, want)
		}
	}
}
