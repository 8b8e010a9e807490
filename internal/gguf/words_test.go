package gguf

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/tokenizer"
)

// TestWordTokensRetokenizeExactly: any sequence of the word tokens,
// concatenated as an engine streams them, encodes back to the same ids.
func TestWordTokensRetokenizeExactly(t *testing.T) {
	tok, err := tokenizer.Default()
	if err != nil {
		t.Fatal(err)
	}
	words, count := WordTokens(tok, tok.VocabSize())
	if count < 30000 {
		t.Fatalf("%d word tokens in the Qwen vocabulary; expected over 30,000", count)
	}
	var ids []int
	for id, ok := range words {
		if ok {
			ids = append(ids, id)
		}
	}
	// Every word once, in a shuffled order, then many short random texts
	// (repeats included).
	r := rand.New(rand.NewPCG(1, 2))
	r.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	check := func(seq []int) {
		t.Helper()
		var b strings.Builder
		for _, id := range seq {
			piece, _ := tok.TokenBytes(id)
			b.Write(piece)
		}
		got := tok.Encode(b.String())
		if len(got) != len(seq) {
			t.Fatalf("%d tokens re-tokenized to %d", len(seq), len(got))
		}
		for i := range got {
			if got[i] != seq[i] {
				t.Fatalf("token %d: %d re-tokenized as %d", i, seq[i], got[i])
			}
		}
	}
	check(ids)
	for range 2000 {
		seq := make([]int, 1+r.IntN(64))
		for i := range seq {
			seq[i] = ids[r.IntN(len(ids))]
		}
		check(seq)
	}
}

func TestWordTokensExcludeWhatIsNotAWord(t *testing.T) {
	tok, err := tokenizer.Default()
	if err != nil {
		t.Fatal(err)
	}
	words, _ := WordTokens(tok, tok.VocabSize()+10)
	for _, text := range []string{"<|im_end|>", "<|endoftext|>", "hello", " 2024", " don", "'t", ".", "\n", " héllo"} {
		for _, id := range tok.Encode(text) {
			b, _ := tok.TokenBytes(id)
			if words[id] && !isWord(b) {
				t.Errorf("%q (id %d) counted as a word", b, id)
			}
		}
	}
	if id := tok.Encode(" hello"); len(id) != 1 || !words[id[0]] {
		t.Errorf("\" hello\" (%v) is not a word token", id)
	}
	for id := tok.VocabSize(); id < len(words); id++ {
		if words[id] {
			t.Errorf("padding id %d counted as a word", id)
		}
	}
}
