package workload

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/tokenizer"
)

func qwen(tb testing.TB) *tokenizer.Tokenizer {
	tb.Helper()
	tok, err := tokenizer.Embedded("qwen2.5")
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

// TestSyntheticExact is the exactness property: over many seeds and
// lengths, the pinned tokenizer re-encodes every prompt at exactly its
// drawn input length.
func TestSyntheticExact(t *testing.T) {
	tok := qwen(t)
	for _, n := range []int{1, 2, 3, 7, 64, 333, 1024, 2049} {
		for seed := range int64(12) {
			s := Synthetic{InputLen: Length{Fixed: n}, OutputLen: Length{Fixed: 5}, Count: 3, Seed: seed}
			ps, err := SyntheticPrompts(s, Env{Tokenizer: tok})
			if err != nil {
				t.Fatal(err)
			}
			for i, p := range ps {
				if got := len(tok.Encode(p.Text)); got != n {
					t.Fatalf("n=%d seed=%d prompt %d: re-encoded at %d tokens", n, seed, i, got)
				}
				if p.MaxTokens != 5 {
					t.Fatalf("max_tokens %d", p.MaxTokens)
				}
			}
		}
	}
	// Drawn lengths: each prompt is exact at its own draw.
	s := Synthetic{InputLen: Length{Mean: 300, RangeRatio: 0.5}, OutputLen: Length{Mean: 50, SD: 20}, Count: 200, Seed: 9}
	ps, err := SyntheticPrompts(s, Env{Tokenizer: tok})
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range ps {
		rng := rand.New(rand.NewPCG(9, uint64(i)))
		want := s.InputLen.Draw(rng)
		if got := tok.Count(p.Text); got != want {
			t.Fatalf("prompt %d: %d tokens, drawn %d", i, got, want)
		}
	}
}

func TestSyntheticSeeded(t *testing.T) {
	tok := qwen(t)
	s := Synthetic{InputLen: Length{Mean: 100, RangeRatio: 0.2}, OutputLen: Length{Mean: 64, RangeRatio: 0.5}, Count: 20, Seed: 4}
	a, _ := SyntheticPrompts(s, Env{Tokenizer: tok})
	b, _ := SyntheticPrompts(s, Env{Tokenizer: tok})
	s.Seed = 5
	c, _ := SyntheticPrompts(s, Env{Tokenizer: tok})
	if PromptsSHA256(a) != PromptsSHA256(b) {
		t.Fatal("same seed, different prompts")
	}
	if PromptsSHA256(a) == PromptsSHA256(c) {
		t.Fatal("seeds 4 and 5 give the same prompts")
	}
	// Prompt i depends on (seed, i) only: a longer run has the shorter as its prefix.
	s.Seed, s.Count = 4, 25
	d, _ := SyntheticPrompts(s, Env{Tokenizer: tok})
	if PromptsSHA256(d[:20]) != PromptsSHA256(a) {
		t.Fatal("prompt i depends on count")
	}
}

func TestLengthDraw(t *testing.T) {
	const n = 20000
	cases := []struct {
		l          Length
		lo, hi     int
		mean, tolM float64
		sd, tolSD  float64
	}{
		{Length{Fixed: 7}, 7, 7, 7, 0, 0, 0},
		{Length{Mean: 12.4}, 12, 12, 12, 0, 0, 0},
		{Length{Mean: 1000, RangeRatio: 0.1}, 900, 1100, 1000, 3, 57.7, 2},
		{Length{Mean: 100, SD: 10}, 1, math.MaxInt, 100, 0.5, 10, 0.5},
		{Length{Mean: 2, SD: 50}, 1, math.MaxInt, 0, -1, 0, -1}, // clamped to ≥ 1
	}
	for _, c := range cases {
		rng := rand.New(rand.NewPCG(1, 2))
		var sum, sumSq float64
		for range n {
			v := c.l.Draw(rng)
			if v < c.lo || v > c.hi {
				t.Fatalf("%+v: drew %d outside [%d, %d]", c.l, v, c.lo, c.hi)
			}
			sum += float64(v)
			sumSq += float64(v) * float64(v)
		}
		mean := sum / n
		sd := math.Sqrt(sumSq/n - mean*mean)
		if c.tolM >= 0 && math.Abs(mean-c.mean) > c.tolM {
			t.Errorf("%+v: mean %.2f, want %.2f", c.l, mean, c.mean)
		}
		if c.tolSD >= 0 && math.Abs(sd-c.sd) > c.tolSD {
			t.Errorf("%+v: sd %.2f, want %.2f", c.l, sd, c.sd)
		}
	}
}

func TestSyntheticErrors(t *testing.T) {
	ok := Length{Fixed: 8}
	cases := []struct {
		s    *Synthetic
		env  Env
		want string
	}{
		{nil, Env{}, "synthetic: no parameters"},
		{&Synthetic{InputLen: ok, OutputLen: ok, Count: 1}, Env{}, "need the pinned tokenizer"},
		{&Synthetic{OutputLen: ok, Count: 1}, Env{}, "input_len: give fixed, or mean"},
		{&Synthetic{InputLen: Length{Fixed: 3, Mean: 4}, OutputLen: ok, Count: 1}, Env{}, "input_len: give fixed, or mean (with range_ratio or sd); not both"},
		{&Synthetic{InputLen: ok, OutputLen: Length{Mean: 10, RangeRatio: 1}, Count: 1}, Env{}, "output_len: range_ratio 1"},
		{&Synthetic{InputLen: ok, OutputLen: Length{Mean: 10, RangeRatio: 0.1, SD: 2}, Count: 1}, Env{}, "range_ratio or sd, not both"},
		{&Synthetic{InputLen: Length{Mean: 0.5}, OutputLen: ok, Count: 1}, Env{}, "mean 0.5: must be at least 1"},
		{&Synthetic{InputLen: ok, OutputLen: ok}, Env{}, "count: 0: must be at least 1"},
	}
	for _, c := range cases {
		_, err := Resolve(Spec{Source: SourceSynthetic, Synthetic: c.s}, c.env)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.s, err, c.want)
		}
	}
}

func TestResolveSyntheticRecord(t *testing.T) {
	tok := qwen(t)
	s := &Synthetic{InputLen: Length{Fixed: 16}, OutputLen: Length{Mean: 32, SD: 4}, Count: 4, Seed: 3, IgnoreEOS: true}
	set, err := Resolve(Spec{Source: SourceSynthetic, Synthetic: s}, Env{Tokenizer: tok})
	if err != nil {
		t.Fatal(err)
	}
	r := set.Record
	if r.Name != SourceSynthetic || r.SHA256 != PromptsSHA256(set.Prompts) || r.Params["seed"] != int64(3) || r.Params["count"] != 4 ||
		r.Params["ignore_eos"] != true || r.Params["input_len"].(map[string]any)["fixed"] != 16 {
		t.Fatalf("record %+v", r)
	}
	if len(set.MaxTokens()) != 4 {
		t.Fatalf("max_tokens %v", set.MaxTokens())
	}
}

// BenchmarkSynthetic builds and verifies 100,000 prompts of 1,024 tokens
// (the word pool built beforehand); prompts/s is the figure
// bench/synthetic.md keeps.
func BenchmarkSynthetic(b *testing.B) {
	tok := qwen(b)
	s := Synthetic{InputLen: Length{Fixed: 1024}, OutputLen: Length{Fixed: 128}, Count: 100_000, Seed: 1}
	if _, err := wordPool(tok); err != nil {
		b.Fatal(err)
	}
	n := 0
	for b.Loop() {
		ps, err := SyntheticPrompts(s, Env{Tokenizer: tok})
		if err != nil {
			b.Fatal(err)
		}
		n += len(ps)
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "prompts/s")
}
