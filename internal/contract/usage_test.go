package contract

import (
	"reflect"
	"slices"
	"testing"
)

func TestUsageDisagreementCountsEveryDifferingRecord(t *testing.T) {
	n := func(v int) *int { return &v }
	withUsage := func(r Record, usage int) Record {
		r.UsageCompletionTokens = n(usage)
		return r
	}
	records := []Record{
		withUsage(rec(0, "a", 4, 0, 0, 0.1, 1, 64, true, ""), 64),                  // equal
		withUsage(rec(0, "a", 4, 0, 0, 0.1, 1, 59, true, ""), 64),                  // −5
		withUsage(rec(0, "a", 4, 0, 0, 0.1, 1, 72, true, ""), 64),                  // +8
		withUsage(rec(0, "a", 4, 0, 0, 0.1, 1, 30, false, ErrStreamMalformed), 31), // a failure is compared too: −1
		rec(0, "a", 4, 0, 0, 0.1, 1, 10, true, ""),                                 // no usage: not compared
	}
	// The server's usage counts reasoning too.
	reasoning := withUsage(rec(0, "a", 4, 0, 0, 0.1, 1, 40, true, ""), 64)
	reasoning.ReasoningTokens = n(24)
	records = append(records, reasoning)
	// A redacted record's text was changed after its count: left out,
	// as verify leaves its re-count out.
	redacted := withUsage(rec(0, "a", 4, 0, 0, 0.1, 1, 1, true, ""), 64)
	redacted.Redacted = true
	// Tool-call text is kept, not counted: left out.
	tool := withUsage(rec(0, "a", 4, 0, 0, 0.1, 1, 1, true, ""), 64)
	tool.ToolCallText = `{"city":"Paris"}`
	// A warm-up record is in no aggregate.
	warm := withUsage(rec(9, "a", 4, 0, 0, 0.1, 1, 1, true, ""), 64)
	warm.Kind = KindWarmup
	records = append(records, redacted, tool, warm)

	waves := []Wave{wave(0, "a", 4, 0)}
	a := Aggregates(waves, records, nil, "")[0]
	want := &UsageDisagreement{Compared: 5, Count: 3, LargestDiff: 8}
	if !reflect.DeepEqual(a.UsageDisagreement, want) {
		t.Errorf("usage_disagreement = %+v, want %+v", a.UsageDisagreement, want)
	}
	// The figure is the same whatever order the records come in (verify
	// streams them, merge rejoins them).
	slices.Reverse(records)
	if b := Aggregates(waves, records, nil, ""); !reflect.DeepEqual(b[0].UsageDisagreement, want) {
		t.Errorf("reversed: usage_disagreement = %+v, want %+v", b[0].UsageDisagreement, want)
	}
	// No warning text: the figure is the warning, rendered by the report.
	if hasWarning(a, "usage") {
		t.Errorf("a warning about usage in %q", a.Warnings)
	}
}

func TestUsageDisagreementAbsentWithoutUsage(t *testing.T) {
	records := []Record{rec(0, "a", 1, 0, 0, 0.1, 1, 6, true, "")}
	if a := Aggregates([]Wave{wave(0, "a", 1, 0)}, records, nil, ""); a[0].UsageDisagreement != nil {
		t.Errorf("no record carries usage, yet usage_disagreement = %+v", a[0].UsageDisagreement)
	}
}

func TestLargerDiffIsOrderFree(t *testing.T) {
	for _, c := range []struct{ a, b, want int }{
		{0, 3, 3}, {0, -3, -3}, {-3, 3, 3}, {3, -3, 3}, {-5, 4, -5}, {4, -5, -5},
	} {
		if got := largerDiff(c.a, c.b); got != c.want {
			t.Errorf("largerDiff(%d, %d) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
	var u, v UsageDisagreement
	u.Merge(UsageDisagreement{Compared: 3, Count: 1, LargestDiff: -4})
	v.Merge(UsageDisagreement{Compared: 2, Count: 2, LargestDiff: 4})
	u.Merge(v)
	if want := (UsageDisagreement{Compared: 5, Count: 3, LargestDiff: 4}); u != want {
		t.Errorf("merged %+v, want %+v", u, want)
	}
}
