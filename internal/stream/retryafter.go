package stream

import (
	"math"
	"net/http"
	"strconv"
	"time"
)

// rateLimited reports whether a response of status may carry a Retry-After
// the record keeps: 429 Too Many Requests and 503 Service Unavailable.
func rateLimited(status int) bool {
	return status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable
}

// retryAfter reads a Retry-After value (RFC 9110 §10.2.3) as seconds:
// delay-seconds, or an HTTP-date taken relative to the response's Date
// header when that parses, else to now. A date in the past is 0; nil for
// a value that is neither form (or none).
func retryAfter(value, date string, now time.Time) *float64 {
	if value == "" {
		return nil
	}
	if digits(value) {
		s, err := strconv.ParseFloat(value, 64)
		if err != nil || math.IsInf(s, 0) {
			return nil
		}
		return &s
	}
	at, err := http.ParseTime(value)
	if err != nil {
		return nil
	}
	if d, err := http.ParseTime(date); err == nil {
		now = d
	}
	s := max(at.Sub(now).Seconds(), 0)
	return &s
}

// digits reports whether s is one or more ASCII digits.
func digits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// noteRetryAfter keeps a 429 or 503 response's Retry-After (value, with
// the response's Date header date) in res.
func (res *Result) noteRetryAfter(status int, value, date string) {
	if rateLimited(status) {
		res.RetryAfterS = retryAfter(value, date, time.Now())
	}
}
