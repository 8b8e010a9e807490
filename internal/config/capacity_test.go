package config

import (
	"strings"
	"testing"
)

// TestCapacityKeys: capacity: takes its defaults, and every bad value is
// reported with its path.
func TestCapacityKeys(t *testing.T) {
	const head = "servers: [{name: a, base_url: \"http://127.0.0.1:1\", model: m}]\n"
	r, err := Parse([]byte(head+"slo: {ttft: 1s}\ncapacity: {}\n"), "c.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := r.Capacity
	if c.Start != 1 || c.MaxConcurrency != DefaultCapacityMax || c.MinRequests != DefaultCapacityMinRequests ||
		c.MaxRequests != 8*DefaultCapacityMinRequests || *c.WarmupRequests != -1 || *c.Repeats != 1 || len(r.Workload.Concurrencies) != 0 {
		t.Errorf("defaults: %+v, concurrencies %v", c, r.Workload.Concurrencies)
	}
	if s := c.Spec("a"); s.Warmup(7) != 14 || s.Predicted != nil {
		t.Errorf("spec %+v", s)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"capacity: {}\n", "capacity: needs slo:"},
		{"slo: {ttft: 1s}\ncapacity: {start: -1}\n", "capacity.start: -1: must be at least 1"},
		{"slo: {ttft: 1s}\ncapacity: {start: 8, max_concurrency: 4}\n", "capacity.max_concurrency: 4 is below the start 8"},
		{"slo: {ttft: 1s}\ncapacity: {min_requests: 50, max_requests: 10}\n", "capacity.max_requests: 10 is below min_requests 50"},
		{"slo: {ttft: 1s}\ncapacity: {warmup_requests: -2}\n", "capacity.warmup_requests: -2"},
		{"slo: {ttft: 1s}\ncapacity: {repeats: -1}\n", "capacity.repeats: -1"},
		{"slo: {ttft: 1s}\ncapacity: {max_duration: -1s}\n", "capacity.max_duration"},
		{"slo: {ttft: 1s}\ncapacity: {predicted: {b: {max_pass: 1, min_fail: 2}}}\n", "capacity.predicted.b: names no server"},
		{"slo: {ttft: 1s}\ncapacity: {predicted: {a: {max_pass: 4, min_fail: 2}}}\n", "capacity.predicted.a: [4, 2]"},
		{"slo: {ttft: 1s}\ncapacity: {predicted: {a: {max: 4}}}\n", "capacity.predicted.a.max: unknown key"},
		{"slo: {ttft: 1s}\ncapacity: {strat: 2}\n", "capacity.strat: unknown key"},
	} {
		_, err := Parse([]byte(head+tc.yaml), "c.yaml", t.TempDir())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.yaml, err, tc.want)
		}
	}
}
