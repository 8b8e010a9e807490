package report

import (
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle/bundletest"
)

// The reasoning section appears only for a bundle whose records carry
// reasoning, and then shows TTFT any beside the content TTFT.
func TestMarkdownReasoningOnlyWhenThere(t *testing.T) {
	res := bundletest.SeedLike()
	if md := string(Markdown(res, nil, nil)); strings.Contains(md, "Reasoning") || strings.Contains(md, "TTFT any") {
		t.Fatal("a bundle without reasoning shows a reasoning section")
	}
	for i := range res.Records {
		r := &res.Records[i]
		if r.FirstContentS == nil {
			continue
		}
		ft := r.StartS + (*r.FirstContentS-r.StartS)/2
		n := 3
		r.FirstTokenS, r.ReasoningText, r.ReasoningTokens = &ft, " a b c", &n
	}
	res.Recompute()
	md := string(Markdown(res, nil, nil))
	if !strings.Contains(md, "## Reasoning and first tokens") || !strings.Contains(md, "TTFT any p50 / p95 (first token)") {
		t.Fatalf("no reasoning section:\n%s", md)
	}
	if sec := ReasoningTable(res); len(sec.Rows) != len(res.Aggregates) || sec.Rows[0][4] == dash {
		t.Fatalf("rows %v", sec.Rows)
	}
}
