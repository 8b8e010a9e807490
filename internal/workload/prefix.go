package workload

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
)

// SourcePrefixRepetition is vLLM's prefix_repetition dataset, made exact:
// NumPrefixes random prefixes of exactly PrefixLen tokens, each followed by
// Count/NumPrefixes random suffixes of exactly SuffixLen tokens, shuffled,
// so that a server's prefix cache can be rehearsed.
const SourcePrefixRepetition = "prefix_repetition"

// PrefixRepetition are the parameters of the prefix_repetition source:
// Count prompts, Count/NumPrefixes per prefix, each the text of one of
// NumPrefixes prefixes of exactly PrefixLen tokens, a space, and its own
// suffix of exactly SuffixLen tokens, so the pinned tokenizer counts every
// prompt at exactly PrefixLen+SuffixLen; each asks for a drawn OutputLen
// as its max_tokens. The order is shuffled with Seed.
type PrefixRepetition struct {
	NumPrefixes int
	PrefixLen   int
	SuffixLen   int
	// Count is the number of prompts, a multiple of NumPrefixes (vLLM's
	// --num-prompts).
	Count     int
	OutputLen Length
	Seed      int64
	// IgnoreEOS asks the server to generate all max_tokens.
	IgnoreEOS bool
}

// Check says what is wrong with p, one problem per element, each prefixed
// with the field it concerns.
func (p PrefixRepetition) Check() []string {
	var out []string
	positive := func(field string, v int) bool {
		switch {
		case v < 1:
			out = append(out, fmt.Sprintf("%s: %d: must be at least 1", field, v))
		case v > MaxSourceTokens:
			out = append(out, fmt.Sprintf("%s: %d: must be at most %d", field, v, MaxSourceTokens))
		default:
			return true
		}
		return false
	}
	okP := positive("num_prefixes", p.NumPrefixes)
	okL := positive("prefix_len", p.PrefixLen)
	okS := positive("suffix_len", p.SuffixLen)
	okC := true
	switch {
	case p.Count < 1:
		out = append(out, fmt.Sprintf("count: %d: must be at least 1", p.Count))
		okC = false
	case p.Count > MaxSourcePrompts:
		out = append(out, fmt.Sprintf("count: %d: must be at most %d", p.Count, MaxSourcePrompts))
		okC = false
	case okP && p.Count%p.NumPrefixes != 0:
		out = append(out, fmt.Sprintf("count: %d is not a multiple of num_prefixes %d (each prefix takes count/num_prefixes suffixes)", p.Count, p.NumPrefixes))
		okC = false
	}
	if okP && okL && okS && okC {
		// Each bounded by 2^20: no overflow in int64.
		total := int64(p.NumPrefixes)*int64(p.PrefixLen) + int64(p.Count)*int64(p.PrefixLen+p.SuffixLen)
		if total > MaxSourceTotalTokens {
			out = append(out, fmt.Sprintf("count: %d prompts of %d tokens: %d tokens in all, more than %d", p.Count, p.PrefixLen+p.SuffixLen, total, MaxSourceTotalTokens))
		}
	}
	if err := p.OutputLen.Check(); err != nil {
		out = append(out, "output_len: "+err.Error())
	}
	return out
}

// Params are p as SourceRecord.Params records them.
func (p PrefixRepetition) Params() map[string]any {
	m := map[string]any{
		"num_prefixes": p.NumPrefixes, "prefix_len": p.PrefixLen, "suffix_len": p.SuffixLen,
		"count": p.Count, "seed": p.Seed, "output_len": p.OutputLen.params(), "ignore_eos": p.IgnoreEOS,
	}
	if p.NumPrefixes > 0 {
		m["suffixes_per_prefix"] = p.Count / p.NumPrefixes
	}
	return m
}

func resolvePrefixRepetition(spec Spec, env Env) (Set, error) {
	p := spec.Prefix
	if p == nil {
		return Set{}, errors.New("prefix_repetition: no parameters")
	}
	if probs := p.Check(); len(probs) > 0 {
		return Set{}, fmt.Errorf("prefix_repetition: %s", strings.Join(probs, "; "))
	}
	if env.Tokenizer == nil {
		return Set{}, ErrNoTokenizer
	}
	if err := env.tokenBound().check("prefix_len + suffix_len", p.PrefixLen+p.SuffixLen); err != nil {
		return Set{}, fmt.Errorf("prefix_repetition: %v", err)
	}
	ps, err := PrefixRepetitionPrompts(*p, env.Tokenizer)
	if err != nil {
		return Set{}, err
	}
	return Set{Prompts: ps, Record: SourceRecord{Params: p.Params()}, IgnoreEOS: p.IgnoreEOS}, nil
}

// Streams of the seeded generators, apart from the per-prompt streams
// (which are below MaxSourcePrompts).
const (
	streamPrefix  = 1 << 62 // + prefix index
	streamShuffle = 1 << 63
)

// PrefixRepetitionPrompts builds p's prompts: prefix j of exactly
// p.PrefixLen tokens from a generator seeded with (p.Seed, 2^62+j); the
// suffix k of prefix j, of exactly p.SuffixLen tokens, and its max_tokens
// from one seeded with (p.Seed, j·S+k); then the list shuffled with a
// generator seeded with (p.Seed, 2^63).
func PrefixRepetitionPrompts(p PrefixRepetition, enc Encoder) ([]Prompt, error) {
	pool, err := wordPool(enc)
	if err != nil {
		return nil, err
	}
	perPrefix := p.Count / p.NumPrefixes
	out := make([]Prompt, 0, p.Count)
	var b strings.Builder
	for j := range p.NumPrefixes {
		prefix, err := exactText(&b, enc, pool, rand.New(rand.NewPCG(uint64(p.Seed), streamPrefix+uint64(j))), p.PrefixLen)
		if err != nil {
			return nil, fmt.Errorf("prefix_repetition: prefix %d: %w", j, err)
		}
		for k := range perPrefix {
			rng := rand.New(rand.NewPCG(uint64(p.Seed), uint64(j*perPrefix+k)))
			text, err := afterPrefix(&b, enc, pool, rng, prefix, p.PrefixLen, p.SuffixLen)
			if err != nil {
				return nil, fmt.Errorf("prefix_repetition: prefix %d, suffix %d: %w", j, k, err)
			}
			out = append(out, Prompt{Text: text, MaxTokens: p.OutputLen.Draw(rng)})
		}
	}
	shuffle := rand.New(rand.NewPCG(uint64(p.Seed), streamShuffle))
	shuffle.Shuffle(len(out), func(a, b int) { out[a], out[b] = out[b], out[a] })
	return out, nil
}

// afterPrefix returns prefix (which enc counts at prefixLen tokens), a
// space, and a text of n pool words that enc counts, joined, at exactly
// prefixLen+n tokens. Pool words are pre-tokenized apart, so the first
// draw is exact; the check mends a tokenizer that joins across the space
// by drawing the suffix again.
func afterPrefix(b *strings.Builder, enc Encoder, pool []string, rng *rand.Rand, prefix string, prefixLen, n int) (string, error) {
	for range 16 {
		suffix, err := exactText(b, enc, pool, rng, n)
		if err != nil {
			return "", err
		}
		text := prefix + " " + suffix
		if enc.Count(text) == prefixLen+n {
			return text, nil
		}
	}
	return "", fmt.Errorf("no suffix of %d tokens keeps the prompt at exactly %d tokens", n, prefixLen+n)
}
