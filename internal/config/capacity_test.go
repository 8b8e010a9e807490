package config

import (
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/search"
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
	// min_requests is sized from α: the fewest all-good requests that
	// pass 0.95 (search.MinPass).
	if c.Start != 1 || c.MaxConcurrency != DefaultCapacityMax || c.MinRequests != 73 ||
		c.MaxRequests != 8*73 || *c.WarmupRequests != -1 || *c.Repeats != 1 || len(r.Workload.Concurrencies) != 0 {
		t.Errorf("defaults: %+v, concurrencies %v", c, r.Workload.Concurrencies)
	}
	r, err = Parse([]byte(head+"slo: {ttft: 1s, attainment: 0.9}\ncapacity: {}\n"), "c.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if c := r.Capacity; c.MinRequests != 35 || c.MaxRequests != 8*35 {
		t.Errorf("α 0.9: min_requests %d, max_requests %d: want 35 and 280", c.MinRequests, c.MaxRequests)
	}
	if s := c.Spec("a"); s.Warmup(7, true) != 14 || s.Warmup(7, false) != 7 || s.Predicted != nil || !s.Screen || !*c.Screen || !s.Steer {
		t.Errorf("spec %+v: want the doubling screened and the search steered by default, a warm-up of two rounds first and one after", s)
	}
	r, err = Parse([]byte(head+"slo: {ttft: 1s}\ncapacity: {screen: false}\n"), "c.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if s := r.Capacity.Spec("a"); s.Screen || s.Config(0.95).Screen {
		t.Errorf("capacity.screen false: spec %+v", s)
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

const capacityBase = "servers: [{name: a, base_url: 'http://127.0.0.1:1'}, {name: b, base_url: 'http://127.0.0.1:2'}]\nmodel: {id: m}\nslo: {ttft: 1s}\n"

// TestCapacityPredictions: capacity.predicted and capacity.predict_from
// are mappings of server names to mappings, each key of which is checked.
func TestCapacityPredictions(t *testing.T) {
	r, err := Parse([]byte(capacityBase+"capacity:\n  predicted: {a: {max_pass: 1, min_fail: 2}}\n  predict_from: {b: {profile: t4-qwen2.5-1.5b-batching, max_num_seqs: 32}}\n"), "x.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := r.Capacity
	if c.Predicted["a"] != (Bracket{MaxPass: 1, MinFail: 2}) || c.PredictFrom["b"] != (PredictFrom{Profile: "t4-qwen2.5-1.5b-batching", MaxNumSeqs: 32}) {
		t.Fatalf("predicted %+v, predict_from %+v", c.Predicted, c.PredictFrom)
	}
	if s := c.Spec("a"); s.Predicted == nil || *s.Predicted != (search.Bracket{MaxPass: 1, MinFail: 2}) {
		t.Errorf("spec of a: predicted %v", s.Predicted)
	}
	for _, tc := range []struct{ capacity, want string }{
		{"predict_from: {a: {profile: p, seqs: 3}}", "capacity.predict_from.a.seqs: unknown key"},
		{"predict_from: {a: p}", "capacity.predict_from.a: want a mapping"},
		{"predict_from: {a: {max_num_seqs: 3}}", "capacity.predict_from.a.profile: empty"},
		{"predict_from: {a: {profile: p, max_num_seqs: -1}}", "capacity.predict_from.a.max_num_seqs: -1"},
		{"predict_from: {a: {profile: p, kv_token_budget: -1}}", "capacity.predict_from.a.kv_token_budget: -1"},
		{"predict_from: {c: {profile: p}}", "capacity.predict_from.c: names no server"},
		{"predict_from: {a: {profile: p}}\n  predicted: {a: {max_pass: 1, min_fail: 2}}", "capacity.predict_from.a: and predicted.a both give a a bracket"},
	} {
		_, err := Parse([]byte(capacityBase+"capacity:\n  "+tc.capacity+"\n"), "x.yaml", t.TempDir())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.capacity, err, tc.want)
		}
	}
}
