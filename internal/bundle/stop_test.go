package bundle_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/bundle/bundletest"
)

// cancelingCounter counts words (wordCounter) and cancels at its at-th
// count, counting the counts.
type cancelingCounter struct {
	at     int64
	calls  atomic.Int64
	cancel context.CancelFunc
}

func (c *cancelingCounter) Count(text string) int {
	if c.calls.Add(1) == c.at {
		c.cancel()
	}
	return wordCounter{}.Count(text)
}

// TestVerifyStopsItsRecount: canceled during the re-count of
// output_tokens, verify returns the interruption before it has counted
// every record, on the streaming path (counts on the decoding cores) and
// on the held one (a session bundle: recountTokens).
func TestVerifyStopsItsRecount(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*testing.T, *bundle.Results)
	}{
		{"streamed", uniqueTexts},
		{"held", func(t *testing.T, r *bundle.Results) { uniqueTexts(t, r); asSession(t, r) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := bundletest.SeedLike()
			dir := writeRow(t, tc.edit, nil, false)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			c := &cancelingCounter{at: 20, cancel: cancel}
			_, err := bundle.VerifyWith(ctx, dir, bundle.Options{Tokenizer: func(bundle.Provenance) (bundle.Counter, error) { return c, nil }})
			if !bundle.IsInterrupted(ctx, err) {
				t.Errorf("canceled at the 20th count: %v, want the interruption", err)
			}
			if got, all := c.calls.Load(), int64(len(res.Records)); got >= all/2 {
				t.Errorf("%d texts counted of %d records after a cancellation at the 20th", got, all)
			}
		})
	}
}

// uniqueTexts gives every record with text a word of its own, so that no
// count is remembered from another record's.
func uniqueTexts(_ *testing.T, r *bundle.Results) {
	for i := range r.Records {
		if rec := &r.Records[i]; rec.Text != "" {
			rec.Text += fmt.Sprintf(" w%d", i)
			rec.OutputTokens++
		}
	}
}
