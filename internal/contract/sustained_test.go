package contract

import (
	"math"
	"testing"
)

// TestSustainedGoodputIsOverTheMeasuredWindow checks the definitions of a
// sustained wave: goodput and request throughput are over the measured
// window (first measured send to last measured end), its warm-up wave never
// counts, latencies are pooled as for closed waves, and the load is labeled
// apart from the closed-loop wave of the same clients.
func TestSustainedGoodputIsOverTheMeasuredWindow(t *testing.T) {
	fc := func(v float64) *float64 { return &v }
	waves := []Wave{
		{ID: 1, Server: "s", Concurrency: 2, Repeat: 1, Kind: KindWarmup, Mode: ModeSustained},
		{ID: 2, Server: "s", Concurrency: 2, Repeat: 1, Kind: KindRecorded, Mode: ModeSustained},
		{ID: 3, Server: "s", Concurrency: 2, Repeat: 1, Kind: KindRecorded, Mode: ModeClosed},
	}
	rec := func(wave int, kind string, client int, start, first, end float64, tokens int, ok bool) Record {
		r := Record{Kind: kind, Server: "s", Concurrency: 2, Repeat: 1, Wave: wave, Client: client,
			StartS: start, FirstContentS: fc(first), EndS: end, ChunkTimesS: []float64{first, end}, OutputTokens: tokens, OK: ok}
		if !ok {
			r.ErrorKind = ErrTimeout
		}
		return r
	}
	records := []Record{
		// Warm-up: never in the sustained aggregate, however large.
		rec(1, KindWarmup, 0, 0, 0.1, 0.5, 1000, true),
		rec(1, KindWarmup, 1, 0, 0.1, 0.7, 1000, true),
		// Measured: window from 0.25 (first send) to 3.25 (last end) = 3 s.
		rec(2, KindRecorded, 0, 0.25, 0.5, 1.25, 10, true),
		rec(2, KindRecorded, 1, 0.5, 0.75, 2.25, 20, true),
		rec(2, KindRecorded, 0, 1.25, 1.5, 3.25, 30, true),
		rec(2, KindRecorded, 1, 2.25, 2.5, 3, 99, false),
		rec(3, KindRecorded, 0, 0, 0.5, 2, 40, true),
		rec(3, KindRecorded, 1, 0, 0.5, 2, 40, true),
	}
	if got := WaveWindowS(records[2:6]); got != 3 {
		t.Errorf("WaveWindowS = %v, want 3", got)
	}
	aggs := Aggregates(waves, records, []string{"s"}, "")
	if len(aggs) != 2 || aggs[0].Mode != ModeClosed || aggs[1].Mode != ModeSustained {
		t.Fatalf("aggregates %+v: want closed then sustained", aggs)
	}
	a := aggs[1]
	if g := *a.Goodput.Median; math.Abs(g-60.0/3) > 1e-12 {
		t.Errorf("goodput %v, want 60 tokens / 3 s = 20", g)
	}
	if r := *a.RequestThroughput.Median; math.Abs(r-1) > 1e-12 {
		t.Errorf("request throughput %v, want 3 ok / 3 s", r)
	}
	if a.TTFT.N != 3 || a.E2E.N != 3 || a.Failures.Count != 1 || a.Failures.Total != 4 || a.FailedWithContent != 1 {
		t.Errorf("populations ttft %d e2e %d failures %+v: want 3 ok records pooled, 1 of 4 failed", a.TTFT.N, a.E2E.N, a.Failures)
	}
	if got := a.LoadLabel(); got != "2 clients, sustained" {
		t.Errorf("label %q", got)
	}
	if got := aggs[0].LoadLabel(); got != "2 clients" {
		t.Errorf("closed label %q", got)
	}
	if got := SustainedLabel(1); got != "1 client, sustained" {
		t.Errorf("SustainedLabel(1) = %q", got)
	}
	if KeyOf(waves[1]) == KeyOf(waves[2]) {
		t.Error("a sustained wave and a closed wave of the same clients share a key")
	}
}
