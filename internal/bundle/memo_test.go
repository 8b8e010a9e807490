package bundle

import (
	"strings"
	"sync/atomic"
	"testing"
)

// wordCounter counts words and how often it was asked.
type wordCounter struct{ calls atomic.Int64 }

func (w *wordCounter) Count(s string) int {
	w.calls.Add(1)
	return len(strings.Fields(s))
}

// TestMemoCountsEachTextOnce checks that the memo's counts are the
// counter's and that a repeated text is counted once, up to memoMax
// distinct texts and not beyond.
func TestMemoCountsEachTextOnce(t *testing.T) {
	wc := &wordCounter{}
	m := newMemo(wc)
	texts := []string{"a b c", "", "one", "a b c", "one", "two words", "a b c"}
	for _, s := range texts {
		if got, want := m.Count(s), len(strings.Fields(s)); got != want {
			t.Fatalf("Count(%q) = %d, want %d", s, got, want)
		}
	}
	if n := wc.calls.Load(); n != 4 {
		t.Fatalf("%d counts of 4 distinct texts", n)
	}
	for i := range memoMax + 10 {
		m.Count(strings.Repeat("x ", i%50) + string(rune('a'+i%26)) + strings.Repeat("y", i/26))
	}
	if len(m.m) > memoMax {
		t.Fatalf("memo holds %d texts, more than %d", len(m.m), memoMax)
	}
}
