package workload

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// vLLM's order: the entries of two turns or more shuffled as CPython's
// random.shuffle with the seed, then taken while vLLM's length checks keep
// them. With seed 0, CPython's shuffle of 12 entries is
// [1 9 8 5 10 2 3 7 4 0 11 6]; entry 9's prompt is too short (under 4
// tokens) and is skipped where it falls, not before the shuffle.
func TestShareGPTVLLMOrder(t *testing.T) {
	var entries []string
	for i := range 12 {
		prompt := fmt.Sprintf("Question %d: tell me about the sea and its tides.", i)
		if i == 9 {
			prompt = "Hi"
		}
		entries = append(entries, fmt.Sprintf(`{"conversations":[{"from":"human","value":%q},{"from":"gpt","value":"The sea rises and falls twice a day, pulled by the moon."}]}`, prompt))
	}
	entries = append(entries[:6], append([]string{`{"conversations":[{"from":"human","value":"one turn only, not kept"}]}`}, entries[6:]...)...)
	path := writeFile(t, "sg.json", "["+strings.Join(entries, ",")+"]")
	texts := func(ds Dataset) []string {
		t.Helper()
		set, err := Resolve(Spec{Source: SourceShareGPT, Path: path, Dataset: &ds}, Env{Tokenizer: qwen(t)})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range set.Prompts {
			n, _, _ := strings.Cut(strings.TrimPrefix(p.Text, "Question "), ":")
			out = append(out, n)
		}
		return out
	}
	if got := texts(Dataset{Order: OrderVLLM, Seed: 0, Count: 5, UseOutputLen: true}); !slices.Equal(got, []string{"1", "8", "5", "10", "2"}) {
		t.Errorf("vLLM's order with seed 0: %v, want 1 8 5 10 2 (9 too short)", got)
	}
	if got := texts(Dataset{Order: OrderVLLMUnshuffled, Count: 3, OutputLen: 2}); !slices.Equal(got, []string{"0", "1", "2"}) {
		t.Errorf("unshuffled: %v", got)
	}
	if _, err := Resolve(Spec{Source: SourceShareGPT, Path: path, Dataset: &Dataset{Order: "python"}}, Env{Tokenizer: qwen(t)}); err == nil {
		t.Error("an unknown order was taken")
	}
}
