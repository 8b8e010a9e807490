package sim

import (
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/tokenizer"
)

// TestOutputTextCountsExactly: any run of output pieces re-tokenizes with
// the pinned tokenizer to exactly one token per piece.
func TestOutputTextCountsExactly(t *testing.T) {
	c, err := tokenizer.Default()
	if err != nil {
		t.Fatal(err)
	}
	if err := checkOutputWords(c); err != nil {
		t.Fatal(err)
	}
	for seed := range int64(50) {
		src := newTextSource(seed, "prompt "+string(rune('a'+seed)))
		for _, n := range []int{1, 2, 7, 128, 1000} {
			if got := c.Count(src.text(n)); got != n {
				t.Fatalf("seed %d: %d pieces re-tokenize to %d tokens", seed, n, got)
			}
		}
	}
	// Every ordered pair, so no two neighbours merge.
	for _, a := range outputWords {
		for _, b := range outputWords {
			if got := c.Count(" " + a + " " + b); got != 2 {
				t.Fatalf("%q + %q re-tokenize to %d tokens", " "+a, " "+b, got)
			}
		}
	}
}

func TestCheckOutputWordsRejectsAForeignTokenizer(t *testing.T) {
	err := checkOutputWords(charCounter{})
	if err == nil || !strings.Contains(err.Error(), "tokens with this tokenizer, want 1") {
		t.Errorf("err %v; want a word-piece mismatch", err)
	}
}

// charCounter counts bytes: a tokenizer under which no word is one token.
type charCounter struct{}

func (charCounter) Count(s string) int { return len(s) }
