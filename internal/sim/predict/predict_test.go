package predict

import (
	"math"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/sim/engine"
	"github.com/rehearse/rehearse/internal/tokenizer"
)

func TestPredictAggregatesByTheContract(t *testing.T) {
	p, err := engine.BuiltinProfile("t4-qwen2.5-1.5b-serial")
	if err != nil {
		t.Fatal(err)
	}
	w := ClosedWorkload{Concurrencies: []int{8, 1}, Repeats: 2, Prompts: fitPrompts, MaxTokens: 64, TimeoutS: 60, IgnoreEOS: true}
	pr, err := Closed(p, w, Options{Server: "naive"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pr.Waves) != 4 || len(pr.Records) != 2*(1+8) {
		t.Fatalf("%d waves and %d records, want 4 and 18", len(pr.Waves), len(pr.Records))
	}
	if got := pr.Waves[0].Concurrency; got != 1 {
		t.Errorf("first wave at %d clients, want concurrencies in ascending order", got)
	}
	// The aggregates are the contract's own over the predicted records.
	want := contract.Aggregates(pr.Waves, pr.Records, []string{"naive"}, "")
	if len(pr.Aggregates) != 2 || *pr.Aggregates[1].Goodput.Median != *want[1].Goodput.Median {
		t.Fatalf("aggregates %+v, want the contract's %+v", pr.Aggregates, want)
	}
	for _, r := range pr.Records {
		if !r.OK || r.OutputTokens != 64 || *r.UsageCompletionTokens != 64 || r.FinishReason != "length" {
			t.Fatalf("record %+v: want ok, 64 generated tokens counted as 64 (the simulator's text round-trips)", r)
		}
	}
	// One client at a time: the 8-client wave lasts about 8 one-client waves.
	one, eight := pr.Waves[0].WallS, pr.Waves[2].WallS
	if eight < 7.5*one || eight > 8.5*one {
		t.Errorf("8-client wave %.3f s against 1-client %.3f s: a serial engine should take about 8 times as long", eight, one)
	}
	again, err := Closed(p, w, Options{Server: "naive"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range pr.Records {
		if pr.Records[i].EndS != again.Records[i].EndS {
			t.Fatalf("record %d: end %.9f then %.9f: a prediction must be deterministic", i, pr.Records[i].EndS, again.Records[i].EndS)
		}
	}
}

func TestPredictRejectsBadInput(t *testing.T) {
	p, err := engine.BuiltinProfile("t4-qwen2.5-1.5b-batching")
	if err != nil {
		t.Fatal(err)
	}
	good := ClosedWorkload{Concurrencies: []int{1}, Repeats: 1, Prompts: fitPrompts, MaxTokens: 16, TimeoutS: 60}
	for _, tc := range []struct {
		name string
		edit func(*ClosedWorkload, *Options)
		want string
	}{
		{"no prompts", func(w *ClosedWorkload, _ *Options) { w.Prompts = nil }, "no prompts"},
		{"zero repeats", func(w *ClosedWorkload, _ *Options) { w.Repeats = 0 }, "repeats = 0"},
		{"bad timeout", func(w *ClosedWorkload, _ *Options) { w.TimeoutS = math.Inf(1) }, "timeout_s = +Inf"},
		{"over max_model_len", func(w *ClosedWorkload, _ *Options) { w.MaxTokens = 4000 }, "max_model_len 2048"},
		{"bad concurrency", func(w *ClosedWorkload, _ *Options) { w.Concurrencies = []int{0} }, "concurrency 0"},
	} {
		w, o := good, Options{}
		tc.edit(&w, &o)
		_, err := Closed(p, w, o)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

func BenchmarkPredictCanonical(b *testing.B) {
	p, err := engine.BuiltinProfile("h200-qwen2.5-1.5b-transformers-batching")
	if err != nil {
		b.Fatal(err)
	}
	w := ClosedWorkload{Concurrencies: []int{1, 8, 32, 64}, Repeats: 3, Prompts: fitPrompts, MaxTokens: 128, TimeoutS: 60, IgnoreEOS: true}
	tk, err := tokenizer.Default()
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := Closed(p, w, Options{Tokenizer: tk}); err != nil {
			b.Fatal(err)
		}
	}
}
