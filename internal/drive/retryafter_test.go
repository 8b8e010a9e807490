package drive

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/rehearse/rehearse/internal/contract"
)

// A 429's Retry-After is recorded as retry_after_s beside http_status
// (issue 28, row 11).
func TestRateLimitedRecordKeepsRetryAfter(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		rw.Header().Set("Retry-After", "7")
		http.Error(rw, `{"error":{"message":"slow down"}}`, http.StatusTooManyRequests)
	}))
	t.Cleanup(srv.Close)
	res, err := New(Options{}).ClosedWave(context.Background(), Target{Name: "s", BaseURL: srv.URL},
		WaveSpec{Load: testLoad(), Kind: contract.KindRecorded, Concurrency: 2, Repeat: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Records {
		if r.HTTPStatus != 429 || r.RetryAfterS == nil || *r.RetryAfterS != 7 {
			t.Fatalf("http_status %d retry_after_s %v, want 429 and 7", r.HTTPStatus, r.RetryAfterS)
		}
	}
}
