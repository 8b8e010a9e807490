package contract

import (
	"strings"
	"testing"
)

func ip(v int) *int { return &v }

// A reasoning model's records: TTFT waits for content, TTFT-any does not;
// reasoning tokens are summed beside goodput, which stays content tokens;
// and the server's usage, which counts reasoning too, is compared with
// content plus reasoning, so no disagreement is warned of.
func TestAggregateReasoning(t *testing.T) {
	waves := []Wave{{ID: 0, Server: "a", Concurrency: 2, Repeat: 1, Kind: KindRecorded}}
	rec := func(client int, ft, fc float64, reasoning int) Record {
		return Record{Kind: KindRecorded, Server: "a", Concurrency: 2, Repeat: 1, Wave: 0, Client: client,
			StartS: 0, EndS: 2, FirstTokenS: f(ft), FirstContentS: f(fc), ChunkTimesS: []float64{fc, 2},
			OK: true, Text: " a b", OutputTokens: 2, ReasoningText: strings.Repeat(" r", reasoning), ReasoningTokens: ip(reasoning),
			UsageCompletionTokens: ip(2 + reasoning)}
	}
	records := []Record{rec(0, 0.1, 1.0, 30), rec(1, 0.3, 1.4, 50)}
	a := Aggregates(waves, records, []string{"a"}, "")[0]
	if !eqPtr(a.TTFT.P50, f(1.2)) || !eqPtr(a.TTFTAny.P50, f(0.2)) {
		t.Fatalf("ttft p50 %s, ttft_any p50 %s; want 1.2 and 0.2", show(a.TTFT.P50), show(a.TTFTAny.P50))
	}
	if a.OutputTokens != 4 || !eqPtr(a.Goodput.Median, f(2)) {
		t.Fatalf("goodput counts reasoning: output %d, goodput %s", a.OutputTokens, show(a.Goodput.Median))
	}
	if a.ReasoningTokens == nil || *a.ReasoningTokens != 80 || a.ReasoningRate == nil || !eqPtr(a.ReasoningRate.Median, f(40)) {
		t.Fatalf("reasoning tokens %v rate %+v, want 80 and 40 tok/s", a.ReasoningTokens, a.ReasoningRate)
	}
	for _, w := range a.Warnings {
		if strings.Contains(w, "usage") {
			t.Fatalf("usage that counts reasoning was warned of: %s", w)
		}
	}
}

// Without a reasoning channel the reasoning fields are absent and
// TTFT-any is TTFT, also for records written before first_token_s.
func TestAggregateWithoutReasoning(t *testing.T) {
	waves := []Wave{{ID: 0, Server: "a", Concurrency: 1, Repeat: 1, Kind: KindRecorded}}
	records := []Record{{Kind: KindRecorded, Server: "a", Concurrency: 1, Repeat: 1, Wave: 0,
		StartS: 0.1, EndS: 2, FirstContentS: f(0.6), ChunkTimesS: []float64{0.6, 2}, OK: true, Text: " a b", OutputTokens: 2}}
	a := Aggregates(waves, records, []string{"a"}, "")[0]
	if a.ReasoningTokens != nil || a.ReasoningRate != nil {
		t.Fatalf("reasoning fields without reasoning: %v %v", a.ReasoningTokens, a.ReasoningRate)
	}
	if !eqPtr(a.TTFTAny.P50, a.TTFT.P50) || a.TTFTAny.N != 1 {
		t.Fatalf("ttft_any %+v, ttft %+v", a.TTFTAny, a.TTFT)
	}
}
