package report

import (
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/bundle/bundletest"
)

// TestUsageDisagreementIsWarned: records whose re-count differs from the
// server's usage are named in the report, per server with the count and
// the largest difference, in the Environment section and among the
// warnings, and UsageWarnings (the terminal's lines) says the same; a
// server whose re-counts all agree gets no warning.
func TestUsageDisagreementIsWarned(t *testing.T) {
	res := bundletest.SeedLike()
	differ := 0
	for i := range res.Records {
		r := &res.Records[i]
		if r.Server != "batching" || r.UsageCompletionTokens == nil || differ == 3 {
			continue
		}
		u := r.OutputTokens + 2 + differ*3 // 2, 5 and 8 more by usage
		r.UsageCompletionTokens = &u
		differ++
	}
	res.Recompute()

	warnings := UsageWarnings(res)
	want := "batching: 3 of 123 records' re-counted output tokens differ from the server's usage.completion_tokens (largest difference -8 tokens, re-count minus usage)"
	if len(warnings) != 1 || !strings.HasPrefix(warnings[0], want) {
		t.Fatalf("UsageWarnings = %q, want one line beginning %q", warnings, want)
	}
	md := string(Markdown(res, nil, nil))
	for _, want := range []string{
		"- Re-counts against each server's `usage.completion_tokens`, record by record: `naive` equal on all 56 records that carry usage; `batching` different on 3 of 123 (largest difference -8 tokens; see the warnings).",
		"- `batching`: 3 of 123 records' re-counted output tokens differ from the server's usage.completion_tokens (largest difference -8 tokens, re-count minus usage): a tokenizer that is not the model's",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("README.md lacks %q", want)
		}
	}
	if strings.Contains(md, "`naive`: ") {
		t.Errorf("naive's re-counts all agree, yet it is warned about")
	}

	// Output tokens taken from the servers' usage: nothing was re-counted,
	// so there is nothing to hold against it.
	res.Provenance.OutputTokensSource = bundle.SourceUsage
	if w := UsageWarnings(res); len(w) != 0 {
		t.Errorf("usage as the source, yet warnings %q", w)
	}
	if md := string(Markdown(res, nil, nil)); strings.Contains(md, "Re-counts against") {
		t.Errorf("usage as the source, yet the report compares re-counts")
	}
}
