package cli

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/tokenizer"
)

// TestBenchRandomDataset runs bench with vLLM's random dataset flags: each
// record's prompt counts exactly --random-input-len tokens and asks for
// --random-output-len, with ignore_eos in the body and the bundle.
func TestBenchRandomDataset(t *testing.T) {
	srv, _ := benchServer(t, 3, time.Millisecond)
	dir := filepath.Join(t.TempDir(), "b")
	code, out, errs := runMain(context.Background(), "bench", "--base-url", srv.URL, "--concurrency", "2", "--repeats", "1",
		"--tokenizer", "qwen2.5", "--dataset-name", "random", "--num-prompts", "5", "--random-input-len", "40",
		"--random-output-len", "7", "--ignore-eos", "--seed", "3", "-o", dir)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	res, err := bundle.ReadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	wl := res.Workload
	src := wl.PromptSource
	if src == nil || src.Name != "synthetic" || src.Count != 5 || src.Params["seed"] != float64(3) || wl.ExtraBody["ignore_eos"] != true {
		t.Fatalf("workload %+v source %+v", wl, src)
	}
	tok, err := tokenizer.Embedded("qwen2.5")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range wl.Prompts {
		if n := tok.Count(p); n != 40 {
			t.Fatalf("prompt of %d tokens, want 40", n)
		}
	}
	for _, r := range res.Records {
		if r.InputTokens == nil || *r.InputTokens != 40 || r.MaxTokens != 7 {
			t.Fatalf("record input_tokens %v max_tokens %d", r.InputTokens, r.MaxTokens)
		}
	}
}

func TestBenchDatasetFlagErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--dataset-name", "sonnet"}, `--dataset-name "sonnet": want random, prefix_repetition, sharegpt, custom, chat, mooncake or azure_trace`},
		{[]string{"--dataset-name", "sharegpt"}, "--dataset-name sharegpt needs --dataset-path"},
		{[]string{"--dataset-path", "x.json"}, "--dataset-path needs --dataset-name"},
		{[]string{"--dataset-name", "random", "--dataset-path", "x"}, "--dataset-path: the random dataset reads no file"},
		{[]string{"--dataset-name", "random", "--random-input-len", "0"}, "--random-input-len 0: want at least 1"},
		{[]string{"--dataset-name", "random", "--random-range-ratio", "1.5"}, "--dataset-name random: input_len: range_ratio 1.5"},
		{[]string{"--dataset-name", "random", "--num-prompts", "0"}, "--dataset-name random: count: 0"},
		{[]string{"--dataset-name", "custom", "--dataset-path", "x", "--num-prompts", "3"}, "--num-prompts applies to random, sharegpt and chat"},
		{[]string{"--dataset-name", "random", "--prompts", "p.txt"}, "--prompts and --dataset-name: give one"},
		{[]string{"--model", "m", "--dataset-name", "sharegpt", "--dataset-path", "/nonexistent/sg.json"}, "--dataset-name sharegpt: prompts: open /nonexistent/sg.json"},
		{[]string{"--model", "m", "--dataset-name", "random", "--tokenizer", "usage"}, "--dataset-name random: synthetic prompts need the pinned tokenizer"},
	}
	for _, c := range cases {
		code, _, errs := runMain(context.Background(), append([]string{"bench", "--base-url", "http://127.0.0.1:9"}, c.args...)...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want 2 and %q", c.args, code, errs, c.want)
		}
	}
}
