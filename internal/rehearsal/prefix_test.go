package rehearsal_test

import (
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/tokenizer"
)

// TestPrefixExampleAgainstSim runs examples/prefix.yaml against rehearse
// sim (prefix cache off, then on): 64 prompts of exactly 512 + 64 tokens sharing 4 prefixes, each
// record counting its prompt's 576 input tokens and asking for 128, the
// source and its parameters recorded, and the bundle verifies.
func TestPrefixExampleAgainstSim(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two simulated servers")
	}
	tok, err := tokenizer.Embedded("qwen2.5")
	if err != nil {
		t.Fatal(err)
	}
	res := runExample(t, "prefix.yaml")
	wl := res.Workload
	src := wl.PromptSource
	if src == nil || src.Name != "prefix_repetition" || src.Count != 64 || len(src.SHA256) != 64 || len(wl.Prompts) != 64 ||
		src.Params["num_prefixes"] != float64(4) || src.Params["prefix_len"] != float64(512) || src.Params["suffix_len"] != float64(64) ||
		src.Params["suffixes_per_prefix"] != float64(16) || src.Params["seed"] != float64(1) || wl.ExtraBody["ignore_eos"] != true {
		t.Fatalf("workload %+v, source %+v", wl, src)
	}
	prefixes := map[string]int{}
	for i, p := range wl.Prompts {
		if n := tok.Count(p); n != 576 {
			t.Fatalf("prompt %d: %d tokens, want 576", i, n)
		}
		prefixes[strings.Join(strings.Fields(p)[:512], " ")]++
	}
	if len(prefixes) != 4 {
		t.Fatalf("%d distinct prefixes, want 4", len(prefixes))
	}
	if len(res.Servers) != 2 || !strings.Contains(strings.Join(res.Servers[1].LaunchArgv, " "), "--prefix-caching on") {
		t.Fatalf("servers %+v", res.Servers)
	}
	servers := map[string]bool{}
	for i, r := range res.Records {
		servers[r.Server] = true
		if r.InputTokens == nil || *r.InputTokens != 576 || r.MaxTokens != 128 {
			t.Fatalf("record %d: input_tokens %v, max_tokens %d", i, r.InputTokens, r.MaxTokens)
		}
		if u := r.UsageCompletionTokens; r.OK && (u == nil || *u != 128) {
			t.Errorf("record %d: usage_completion_tokens %v with ignore_eos, want 128", i, u)
		}
	}
	if len(servers) != 2 {
		t.Errorf("records of %d servers, want 2", len(servers))
	}
}
