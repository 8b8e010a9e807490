package cli

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/bundle/bundletest"
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
		{[]string{"--dataset-name", "sonnet"}, `--dataset-name sonnet: vllm bench serve's dataset that rehearse does not read`},
		{[]string{"--dataset-name", "nope"}, `--dataset-name "nope": want random, prefix_repetition, sharegpt, custom, chat, mooncake or azure_trace`},
		{[]string{"--dataset-name", "sharegpt"}, "--dataset-name sharegpt needs --dataset-path"},
		{[]string{"--dataset-path", "x.json"}, "--dataset-path needs --dataset-name"},
		{[]string{"--dataset-name", "random", "--dataset-path", "x"}, "--dataset-path: the random dataset reads no file"},
		{[]string{"--dataset-name", "random", "--random-input-len", "0"}, "--random-input-len 0: want at least 1"},
		{[]string{"--dataset-name", "random", "--random-range-ratio", "1.5"}, "--random-range-ratio: range_ratio 1.5"},
		{[]string{"--dataset-name", "random", "--num-prompts", "0"}, "--num-prompts: 0: must be at least 1"},
		{[]string{"--dataset-name", "custom", "--dataset-path", "x", "--num-prompts", "3"}, "--num-prompts applies to random, sharegpt and chat"},
		{[]string{"--dataset-name", "random", "--prompts", "p.txt"}, "--prompts and --dataset-name: give one"},
		{[]string{"--model", "m", "--tokenizer", "qwen3", "--dataset-name", "sharegpt", "--dataset-path", "/nonexistent/sg.json"}, "--dataset-path: /nonexistent/sg.json: no such file"},
		{[]string{"--model", "m", "--dataset-name", "random", "--tokenizer", "usage"}, "--dataset-name random: synthetic prompts need the pinned tokenizer"},
	}
	for _, c := range cases {
		code, _, errs := runMain(context.Background(), append([]string{"bench", "--base-url", "http://127.0.0.1:9"}, c.args...)...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want 2 and %q", c.args, code, errs, c.want)
		}
	}
}

// TestBenchMultiTurn runs bench --multi-turn with the random dataset:
// each of the two clients goes through one session of --max-turns turns,
// each turn a record of its session, every turn's input_tokens its whole
// history; the bundle verifies (bench verifies what it wrote).
func TestBenchMultiTurn(t *testing.T) {
	srv, _ := benchServer(t, 3, time.Millisecond)
	dir := filepath.Join(t.TempDir(), "b")
	code, out, errs := runMain(context.Background(), "bench", "--base-url", srv.URL, "--concurrency", "2", "--repeats", "1",
		"--tokenizer", "qwen2.5", "--dataset-name", "random", "--num-prompts", "2", "--random-input-len", "16",
		"--random-output-len", "4", "--multi-turn", "--max-turns", "3", "--think-time", "1ms", "-o", dir)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	res, err := bundle.ReadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Workload.Sessions) != 2 || len(res.Records) != 6 || res.Workload.ThinkTime == nil || res.Workload.ThinkTime.MeanS != 0.001 {
		t.Fatalf("%d sessions, %d records, think time %+v; want 2, 6 and 1 ms", len(res.Workload.Sessions), len(res.Records), res.Workload.ThinkTime)
	}
	if p := bundletest.Verify(dir); len(p) > 0 {
		t.Fatalf("verify: %v", p)
	}
	for _, r := range res.Records {
		if r.Session == nil || r.Turn < 1 || r.InputTokens == nil || *r.InputTokens < 16*r.Turn {
			t.Fatalf("record %+v: want a session's turn of at least 16 input tokens a turn", r)
		}
	}
}

func TestBenchMultiTurnFlagErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--max-turns", "3"}, "--max-turns applies to multi-turn sessions: add --multi-turn"},
		{[]string{"--think-time", "1s"}, "--think-time applies to multi-turn sessions: add --multi-turn"},
		{[]string{"--multi-turn"}, "--multi-turn needs --dataset-name sharegpt, chat or random"},
		{[]string{"--multi-turn", "--dataset-name", "random"}, "--multi-turn with --dataset-name random needs --max-turns N"},
		{[]string{"--multi-turn", "--dataset-name", "chat", "--dataset-path", "x", "--max-turns", "-1"}, "--max-turns -1: want 0 (all) or more"},
		{[]string{"--multi-turn", "--dataset-name", "random", "--max-turns", "2", "--think-time", "-1s"}, "--think-time -1s: want 0 or a positive duration"},
	}
	for _, c := range cases {
		code, _, errs := runMain(context.Background(), append([]string{"bench", "--base-url", "http://127.0.0.1:9"}, c.args...)...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want 2 and %q", c.args, code, errs, c.want)
		}
	}
}
