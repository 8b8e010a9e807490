package workload

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// firstWords is the first n space-separated words of text (a prompt's
// prefix: pool words are one token each).
func firstWords(text string, n int) string {
	return strings.Join(strings.Fields(text)[:n], " ")
}

// TestPrefixRepetitionExact is the exactness property over many seeds and
// sizes: P×S prompts, each re-encoded at exactly prefix_len+suffix_len
// tokens, whose first prefix_len token ids are those of its prefix alone
// (what a prefix cache matches), P distinct prefixes of S prompts each.
func TestPrefixRepetitionExact(t *testing.T) {
	tok := qwen(t)
	for _, c := range []struct{ p, lp, ls, s int }{{1, 1, 1, 1}, {2, 3, 1, 4}, {3, 64, 7, 5}, {4, 257, 33, 3}, {1, 1024, 2, 2}} {
		for seed := range int64(24) {
			pr := PrefixRepetition{NumPrefixes: c.p, PrefixLen: c.lp, SuffixLen: c.ls, Count: c.p * c.s, OutputLen: Length{Fixed: 9}, Seed: seed}
			ps, err := PrefixRepetitionPrompts(pr, tok)
			if err != nil {
				t.Fatal(err)
			}
			if len(ps) != c.p*c.s {
				t.Fatalf("%+v: %d prompts, want %d", c, len(ps), c.p*c.s)
			}
			perPrefix := map[string]int{}
			for i, p := range ps {
				ids := tok.Encode(p.Text)
				if len(ids) != c.lp+c.ls {
					t.Fatalf("%+v seed %d prompt %d: %d tokens, want %d", c, seed, i, len(ids), c.lp+c.ls)
				}
				prefix := firstWords(p.Text, c.lp)
				if !slices.Equal(ids[:c.lp], tok.Encode(prefix)) {
					t.Fatalf("%+v seed %d prompt %d: its first %d tokens are not its prefix's", c, seed, i, c.lp)
				}
				if p.MaxTokens != 9 {
					t.Fatalf("max_tokens %d, want 9", p.MaxTokens)
				}
				perPrefix[prefix]++
			}
			if len(perPrefix) != c.p {
				t.Fatalf("%+v seed %d: %d distinct prefixes, want %d", c, seed, len(perPrefix), c.p)
			}
			for _, n := range perPrefix {
				if n != c.s {
					t.Fatalf("%+v seed %d: a prefix has %d suffixes, want %d", c, seed, n, c.s)
				}
			}
		}
	}
}

func TestPrefixRepetitionSeeded(t *testing.T) {
	tok := qwen(t)
	pr := PrefixRepetition{NumPrefixes: 4, PrefixLen: 20, SuffixLen: 5, Count: 40, OutputLen: Length{Mean: 50, RangeRatio: 0.5}, Seed: 7}
	a, _ := PrefixRepetitionPrompts(pr, tok)
	b, _ := PrefixRepetitionPrompts(pr, tok)
	if PromptsSHA256(a) != PromptsSHA256(b) {
		t.Fatal("same seed, different prompts or order")
	}
	pr.Seed = 8
	c, _ := PrefixRepetitionPrompts(pr, tok)
	if PromptsSHA256(a) == PromptsSHA256(c) {
		t.Fatal("seeds 7 and 8 give the same prompts")
	}
	// Shuffled: the prompts of one prefix are not all together.
	runs := 1
	for i := 1; i < len(a); i++ {
		if firstWords(a[i].Text, 20) != firstWords(a[i-1].Text, 20) {
			runs++
		}
	}
	if runs <= 4 {
		t.Errorf("%d runs of one prefix in 40 prompts: not shuffled", runs)
	}
	// Output lengths are drawn: they vary, within the range.
	lens := map[int]bool{}
	for _, p := range a {
		if p.MaxTokens < 25 || p.MaxTokens > 75 {
			t.Fatalf("max_tokens %d outside [25, 75]", p.MaxTokens)
		}
		lens[p.MaxTokens] = true
	}
	if len(lens) < 5 {
		t.Errorf("%d distinct output lengths in 40 draws", len(lens))
	}
}

func TestPrefixRepetitionResolve(t *testing.T) {
	tok := qwen(t)
	pr := &PrefixRepetition{NumPrefixes: 2, PrefixLen: 8, SuffixLen: 4, Count: 6, OutputLen: Length{Fixed: 3}, Seed: 1, IgnoreEOS: true}
	set, err := Resolve(Spec{Source: SourcePrefixRepetition, Prefix: pr}, Env{Tokenizer: tok})
	if err != nil {
		t.Fatal(err)
	}
	r := set.Record
	if r.Name != SourcePrefixRepetition || len(set.Prompts) != 6 || !set.IgnoreEOS || len(r.SHA256) != 64 ||
		r.Params["num_prefixes"] != 2 || r.Params["prefix_len"] != 8 || r.Params["suffix_len"] != 4 ||
		r.Params["suffixes_per_prefix"] != 3 || r.Params["seed"] != int64(1) || r.Params["count"] != 6 {
		t.Fatalf("set %+v", set)
	}
	if _, err := Resolve(Spec{Source: SourcePrefixRepetition, Prefix: pr}, Env{}); err != ErrNoTokenizer {
		t.Errorf("no tokenizer: %v", err)
	}
}

// TestPrefixRepetitionCheck: each bad parameter is one problem naming its
// field and value.
func TestPrefixRepetitionCheck(t *testing.T) {
	ok := PrefixRepetition{NumPrefixes: 2, PrefixLen: 8, SuffixLen: 4, Count: 6, OutputLen: Length{Fixed: 3}}
	if p := ok.Check(); p != nil {
		t.Fatalf("good parameters: %v", p)
	}
	cases := []struct {
		edit func(*PrefixRepetition)
		want string
	}{
		{func(p *PrefixRepetition) { p.PrefixLen = 0 }, "prefix_len: 0: must be at least 1"},
		{func(p *PrefixRepetition) { p.PrefixLen = -3 }, "prefix_len: -3: must be at least 1"},
		{func(p *PrefixRepetition) { p.SuffixLen = 0 }, "suffix_len: 0: must be at least 1"},
		{func(p *PrefixRepetition) { p.NumPrefixes = 0 }, "num_prefixes: 0: must be at least 1"},
		{func(p *PrefixRepetition) { p.Count = 0 }, "count: 0: must be at least 1"},
		{func(p *PrefixRepetition) { p.Count = 7 }, "count: 7 is not a multiple of num_prefixes 2"},
		{func(p *PrefixRepetition) { p.PrefixLen = 1 << 40 }, "prefix_len: 1099511627776: must be at most 1048576"},
		{func(p *PrefixRepetition) { p.Count = 1 << 40 }, "count: 1099511627776: must be at most 1000000"},
		{func(p *PrefixRepetition) { p.PrefixLen, p.Count = 1<<20, 1000 }, "tokens in all, more than 100000000"},
		{func(p *PrefixRepetition) { p.OutputLen = Length{} }, "output_len: give fixed"},
	}
	for _, c := range cases {
		p := ok
		c.edit(&p)
		probs := p.Check()
		if len(probs) != 1 || !strings.Contains(probs[0], c.want) {
			t.Errorf("%+v: %q, want one problem with %q", p, probs, c.want)
		}
	}
}

// TestSyntheticPrefixLen: with prefix_len, every prompt is the common
// prefix's tokens then its own drawn length, exactly.
func TestSyntheticPrefixLen(t *testing.T) {
	tok := qwen(t)
	for seed := range int64(16) {
		s := Synthetic{InputLen: Length{Mean: 40, RangeRatio: 0.5}, OutputLen: Length{Fixed: 4}, Count: 8, Seed: seed, PrefixLen: 33}
		ps, err := SyntheticPrompts(s, Env{Tokenizer: tok})
		if err != nil {
			t.Fatal(err)
		}
		base := s
		base.PrefixLen = 0
		plain, _ := SyntheticPrompts(base, Env{Tokenizer: tok})
		prefix := tok.Encode(firstWords(ps[0].Text, 33))
		for i, p := range ps {
			ids := tok.Encode(p.Text)
			// The drawn length is the one without the prefix.
			if want := 33 + tok.Count(plain[i].Text); len(ids) != want {
				t.Fatalf("seed %d prompt %d: %d tokens, want %d", seed, i, len(ids), want)
			}
			if !slices.Equal(ids[:33], prefix) {
				t.Fatalf("seed %d prompt %d: does not start with the common prefix", seed, i)
			}
		}
	}
	s := Synthetic{InputLen: Length{Fixed: 5}, OutputLen: Length{Fixed: 4}, Count: 1, PrefixLen: -1}
	if p := s.Check(); len(p) != 1 || p[0] != "prefix_len: -1: must be 0 (none) or more" {
		t.Errorf("prefix_len -1: %q", p)
	}
	set, err := Resolve(Spec{Source: SourceSynthetic, Synthetic: &Synthetic{InputLen: Length{Fixed: 5}, OutputLen: Length{Fixed: 4}, Count: 2, PrefixLen: 6}}, Env{Tokenizer: tok})
	if err != nil || set.Record.Params["prefix_len"] != 6 {
		t.Fatalf("params %v, %v", set.Record.Params, err)
	}
	set, _ = Resolve(Spec{Source: SourceSynthetic, Synthetic: &Synthetic{InputLen: Length{Fixed: 5}, OutputLen: Length{Fixed: 4}, Count: 2}}, Env{Tokenizer: tok})
	if _, has := set.Record.Params["prefix_len"]; has {
		t.Error("prefix_len 0 is recorded: the record of a synthetic source without a prefix changed")
	}
}

// joiner is the pinned tokenizer, except that it counts one token more for
// the first misses texts that begin with prefix and a space: a tokenizer
// that joins across the separator, as far as afterPrefix can tell.
type joiner struct {
	Encoder
	prefix string
	misses int
	joined int
}

func (j *joiner) Count(text string) int {
	n := j.Encoder.Count(text)
	if strings.HasPrefix(text, j.prefix+" ") {
		j.joined++
		if j.joined <= j.misses {
			return n + 1
		}
	}
	return n
}

// TestAfterPrefixMends: a prompt whose prefix and suffix count one token
// too many together is drawn again, until exact; a tokenizer that always
// joins them is an error, not a prompt of the wrong length.
func TestAfterPrefixMends(t *testing.T) {
	tok := qwen(t)
	pool, err := wordPool(tok)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	prefix, _ := exactText(&b, tok, pool, rand.New(rand.NewPCG(1, 2)), 10)
	j := &joiner{Encoder: tok, prefix: prefix, misses: 3}
	text, err := afterPrefix(&b, j, pool, rand.New(rand.NewPCG(1, 3)), prefix, 10, 6)
	if err != nil || j.joined != 4 || tok.Count(text) != 16 || !strings.HasPrefix(text, prefix+" ") {
		t.Fatalf("%q (%d tokens), %v, counted %d times", text, tok.Count(text), err, j.joined)
	}
	j = &joiner{Encoder: tok, prefix: prefix, misses: 1 << 30}
	if _, err := afterPrefix(&b, j, pool, rand.New(rand.NewPCG(1, 3)), prefix, 10, 6); err == nil || !strings.Contains(err.Error(), "no suffix of 6 tokens keeps the prompt at exactly 16 tokens") {
		t.Fatalf("always joined: %v", err)
	}
}

// BenchmarkPrefixRepetitionPrompts builds vLLM's default prefix_repetition
// set: 10 prefixes of 256 tokens × 100 suffixes of 256, each prompt
// re-counted by the pinned tokenizer.
func BenchmarkPrefixRepetitionPrompts(b *testing.B) {
	tok := qwen(b)
	p := PrefixRepetition{NumPrefixes: 10, PrefixLen: 256, SuffixLen: 256, Count: 1000, OutputLen: Length{Fixed: 128}, Seed: 1}
	for b.Loop() {
		if _, err := PrefixRepetitionPrompts(p, tok); err != nil {
			b.Fatal(err)
		}
	}
}
