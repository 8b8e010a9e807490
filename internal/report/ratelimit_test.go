package report

import (
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle/bundletest"
	"github.com/rehearse/rehearse/internal/contract"
)

// The report counts rate-limited requests (429, or 503 with Retry-After)
// apart from the other HTTP errors, from the records (issue 28, row 11).
func TestMarkdownCountsRateLimitedApart(t *testing.T) {
	res := bundletest.SeedLike()
	edits := []struct {
		status int
		wait   *float64
	}{{429, new(1.0)}, {429, new(2.5)}, {503, new(4.0)}, {503, nil}, {500, nil}}
	for i := range res.Records {
		r := &res.Records[i]
		if len(edits) == 0 {
			break
		}
		if r.Kind != contract.KindRecorded || r.ErrorKind != contract.ErrTimeout {
			continue
		}
		r.ErrorKind, r.HTTPStatus, r.RetryAfterS = contract.ErrHTTPStatus, edits[0].status, edits[0].wait
		edits = edits[1:]
	}
	if len(edits) > 0 {
		t.Fatalf("the seed-like bundle has too few timeouts to edit")
	}
	res.Recompute()
	md := string(Markdown(res, nil, nil))
	want := "- `naive` at 32 clients: 3 rate-limited (2 HTTP 429, 1 HTTP 503; Retry-After up to 4 s), 2 other http_status, 62 timeout.\n"
	if !strings.Contains(md, want) {
		t.Errorf("report lacks %q; its failures:\n%s", want, failuresSection(md))
	}
	if !strings.Contains(md, "Rate-limited requests (`http_status` 429, or 503 with a `Retry-After`)") {
		t.Errorf("report does not say what rate-limited means")
	}
}

// A load without rate-limited requests reads as before.
func TestFailureKindsWithoutRateLimits(t *testing.T) {
	if got := failureKinds(map[string]int{"http_status": 2, "timeout": 1}, nil); got != "2 http_status, 1 timeout" {
		t.Errorf("%q", got)
	}
	got := failureKinds(map[string]int{"http_status": 2}, &rateLimit{n: 2, statusBy: map[int]int{429: 2}})
	if got != "2 rate-limited (2 HTTP 429; no Retry-After)" {
		t.Errorf("%q", got)
	}
}

func failuresSection(md string) string {
	_, after, _ := strings.Cut(md, "Failures by kind:")
	head, _, _ := strings.Cut(after, "##")
	return head
}
