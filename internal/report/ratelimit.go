package report

import (
	"fmt"
	"math"
	"net/http"
	"strings"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
)

// rateLimit is a load's rate-limited requests, counted from its recorded
// records: answered 429, or 503 with a Retry-After (the server asking the
// client to come back later, not failing at the work), and the longest
// Retry-After among them (nil when none carried one).
type rateLimit struct {
	n         int
	maxWaitS  *float64
	statusBy  map[int]int
	withRetry int
}

// isRateLimited reports whether a record is a rate-limited request.
func isRateLimited(r *contract.Record) bool {
	return r.ErrorKind == contract.ErrHTTPStatus && (r.HTTPStatus == http.StatusTooManyRequests ||
		r.HTTPStatus == http.StatusServiceUnavailable && r.RetryAfterS != nil)
}

// rateLimits counts each load's rate-limited requests.
func rateLimits(res *bundle.Results) map[contract.Key]*rateLimit {
	waves := map[int]contract.Wave{}
	for _, w := range res.Waves {
		waves[w.ID] = w
	}
	out := map[contract.Key]*rateLimit{}
	for i := range res.Records {
		r := &res.Records[i]
		w, ok := waves[r.Wave]
		if !ok || r.Kind != contract.KindRecorded || !isRateLimited(r) {
			continue
		}
		k := contract.KeyOf(w)
		rl := out[k]
		if rl == nil {
			rl = &rateLimit{statusBy: map[int]int{}}
			out[k] = rl
		}
		rl.n++
		rl.statusBy[r.HTTPStatus]++
		if v := r.RetryAfterS; v != nil {
			rl.withRetry++
			if rl.maxWaitS == nil || *v > *rl.maxWaitS {
				rl.maxWaitS = new(*v)
			}
		}
	}
	return out
}

// failureKinds is a load's failures by kind ("3 http_status, 1 timeout"),
// its rate-limited requests counted apart from the other HTTP errors:
// "2 rate-limited (2 HTTP 429; Retry-After up to 1 s), 1 other http_status, 1 timeout".
func failureKinds(kinds map[string]int, rl *rateLimit) string {
	if rl == nil || rl.n == 0 {
		return byKind(kinds)
	}
	rest := map[string]int{}
	for k, n := range kinds {
		rest[k] = n
	}
	if other := rest[contract.ErrHTTPStatus] - rl.n; other > 0 {
		rest["other "+contract.ErrHTTPStatus] = other
	}
	delete(rest, contract.ErrHTTPStatus)
	var status []string
	for _, code := range []int{http.StatusTooManyRequests, http.StatusServiceUnavailable} {
		if n := rl.statusBy[code]; n > 0 {
			status = append(status, fmt.Sprintf("%d HTTP %d", n, code))
		}
	}
	s := fmt.Sprintf("%d rate-limited (%s", rl.n, strings.Join(status, ", "))
	switch {
	case rl.maxWaitS == nil:
		s += "; no Retry-After)"
	case rl.withRetry < rl.n:
		s += fmt.Sprintf("; Retry-After on %d, up to %s)", rl.withRetry, waitLabel(*rl.maxWaitS))
	default:
		s += fmt.Sprintf("; Retry-After up to %s)", waitLabel(*rl.maxWaitS))
	}
	if len(rest) > 0 {
		s += ", " + byKind(rest)
	}
	return s
}

// waitLabel is a Retry-After in seconds, as the report prints it.
func waitLabel(s float64) string {
	if s == math.Trunc(s) {
		return fmt.Sprintf("%.0f s", s)
	}
	return fmt.Sprintf("%.1f s", s)
}
