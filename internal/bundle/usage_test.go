package bundle_test

import (
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
)

// TestVerifyRecomputesUsageDisagreement: the aggregate's count of records
// whose re-count differs from the server's usage (SPEC §2) is recomputed
// by verify; a bundle that stores a wrong count, or hides a disagreement,
// is refused, naming the field; a bundle written before the field (none
// stored) still verifies.
func TestVerifyRecomputesUsageDisagreement(t *testing.T) {
	// Records where re-count and usage differ, their aggregates as
	// rehearse writes them: the bundle verifies, and says so.
	differ := func(t *testing.T, r *bundle.Results) int {
		i := firstRecord(t, r, isOK)
		u := r.Records[i].OutputTokens + 3
		r.Records[i].UsageCompletionTokens = &u
		r.Recompute()
		return firstAggregate(t, r, func(a contract.Aggregate) bool {
			return a.UsageDisagreement != nil && a.UsageDisagreement.Count > 0
		})
	}
	dir := writeRow(t, func(t *testing.T, r *bundle.Results) {
		a := r.Aggregates[differ(t, r)]
		if got := *a.UsageDisagreement; got.Count != 1 || got.LargestDiff != -3 || got.Compared == 0 {
			t.Errorf("usage_disagreement = %+v, want 1 record differing by -3", got)
		}
	}, nil, true)
	if probs := verifyAll(t, dir); len(probs) != 0 {
		t.Fatalf("a bundle with a disagreement, stored as it is, must verify: %q", probs)
	}

	for _, c := range []struct {
		name string
		edit func(t *testing.T, r *bundle.Results)
		want string
	}{
		{"a disagreement hidden", func(t *testing.T, r *bundle.Results) {
			a := r.Aggregates[differ(t, r)].UsageDisagreement
			a.Count, a.LargestDiff = 0, 0
		}, "usage_disagreement.count: stored 0, recomputed 1"},
		{"a count too large", func(t *testing.T, r *bundle.Results) {
			r.Aggregates[0].UsageDisagreement.Count = 5
		}, "usage_disagreement.count: stored 5, recomputed 0"},
		{"a largest difference that is not the records'", func(t *testing.T, r *bundle.Results) {
			r.Aggregates[differ(t, r)].UsageDisagreement.LargestDiff = 3
		}, "usage_disagreement.largest_diff: stored 3, recomputed -3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			probs := verifyAll(t, writeRow(t, c.edit, nil, true))
			if !strings.Contains(strings.Join(probs, "\n"), c.want) {
				t.Errorf("no problem contains %q; got %q", c.want, probs)
			}
		})
	}

	t.Run("a bundle written before the field", func(t *testing.T) {
		dir := writeRow(t, func(t *testing.T, r *bundle.Results) {
			differ(t, r)
			for i := range r.Aggregates {
				r.Aggregates[i].UsageDisagreement = nil
			}
		}, nil, true)
		if probs := verifyAll(t, dir); len(probs) != 0 {
			t.Errorf("an aggregate without usage_disagreement must verify: %q", probs)
		}
	})
}
