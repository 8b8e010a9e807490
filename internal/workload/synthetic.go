package workload

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
)

// Length is a distribution of token lengths: Fixed; or uniform over
// [Mean·(1−RangeRatio), Mean·(1+RangeRatio)] (vLLM's --random-range-ratio);
// or normal with Mean and SD, rounded and clamped to at least 1. Exactly one
// form is given: Fixed, or Mean with at most one of RangeRatio and SD (Mean
// alone is fixed at Mean).
type Length struct {
	Fixed      int     `json:"fixed,omitempty"`
	Mean       float64 `json:"mean,omitempty"`
	RangeRatio float64 `json:"range_ratio,omitempty"`
	SD         float64 `json:"sd,omitempty"`
}

// Check says what is wrong with l, or nil. No length it gives may pass
// MaxSourceTokens (a normal one's draws are checked as they are drawn).
func (l Length) Check() error {
	switch {
	case l.Fixed < 0:
		return fmt.Errorf("fixed %d: must be at least 1", l.Fixed)
	case l.Fixed > MaxSourceTokens:
		return fmt.Errorf("fixed %d: must be at most %d", l.Fixed, MaxSourceTokens)
	case l.Fixed > 0 && (l.Mean != 0 || l.RangeRatio != 0 || l.SD != 0):
		return errors.New("give fixed, or mean (with range_ratio or sd); not both")
	case l.Fixed > 0:
		return nil
	case l.Mean == 0:
		return errors.New("give fixed, or mean (with range_ratio or sd)")
	case l.Mean < 1 || math.IsNaN(l.Mean) || math.IsInf(l.Mean, 0):
		return fmt.Errorf("mean %v: must be at least 1", l.Mean)
	case l.RangeRatio != 0 && l.SD != 0:
		return errors.New("give range_ratio or sd, not both")
	case l.RangeRatio < 0 || l.RangeRatio >= 1 || math.IsNaN(l.RangeRatio):
		return fmt.Errorf("range_ratio %v: want 0 ≤ r < 1", l.RangeRatio)
	case l.SD < 0 || math.IsNaN(l.SD) || math.IsInf(l.SD, 0):
		return fmt.Errorf("sd %v: must be 0 or more", l.SD)
	case l.typical() > MaxSourceTokens:
		if l.RangeRatio > 0 {
			return fmt.Errorf("mean %v, range_ratio %v: draws up to %v, more than %d", l.Mean, l.RangeRatio, l.typical(), MaxSourceTokens)
		}
		return fmt.Errorf("mean %v: must be at most %d", l.Mean, MaxSourceTokens)
	case l.SD > MaxSourceTokens:
		return fmt.Errorf("sd %v: must be at most %d", l.SD, MaxSourceTokens)
	}
	return nil
}

// typical is the most l draws, or, normal, its mean.
func (l Length) typical() float64 {
	switch {
	case l.Fixed > 0:
		return float64(l.Fixed)
	case l.RangeRatio > 0:
		return math.Floor(l.Mean * (1 + l.RangeRatio))
	}
	return l.Mean
}

// Draw draws one length from l with rng.
func (l Length) Draw(rng *rand.Rand) int {
	switch {
	case l.Fixed > 0:
		return l.Fixed
	case l.RangeRatio > 0:
		lo := max(1, int(l.Mean*(1-l.RangeRatio)))
		hi := max(lo, int(l.Mean*(1+l.RangeRatio)))
		return lo + rng.IntN(hi-lo+1)
	case l.SD > 0:
		return max(1, int(math.Round(l.Mean+l.SD*rng.NormFloat64())))
	}
	return max(1, int(math.Round(l.Mean)))
}

func (l Length) params() map[string]any {
	m := map[string]any{}
	if l.Fixed > 0 {
		m["fixed"] = l.Fixed
	}
	if l.Mean != 0 {
		m["mean"] = l.Mean
	}
	if l.RangeRatio != 0 {
		m["range_ratio"] = l.RangeRatio
	}
	if l.SD != 0 {
		m["sd"] = l.SD
	}
	return m
}

// Synthetic are the parameters of the synthetic source: Count prompts whose
// message content the pinned tokenizer counts at exactly a drawn input
// length, each asking for a drawn output length as its max_tokens; prompt i
// is drawn from (Seed, i) alone, so any prompt is reproducible by itself.
// With PrefixLen, every prompt starts with one common prefix of exactly
// PrefixLen tokens (vLLM's --random-prefix-len) and its input length is
// PrefixLen plus the drawn one.
type Synthetic struct {
	InputLen  Length
	OutputLen Length
	Count     int
	Seed      int64
	// PrefixLen is the tokens of the prefix common to every prompt; 0 is
	// none.
	PrefixLen int
	// IgnoreEOS asks the server to generate all max_tokens (ignore_eos:
	// true in the request body).
	IgnoreEOS bool
}

// Check says what is wrong with s, one problem per element, each prefixed
// with the field it concerns.
func (s Synthetic) Check() []string {
	var out []string
	if err := s.InputLen.Check(); err != nil {
		out = append(out, "input_len: "+err.Error())
	}
	if err := s.OutputLen.Check(); err != nil {
		out = append(out, "output_len: "+err.Error())
	}
	switch {
	case s.PrefixLen < 0:
		out = append(out, fmt.Sprintf("prefix_len: %d: must be 0 (none) or more", s.PrefixLen))
	case s.PrefixLen > MaxSourceTokens:
		out = append(out, fmt.Sprintf("prefix_len: %d: must be at most %d", s.PrefixLen, MaxSourceTokens))
	}
	if s.Count < 1 {
		out = append(out, fmt.Sprintf("count: %d: must be at least 1", s.Count))
	} else if len(out) == 0 {
		if err := s.checkSize(1); err != nil {
			out = append(out, err.Error())
		}
	}
	return out
}

// checkSize says why s.Count sessions of turns prompts each (1: single
// prompts) are more than a source builds, or nil; s is otherwise valid.
func (s Synthetic) checkSize(turns int) error {
	prompts := int64(s.Count) * int64(turns)
	switch {
	case prompts > MaxSourcePrompts && turns == 1:
		return fmt.Errorf("count: %d: must be at most %d", s.Count, MaxSourcePrompts)
	case prompts > MaxSourcePrompts:
		return fmt.Errorf("count: %d sessions × %d turns = %d prompts: more than %d", s.Count, turns, prompts, MaxSourcePrompts)
	}
	if total := float64(prompts) * (float64(s.PrefixLen) + s.InputLen.typical()); total > MaxSourceTotalTokens {
		return fmt.Errorf("count: %d prompts of up to %v input tokens: %v tokens in all, more than %d", prompts, float64(s.PrefixLen)+s.InputLen.typical(), total, MaxSourceTotalTokens)
	}
	return nil
}

// inputField names a prompt's input tokens.
func (s Synthetic) inputField() string {
	if s.PrefixLen > 0 {
		return "prefix_len + input_len"
	}
	return "input_len"
}

// ErrNoTokenizer refuses synthetic prompts where no tokenizer counts text.
var ErrNoTokenizer = errors.New("synthetic prompts need the pinned tokenizer to count their lengths (tokenizer variant \"usage\" counts none)")

func resolveSynthetic(spec Spec, env Env) (Set, error) {
	s := spec.Synthetic
	if s == nil {
		return Set{}, errors.New("synthetic: no parameters")
	}
	if probs := s.Check(); len(probs) > 0 {
		return Set{}, fmt.Errorf("synthetic: %s", strings.Join(probs, "; "))
	}
	if env.Tokenizer == nil {
		return Set{}, ErrNoTokenizer
	}
	params := map[string]any{
		"input_len": s.InputLen.params(), "output_len": s.OutputLen.params(),
		"count": s.Count, "seed": s.Seed, "ignore_eos": s.IgnoreEOS,
	}
	if s.PrefixLen > 0 {
		params["prefix_len"] = s.PrefixLen
	}
	if ss := spec.Sessions; ss != nil {
		if ss.Turns < 1 {
			return Set{}, fmt.Errorf("synthetic sessions: turns %d: must be at least 1", ss.Turns)
		}
		if s.PrefixLen > 0 {
			return Set{}, fmt.Errorf("synthetic sessions: prefix_len %d: a session's history is its shared prefix; prefix_len applies to single-turn prompts only", s.PrefixLen)
		}
		if err := s.checkSize(ss.Turns); err != nil {
			return Set{}, fmt.Errorf("synthetic sessions: %v", err)
		}
		sessions, err := SyntheticSessions(*s, ss.Turns, env)
		if err != nil {
			return Set{}, err
		}
		set := Set{Record: SourceRecord{Params: sessionParams(params, spec)}, IgnoreEOS: s.IgnoreEOS}
		for _, turns := range sessions {
			set.addSession(turns)
		}
		return set, nil
	}
	ps, err := SyntheticPrompts(*s, env)
	if err != nil {
		return Set{}, err
	}
	return Set{Prompts: ps, Record: SourceRecord{Params: params}, IgnoreEOS: s.IgnoreEOS}, nil
}

// SyntheticPrompts builds s.Count prompts, prompt i from a generator seeded
// with (s.Seed, i): its input length n drawn from s.InputLen, then n words
// of the tokenizer's one-token word pool (words w where both "w" and " w"
// are one token), joined by spaces, re-encoded and adjusted until the
// tokenizer counts exactly n. Its max_tokens is drawn from s.OutputLen.
// With s.PrefixLen, the common prefix is drawn the same way from a
// generator seeded with (s.Seed, 2^62), and each prompt is the prefix, a
// space and its own n words, counted at exactly s.PrefixLen+n. A prompt
// of more input tokens than env bounds (its max_model_len, else
// MaxSourceTokens) is refused before it is built.
func SyntheticPrompts(s Synthetic, env Env) ([]Prompt, error) {
	enc := env.Tokenizer
	pool, err := wordPool(enc)
	if err != nil {
		return nil, err
	}
	out := make([]Prompt, s.Count)
	var b strings.Builder
	var prefix string
	if s.PrefixLen > 0 {
		if prefix, err = exactText(&b, enc, pool, rand.New(rand.NewPCG(uint64(s.Seed), streamPrefix)), s.PrefixLen); err != nil {
			return nil, fmt.Errorf("synthetic prefix: %w", err)
		}
	}
	for i := range out {
		rng := rand.New(rand.NewPCG(uint64(s.Seed), uint64(i)))
		n := s.InputLen.Draw(rng)
		if err := env.tokenBound().check(s.inputField(), s.PrefixLen+n); err != nil {
			return nil, fmt.Errorf("synthetic prompt %d: %w", i, err)
		}
		var text string
		var err error
		if s.PrefixLen > 0 {
			text, err = afterPrefix(&b, enc, pool, rng, prefix, s.PrefixLen, n)
		} else {
			text, err = exactText(&b, enc, pool, rng, n)
		}
		if err != nil {
			return nil, fmt.Errorf("synthetic prompt %d: %w", i, err)
		}
		out[i] = Prompt{Text: text, MaxTokens: s.OutputLen.Draw(rng)}
	}
	return out, nil
}

// exactText returns a text of n words from pool that enc counts at exactly
// n tokens. Words of the pool are pre-tokenized apart (a space then
// letters), so the first count is already exact; the loop below is the
// check, and mends a count that is off by adding or dropping words.
func exactText(b *strings.Builder, enc Encoder, pool []string, rng *rand.Rand, n int) (string, error) {
	words := make([]string, 0, n)
	for range n {
		words = append(words, pool[rng.IntN(len(pool))])
	}
	for range 64 {
		b.Reset()
		for j, w := range words {
			if j > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(w)
		}
		text := b.String()
		got := enc.Count(text)
		switch {
		case got == n:
			return text, nil
		case got < n:
			words = append(words, pool[rng.IntN(len(pool))])
		case len(words) > 1:
			words = words[:len(words)-1]
		default:
			return "", fmt.Errorf("one word counts %d tokens, want %d", got, n)
		}
	}
	return "", fmt.Errorf("no text of exactly %d tokens found", n)
}

var pools sync.Map // Encoder → []string

// wordPool is the tokenizer's one-token words: lowercase ASCII words of 3
// to 10 letters whose bytes, with and without a leading space, are each one
// token; in token-id order.
func wordPool(enc Encoder) ([]string, error) {
	if p, ok := pools.Load(enc); ok {
		return p.([]string), nil
	}
	var pool []string
	for id := range enc.VocabSize() {
		b, ok := enc.TokenBytes(id)
		if !ok || len(b) < 4 || len(b) > 11 || b[0] != ' ' || !lowerASCII(b[1:]) {
			continue
		}
		w := string(b[1:])
		if enc.Count(w) == 1 && enc.Count(" "+w) == 1 {
			pool = append(pool, w)
		}
	}
	if len(pool) < 16 {
		return nil, fmt.Errorf("the tokenizer has %d one-token words: too few to build synthetic prompts", len(pool))
	}
	pools.Store(enc, pool)
	return pool, nil
}

func lowerASCII(b []byte) bool {
	for _, c := range b {
		if c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}
