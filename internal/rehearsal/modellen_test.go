package rehearsal

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/workload"
)

// TestPromptsModelLen: the smallest servers[].max_model_len is checked when
// the prompts are resolved: a synthetic prompt over it is refused naming the
// prompt, its lengths, the limit and the server; the dataset sources skip
// and count the entries over it instead.
func TestPromptsModelLen(t *testing.T) {
	const head = "model: {id: m}\ntokenizer: {variant: qwen2.5}\n"
	synth := "workload:\n  max_tokens: 16\n  prompts: {source: synthetic, input_len: {fixed: 50}, output_len: {fixed: 20}, count: 3}\n"
	servers := func(a, b int) string {
		return "servers:\n  - {name: a, launch: [x, '{port}'], max_model_len: " + strconv.Itoa(a) + "}\n  - {name: b, launch: [x, '{port}'], max_model_len: " + strconv.Itoa(b) + "}\n"
	}
	if _, err := promptsOf(t, head+servers(70, 0)+synth); err != nil {
		t.Fatalf("50 + 20 within 70: %v", err)
	}
	_, err := promptsOf(t, head+servers(100, 69)+synth)
	var tl *workload.TooLongError
	if !errors.As(err, &tl) || tl.Index != 0 || tl.InputTokens != 50 || tl.MaxTokens != 20 || tl.MaxModelLen != 69 || tl.Server != "b" {
		t.Fatalf("err %v (%+v)", err, tl)
	}
	if want := "prompt 0: 50 input tokens + max_tokens 20 = 70, over max_model_len 69 of server b"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	// A prompt without its own max_tokens takes the workload's.
	inline := "workload:\n  max_tokens: 60\n  prompts: [short, \"" + strings.Repeat("word ", 30) + "\"]\n"
	_, err = promptsOf(t, head+servers(80, 0)+inline)
	if !errors.As(err, &tl) || tl.Index != 1 || tl.MaxTokens != 60 {
		t.Fatalf("inline: %v", err)
	}
	// prefix_repetition prompts are prefix_len + suffix_len tokens.
	rep := "workload:\n  prompts: {source: prefix_repetition, num_prefixes: 2, prefix_len: 40, suffix_len: 8, count: 4, output_len: {fixed: 10}}\n"
	if _, err := promptsOf(t, head+servers(57, 0)+rep); !errors.As(err, &tl) || tl.InputTokens != 48 {
		t.Fatalf("prefix_repetition: %v", err)
	}
	// No tokenizer to count with: refused, not unchecked.
	_, err = promptsOf(t, "model: {id: m}\ntokenizer: {variant: usage}\n"+servers(80, 0)+inline)
	if err == nil || !strings.Contains(err.Error(), "max_model_len 80 of server a: checking prompts against it needs the pinned tokenizer") {
		t.Fatalf("usage tokenizer: %v", err)
	}
	// ShareGPT skips the entries over the limit and counts them, as with its own max_model_len.
	sg, err := filepath.Abs("../../examples/data/sharegpt-sample.json")
	if err != nil {
		t.Fatal(err)
	}
	sgw := "workload:\n  prompts: {source: sharegpt, path: " + sg + ", use_output_len: true}\n"
	all, err := promptsOf(t, head+servers(0, 0)+sgw)
	if err != nil {
		t.Fatal(err)
	}
	opened, err := OpenTokenizer(context.Background(), parse(t, head+servers(0, 0)))
	if err != nil {
		t.Fatal(err)
	}
	tok := opened.Tokenizer
	longest := 0
	for _, p := range all.Prompts {
		longest = max(longest, tok.Count(p.Text)+p.MaxTokens)
	}
	set, err := promptsOf(t, head+servers(longest-1, 0)+sgw)
	if err != nil {
		t.Fatal(err)
	}
	if set.Record.Skipped[workload.SkipTooLong] < 1 || len(set.Prompts) != len(all.Prompts)-set.Record.Skipped[workload.SkipTooLong] ||
		set.Record.Params["max_model_len"] != longest-1 {
		t.Fatalf("sharegpt: %d of %d prompts, record %+v", len(set.Prompts), len(all.Prompts), set.Record)
	}
}

// promptsOf resolves the prompts of a rehearsal file as the commands do:
// its tokenizer opened first, the prompts counted with it.
func promptsOf(t *testing.T, yaml string) (workload.Set, error) {
	t.Helper()
	cfg := parse(t, yaml)
	opened, err := OpenTokenizer(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return Prompts(cfg, opened.Tokenizer)
}
