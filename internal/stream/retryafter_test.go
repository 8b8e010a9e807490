package stream

import (
	"net/http"
	"testing"
	"time"
)

// Retry-After in either form, as seconds (issue 28, row 11).
func TestRetryAfterForms(t *testing.T) {
	now := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	date := now.Add(-time.Hour).Format(http.TimeFormat) // the server's clock, an hour behind
	for _, tc := range []struct {
		value, date string
		want        float64 // -1: absent
	}{
		{"", "", -1},
		{"0", "", 0},
		{"120", "", 120},
		{"Mon, 07 Dec 2026 10:02:00 GMT", "", 120},          // IMF-fixdate, to the local clock
		{"Mon, 07 Dec 2026 09:00:30 GMT", date, 30},         // to the response's Date
		{"Monday, 07-Dec-26 10:00:05 GMT", "", 5},           // RFC 850
		{"Mon Dec  7 10:00:07 2026", "", 7},                 // asctime
		{"Mon, 07 Dec 2026 09:59:00 GMT", "", 0},            // past: 0
		{"Mon, 07 Dec 2026 10:00:10 GMT", "not a date", 10}, // a bad Date: the local clock
		{"-5", "", -1}, {"1.5", "", -1}, {"soon", "", -1}, {"1e3", "", -1}, // neither form
		{"99999999999999999999", "", 1e20},
	} {
		got := retryAfter(tc.value, tc.date, now)
		switch {
		case tc.want < 0 && got != nil:
			t.Errorf("%q (Date %q): %v, want absent", tc.value, tc.date, *got)
		case tc.want >= 0 && (got == nil || *got != tc.want):
			t.Errorf("%q (Date %q): %v, want %v", tc.value, tc.date, got, tc.want)
		}
	}
}
