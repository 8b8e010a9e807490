package cli

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/tokenizer"
)

// TestBenchPrefixRepetitionDataset runs bench with vLLM's prefix_repetition
// flags: --num-prompts prompts of exactly prefix+suffix tokens sharing
// --prefix-repetition-num-prefixes prefixes, each asking for
// --prefix-repetition-output-len, recorded with the source's parameters.
func TestBenchPrefixRepetitionDataset(t *testing.T) {
	srv, _ := benchServer(t, 3, time.Millisecond)
	dir := filepath.Join(t.TempDir(), "b")
	code, out, errs := runMain(context.Background(), "bench", "--base-url", srv.URL, "--concurrency", "2", "--repeats", "1",
		"--tokenizer", "qwen2.5", "--dataset-name", "prefix_repetition", "--num-prompts", "6", "--prefix-repetition-num-prefixes", "2",
		"--prefix-repetition-prefix-len", "30", "--prefix-repetition-suffix-len", "5", "--prefix-repetition-output-len", "7",
		"--seed", "4", "--max-model-len", "42", "-o", dir)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	res, err := bundle.ReadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	wl := res.Workload
	src := wl.PromptSource
	if src == nil || src.Name != "prefix_repetition" || src.Count != 6 || src.Params["seed"] != float64(4) ||
		src.Params["num_prefixes"] != float64(2) || src.Params["prefix_len"] != float64(30) || src.Params["suffix_len"] != float64(5) ||
		src.Params["suffixes_per_prefix"] != float64(3) {
		t.Fatalf("workload %+v source %+v", wl, src)
	}
	tok, err := tokenizer.Embedded("qwen2.5")
	if err != nil {
		t.Fatal(err)
	}
	prefixes := map[string]bool{}
	for _, p := range wl.Prompts {
		if n := tok.Count(p); n != 35 {
			t.Fatalf("prompt of %d tokens, want 35", n)
		}
		prefixes[strings.Join(strings.Fields(p)[:30], " ")] = true
	}
	if len(prefixes) != 2 || len(wl.PromptMaxTokens) != 6 || wl.PromptMaxTokens[0] != 7 {
		t.Fatalf("%d prefixes, max_tokens %v", len(prefixes), wl.PromptMaxTokens)
	}
	for _, r := range res.Records {
		if r.InputTokens == nil || *r.InputTokens != 35 || r.MaxTokens != 7 {
			t.Fatalf("record input_tokens %v max_tokens %d", r.InputTokens, r.MaxTokens)
		}
	}
}

// TestBenchRandomPrefixLen: --random-prefix-len puts the same prefix before
// every random prompt, its tokens added to --random-input-len.
func TestBenchRandomPrefixLen(t *testing.T) {
	srv, _ := benchServer(t, 3, time.Millisecond)
	dir := filepath.Join(t.TempDir(), "b")
	code, out, errs := runMain(context.Background(), "bench", "--base-url", srv.URL, "--concurrency", "1", "--repeats", "1",
		"--tokenizer", "qwen2.5", "--dataset-name", "random", "--num-prompts", "3", "--random-input-len", "10",
		"--random-output-len", "4", "--random-prefix-len", "20", "-o", dir)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	res, err := bundle.ReadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	wl := res.Workload
	if wl.PromptSource == nil || wl.PromptSource.Params["prefix_len"] != float64(20) {
		t.Fatalf("source %+v", wl.PromptSource)
	}
	tok, _ := tokenizer.Embedded("qwen2.5")
	first := strings.Fields(wl.Prompts[0])[:20]
	for _, p := range wl.Prompts {
		if n := tok.Count(p); n != 30 {
			t.Fatalf("prompt of %d tokens, want 30", n)
		}
		if strings.Join(strings.Fields(p)[:20], " ") != strings.Join(first, " ") {
			t.Fatal("prompts do not share their first 20 words")
		}
	}
}

func TestBenchPrefixFlagErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--dataset-name", "prefix_repetition", "--prefix-repetition-prefix-len", "0"}, "--prefix-repetition-prefix-len: 0: must be at least 1"},
		{[]string{"--dataset-name", "prefix_repetition", "--prefix-repetition-prefix-len", "-4"}, "--prefix-repetition-prefix-len: -4: must be at least 1"},
		{[]string{"--dataset-name", "prefix_repetition", "--prefix-repetition-suffix-len", "0"}, "--prefix-repetition-suffix-len: 0: must be at least 1"},
		{[]string{"--dataset-name", "prefix_repetition", "--prefix-repetition-num-prefixes", "0"}, "--prefix-repetition-num-prefixes: 0: must be at least 1"},
		{[]string{"--dataset-name", "prefix_repetition", "--prefix-repetition-output-len", "0"}, "--prefix-repetition-output-len 0: want at least 1"},
		{[]string{"--dataset-name", "prefix_repetition", "--num-prompts", "1001"}, "--num-prompts 1001 is not a multiple of --prefix-repetition-num-prefixes 10"},
		{[]string{"--dataset-name", "prefix_repetition", "--prefix-repetition-prefix-len", "9999999"}, "--prefix-repetition-prefix-len: 9999999: must be at most 1048576"},
		{[]string{"--dataset-name", "prefix_repetition", "--num-prompts", "900000", "--prefix-repetition-num-prefixes", "1"}, "tokens in all, more than 100000000"},
		{[]string{"--dataset-name", "prefix_repetition", "--dataset-path", "x"}, "--dataset-path: the prefix_repetition dataset reads no file"},
		{[]string{"--dataset-name", "random", "--prefix-repetition-suffix-len", "3"}, "--prefix-repetition-suffix-len applies to --dataset-name prefix_repetition"},
		{[]string{"--dataset-name", "prefix_repetition", "--random-prefix-len", "3"}, "--random-prefix-len applies to --dataset-name random"},
		{[]string{"--dataset-name", "random", "--random-prefix-len", "-1"}, "--random-prefix-len: -1: must be 0 (none) or more"},
		{[]string{"--max-model-len", "-1"}, "--max-model-len: -1: must be 0 (unknown) or more"},
		{[]string{"--model", "m", "--dataset-name", "prefix_repetition", "--tokenizer", "usage"}, "--dataset-name prefix_repetition: synthetic prompts need the pinned tokenizer"},
		{[]string{"--model", "m", "--max-model-len", "100", "--tokenizer", "usage"}, "needs the pinned tokenizer to count their tokens"},
	}
	for _, c := range cases {
		code, _, errs := runMain(context.Background(), append([]string{"bench", "--base-url", "http://127.0.0.1:9"}, c.args...)...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want 2 and %q", c.args, code, errs, c.want)
		}
	}
}

// TestBenchMaxModelLenRefusesBeforeAnyRequest: a prompt over --max-model-len
// is one line naming the prompt, its lengths and the limit, exit 2, and the
// server gets no request at all.
func TestBenchMaxModelLenRefusesBeforeAnyRequest(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	t.Cleanup(srv.Close)
	code, _, errs := runMain(context.Background(), "bench", "--base-url", srv.URL, "--model", "m", "--tokenizer", "qwen2.5",
		"--dataset-name", "random", "--num-prompts", "4", "--random-input-len", "100", "--random-output-len", "30",
		"--max-model-len", "129", "-o", filepath.Join(t.TempDir(), "b"))
	want := "--max-model-len 129: prompt 0: 100 input tokens + max_tokens 30 = 130, over max_model_len 129 of server server"
	if code != 2 || !strings.Contains(errs, want) {
		t.Errorf("exit %d, stderr %q, want 2 and %q", code, errs, want)
	}
	if strings.Count(strings.TrimSpace(errs), "\n") > 0 {
		t.Errorf("more than one line: %q", errs)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the server got %d requests", n)
	}
}

// TestRunMaxModelLen: run refuses a prompt over servers[].max_model_len in
// one line naming the file, before any server is launched.
func TestRunMaxModelLen(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "r.yaml")
	yaml := "model: {id: m}\ntokenizer: {variant: qwen2.5}\nservers: [{name: v, launch: [/nonexistent/server, '{port}'], max_model_len: 60}]\n" +
		"workload:\n  prompts: {source: prefix_repetition, num_prefixes: 1, prefix_len: 40, suffix_len: 8, count: 2, output_len: {fixed: 16}}\n"
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := runMain(context.Background(), "run", "-q", "-f", file, "-o", filepath.Join(dir, "b"))
	want := file + ": workload.prompts: prompt 0: 48 input tokens + max_tokens 16 = 64, over max_model_len 60 of server v"
	if code != 2 || !strings.Contains(errs, want) || strings.Count(strings.TrimSpace(errs), "\n") > 0 {
		t.Errorf("exit %d, stderr %q, want 2 and one line %q", code, errs, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "b")); err == nil {
		t.Error("a bundle folder was made")
	}
}

// TestBenchMaxModelLenFromModels: without --model, the max_model_len that
// the server reports on /v1/models (as vLLM does) is checked as
// --max-model-len is, and no chat request is sent.
func TestBenchMaxModelLenFromModels(t *testing.T) {
	var chats atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" {
			rw.Write([]byte(`{"object":"list","data":[{"id":"m","object":"model","max_model_len":120}]}`))
			return
		}
		chats.Add(1)
	}))
	t.Cleanup(srv.Close)
	code, _, errs := runMain(context.Background(), "bench", "--base-url", srv.URL, "--tokenizer", "qwen2.5",
		"--dataset-name", "prefix_repetition", "--num-prompts", "2", "--prefix-repetition-num-prefixes", "1",
		"--prefix-repetition-prefix-len", "64", "--prefix-repetition-suffix-len", "8", "--prefix-repetition-output-len", "64",
		"-o", filepath.Join(t.TempDir(), "b"))
	want := "the server's /v1/models: prompt 0: 72 input tokens + max_tokens 64 = 136, over max_model_len 120 of server server"
	if code != 2 || !strings.Contains(errs, want) {
		t.Errorf("exit %d, stderr %q, want 2 and %q", code, errs, want)
	}
	if n := chats.Load(); n != 0 {
		t.Errorf("%d chat requests sent", n)
	}
}
