package contract

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
)

func f(v float64) *float64 { return &v }

func eqPtr(a, b *float64) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return math.Abs(*a-*b) < 1e-12
}

func show(p *float64) string {
	if p == nil {
		return "null"
	}
	return fmt.Sprint(*p)
}

func TestPercentileType7(t *testing.T) {
	// Expected values are NumPy's np.percentile(x, q) with its default
	// method "linear" (type 7).
	tests := []struct {
		name string
		xs   []float64
		p    float64
		want *float64
	}{
		{"empty is null", nil, 0.95, nil},
		{"single value", []float64{3}, 0.99, f(3)},
		{"two values p50", []float64{1, 2}, 0.5, f(1.5)},
		{"p0 is min", []float64{1, 2, 3, 4}, 0, f(1)},
		{"p100 is max", []float64{1, 2, 3, 4}, 1, f(4)},
		{"p95 of 1..10", []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 0.95, f(9.55)},
		{"p90 of 1..10", []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 0.90, f(9.1)},
		{"p99 of 1..5", []float64{1, 2, 3, 4, 5}, 0.99, f(4.96)},
		{"p50 of odd count", []float64{1, 5, 9}, 0.5, f(5)},
		{"ties", []float64{2, 2, 2, 7}, 0.5, f(2)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Percentile(tt.xs, tt.p); !eqPtr(got, tt.want) {
				t.Errorf("Percentile(%v, %v) = %v, want %v", tt.xs, tt.p, show(got), show(tt.want))
			}
		})
	}
}

func TestMedian(t *testing.T) {
	tests := []struct {
		xs   []float64
		want *float64
	}{
		{nil, nil},
		{[]float64{4}, f(4)},
		{[]float64{20.2, 10.2, 19.7}, f(19.7)},
		{[]float64{1, 4, 2, 3}, f(2.5)}, // even count: mean of the middle two
	}
	for _, tt := range tests {
		in := append([]float64(nil), tt.xs...)
		if got := Median(tt.xs); !eqPtr(got, tt.want) {
			t.Errorf("Median(%v) = %v, want %v", tt.xs, show(got), show(tt.want))
		}
		for i := range in {
			if in[i] != tt.xs[i] {
				t.Fatalf("Median modified its input")
			}
		}
	}
}

// rec builds a record of wave id with the given outcome.
func rec(wave int, server string, conc, repeat int, start, first, end float64, tokens int, ok bool, kind string) Record {
	r := Record{Kind: KindRecorded, Server: server, Concurrency: conc, Repeat: repeat, Wave: wave,
		StartS: start, EndS: end, OutputTokens: tokens, OK: ok, ErrorKind: kind}
	if first >= 0 {
		r.FirstContentS = f(first)
	}
	return r
}

func wave(id int, server string, conc, repeat int) Wave {
	return Wave{ID: id, Server: server, Concurrency: conc, Repeat: repeat, Kind: KindRecorded, Mode: ModeClosed}
}

func TestAggregatesDefinitions(t *testing.T) {
	waves := []Wave{wave(0, "a", 2, 0), wave(1, "a", 2, 1), wave(2, "a", 2, 2)}
	records := []Record{
		// repeat 0: two ok requests, wall 2.0 s, 30 tokens → 15 tok/s
		rec(0, "a", 2, 0, 0.0, 0.5, 1.0, 10, true, ""),
		rec(0, "a", 2, 0, 0.1, 0.6, 2.0, 20, true, ""),
		// repeat 1: one ok, one timeout that had content; wall 4.0 s → 10/4 = 2.5
		rec(1, "a", 2, 1, 0.0, 0.2, 1.0, 10, true, ""),
		rec(1, "a", 2, 1, 0.0, 3.0, 4.0, 99, false, ErrTimeout),
		// repeat 2: one ok, one connect failure without content; wall 1.0 → 5
		rec(2, "a", 2, 2, 0.0, 0.1, 1.0, 5, true, ""),
		rec(2, "a", 2, 2, 0.0, -1, 0.01, 0, false, ErrConnect),
		// a warm-up record must be ignored
		{Kind: KindWarmup, Server: "a", Wave: 9, EndS: 100, OutputTokens: 1000, OK: true},
	}
	records[0].ChunkTimesS = []float64{0.5, 0.6, 0.8}
	aggs := Aggregates(waves, records, []string{"a"}, "")
	if len(aggs) != 1 {
		t.Fatalf("got %d aggregates, want 1", len(aggs))
	}
	a := aggs[0]
	if a.Repeats != 3 {
		t.Errorf("repeats = %d, want 3", a.Repeats)
	}
	wantPer := []float64{15, 2.5, 5}
	for i, w := range wantPer {
		if math.Abs(a.Goodput.PerRepeat[i]-w) > 1e-12 {
			t.Errorf("goodput per repeat[%d] = %v, want %v (failed request's 99 tokens must be excluded)", i, a.Goodput.PerRepeat[i], w)
		}
	}
	if !eqPtr(a.Goodput.Median, f(5)) || !eqPtr(a.Goodput.Min, f(2.5)) || !eqPtr(a.Goodput.Max, f(15)) {
		t.Errorf("goodput spread = %v [%v–%v], want 5 [2.5–15]", show(a.Goodput.Median), show(a.Goodput.Min), show(a.Goodput.Max))
	}
	// TTFT pooled over ok records: 0.5, 0.5, 0.2, 0.1
	if a.TTFT.N != 4 || !eqPtr(a.TTFT.P50, f(0.35)) {
		t.Errorf("TTFT n=%d p50=%v, want n=4 p50=0.35 (failures never enter latency)", a.TTFT.N, show(a.TTFT.P50))
	}
	// E2E: 1.0, 1.9, 1.0, 1.0
	if a.E2E.N != 4 || !eqPtr(a.E2E.P50, f(1.0)) {
		t.Errorf("E2E n=%d p50=%v", a.E2E.N, show(a.E2E.P50))
	}
	// TPOT: (1-0.5)/9, (2-0.6)/19, (1-0.2)/9, (1-0.1)/4
	if a.TPOT.N != 4 {
		t.Errorf("TPOT n = %d, want 4", a.TPOT.N)
	}
	// ITL: consecutive chunk gaps 0.1, 0.2
	if a.ITL.N != 2 || !eqPtr(a.ITL.P50, f(0.15)) {
		t.Errorf("ITL n=%d p50=%v, want 2 and 0.15", a.ITL.N, show(a.ITL.P50))
	}
	if a.Failures.Count != 2 || a.Failures.Total != 6 || a.Failures.ByKind[ErrTimeout] != 1 || a.Failures.ByKind[ErrConnect] != 1 {
		t.Errorf("failures = %+v", a.Failures)
	}
	if math.Abs(a.Failures.Rate-2.0/6) > 1e-12 {
		t.Errorf("failure rate = %v", a.Failures.Rate)
	}
	if a.FailedWithContent != 1 {
		t.Errorf("failed_with_content = %d, want 1", a.FailedWithContent)
	}
	if a.OutputTokens != 45 {
		t.Errorf("output tokens = %d, want 45", a.OutputTokens)
	}
	if !hasWarning(a, "TTFT, TPOT, E2E from 4 or fewer samples") {
		t.Errorf("want a small-sample warning, got %q", a.Warnings)
	}
}

func hasWarning(a Aggregate, sub string) bool {
	for _, w := range a.Warnings {
		if strings.Contains(w, sub) {
			return true
		}
	}
	return false
}

func TestTPOTNeedsTwoTokens(t *testing.T) {
	r := rec(0, "a", 1, 0, 0, 0.5, 1.5, 1, true, "")
	if _, ok := r.TPOT(); ok {
		t.Error("TPOT defined for a one-token output")
	}
	r.OutputTokens = 3
	if v, ok := r.TPOT(); !ok || math.Abs(v-0.5) > 1e-12 {
		t.Errorf("TPOT = %v,%v want 0.5", v, ok)
	}
}

func TestOnlyFailures(t *testing.T) {
	waves := []Wave{wave(0, "a", 2, 0)}
	records := []Record{
		rec(0, "a", 2, 0, 0, -1, 60, 0, false, ErrTimeout),
		rec(0, "a", 2, 0, 0, 5, 60, 0, false, ErrTimeout),
	}
	a := Aggregates(waves, records, nil, "")[0]
	if a.TTFT.N != 0 || a.TTFT.P95 != nil || a.E2E.P50 != nil {
		t.Errorf("latencies of a server with only failures must be null, got %+v", a.TTFT)
	}
	if !eqPtr(a.Goodput.Median, f(0)) {
		t.Errorf("goodput = %v, want 0 (the wave ran 60 s and delivered nothing)", show(a.Goodput.Median))
	}
	if !hasWarning(a, "no successful request") {
		t.Errorf("want a zero-success warning, got %q", a.Warnings)
	}
	if a.Failures.Rate != 1 {
		t.Errorf("rate = %v", a.Failures.Rate)
	}
}

func TestSpeedup(t *testing.T) {
	waves := []Wave{wave(0, "base", 1, 0), wave(1, "fast", 1, 0), wave(2, "base", 8, 0), wave(3, "fast", 8, 0), wave(4, "fast", 32, 0)}
	records := []Record{
		rec(0, "base", 1, 0, 0, 0.1, 2, 20, true, ""),         // 10 tok/s
		rec(1, "fast", 1, 0, 0, 0.1, 1, 50, true, ""),         // 50 tok/s
		rec(2, "base", 8, 0, 0, -1, 60, 0, false, ErrTimeout), // baseline goodput 0
		rec(3, "fast", 8, 0, 0, 0.1, 1, 50, true, ""),
		rec(4, "fast", 32, 0, 0, 0.1, 1, 50, true, ""), // no baseline at 32
	}
	aggs := Aggregates(waves, records, []string{"base", "fast"}, "base")
	if aggs[0].Server != "base" || aggs[0].Concurrency != 1 || aggs[2].Server != "fast" {
		t.Fatalf("order: servers as named, then concurrency; got %v %v %v", aggs[0].Key(), aggs[1].Key(), aggs[2].Key())
	}
	for _, a := range aggs {
		switch {
		case a.Server == "base":
			if a.SpeedupVsBaseline != nil {
				t.Errorf("baseline's own speed-up must be null")
			}
		case a.Concurrency == 1:
			if !eqPtr(a.SpeedupVsBaseline, f(5)) {
				t.Errorf("speed-up at 1 = %v, want 5", show(a.SpeedupVsBaseline))
			}
		case a.Concurrency == 8:
			if a.SpeedupVsBaseline != nil {
				t.Errorf("speed-up over a zero baseline must be null, got %v", show(a.SpeedupVsBaseline))
			}
		case a.Concurrency == 32:
			if a.SpeedupVsBaseline != nil {
				t.Errorf("speed-up without a baseline wave must be null")
			}
		}
	}
}

func TestColdAndOpenLoopWarnings(t *testing.T) {
	w := wave(0, "a", 1, 0)
	w.Cold = true
	ow := Wave{ID: 1, Server: "a", Kind: KindRecorded, Mode: ModeOpen, RequestRateRPS: 4, Concurrency: 0}
	records := []Record{
		rec(0, "a", 1, 0, 0, 0.1, 1, 10, true, ""),
		{Kind: KindRecorded, Server: "a", Wave: 1, IntendedStartS: 0, StartS: 0.05, EndS: 1, FirstContentS: f(0.2), OutputTokens: 5, OK: true},
		{Kind: KindRecorded, Server: "a", Wave: 1, IntendedStartS: 0.25, StartS: 0.25, EndS: 1.5, FirstContentS: f(0.4), OutputTokens: 5, OK: true},
	}
	aggs := Aggregates([]Wave{w, ow}, records, nil, "")
	if len(aggs) != 2 || aggs[0].Mode != ModeClosed || aggs[1].Mode != ModeOpen {
		t.Fatalf("want closed then open aggregates, got %d", len(aggs))
	}
	if !hasWarning(aggs[0], "cold wave") {
		t.Errorf("cold wave not flagged: %q", aggs[0].Warnings)
	}
	l := aggs[1].Lateness
	if l == nil || l.N != 2 || !eqPtr(l.P50, f(0.025)) {
		t.Fatalf("lateness = %+v", l)
	}
	if !hasWarning(aggs[1], "lateness") {
		t.Errorf("50 ms lateness not flagged: %q", aggs[1].Warnings)
	}
	if aggs[1].RequestRateRPS != 4 {
		t.Errorf("open aggregate rate = %v", aggs[1].RequestRateRPS)
	}
}

func TestEmptyInputs(t *testing.T) {
	if got := Aggregates(nil, nil, nil, "x"); len(got) != 0 {
		t.Errorf("no waves → no aggregates, got %d", len(got))
	}
	s := SpreadOf(nil)
	if s.Median != nil || s.Min != nil || s.PerRepeat == nil {
		t.Errorf("empty spread = %+v, want nulls and []", s)
	}
	p := Summarize(nil)
	if p.N != 0 || p.P50 != nil || p.P99 != nil {
		t.Errorf("empty summary = %+v", p)
	}
}

func TestLoadLabel(t *testing.T) {
	for _, tc := range []struct {
		a    Aggregate
		want string
	}{
		{Aggregate{Mode: ModeClosed, Concurrency: 64}, "64 clients"},
		{Aggregate{Concurrency: 1}, "1 client"},
		{Aggregate{Mode: ModeOpen, Concurrency: 8, RequestRateRPS: 2.5}, "2.5 req/s"},
	} {
		if got := tc.a.LoadLabel(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.a.Key(), got, tc.want)
		}
	}
	if (Aggregate{Server: "s", Concurrency: 4}).Key() != KeyOf(Wave{Server: "s", Concurrency: 4, RequestRateRPS: 9}) {
		t.Error("an aggregate without a mode is keyed differently from its closed-loop waves")
	}
}

func TestPooledLatenciesAreTheAggregatesPopulations(t *testing.T) {
	fc := func(v float64) *float64 { return &v }
	waves := []Wave{
		{ID: 0, Server: "s", Concurrency: 2, Repeat: 0, Kind: KindRecorded},
		{ID: 1, Server: "s", Concurrency: 2, Repeat: 1, Kind: KindRecorded, Mode: ModeClosed},
		{ID: 2, Server: "s", Concurrency: 2, Kind: KindWarmup},
		{ID: 3, Server: "s", Concurrency: 4, Kind: KindRecorded},
	}
	rec := func(wave int, kind string, ok bool, start, first, end float64, tokens int) Record {
		return Record{Kind: kind, Server: "s", Wave: wave, OK: ok, StartS: start, FirstContentS: fc(first), EndS: end,
			OutputTokens: tokens, ChunkTimesS: []float64{first, (first + end) / 2, end}, ErrorKind: map[bool]string{false: ErrTimeout}[ok]}
	}
	records := []Record{
		rec(0, KindRecorded, true, 0, 0.1, 1, 10),
		rec(0, KindRecorded, false, 0, 0.05, 9, 3), // failed with content: in no population
		rec(1, KindRecorded, true, 0.01, 0.3, 2, 1),
		rec(2, KindWarmup, true, 0, 5, 6, 10),
		rec(3, KindRecorded, true, 0, 7, 8, 10),
	}
	k := Key{Server: "s", Mode: ModeClosed, Concurrency: 2}
	l := PooledLatencies(waves, records, k)
	if len(l.TTFT) != 2 || len(l.TPOT) != 1 || len(l.ITL) != 4 || len(l.E2E) != 2 {
		t.Fatalf("populations %+v: want 2 TTFT, 1 TPOT, 4 ITL, 2 E2E", l)
	}
	for _, a := range Aggregates(waves, records, []string{"s"}, "") {
		if a.Key() != k {
			continue
		}
		if !reflect.DeepEqual(a.TTFT, Summarize(l.TTFT)) || !reflect.DeepEqual(a.TPOT, Summarize(l.TPOT)) ||
			!reflect.DeepEqual(a.ITL, Summarize(l.ITL)) || !reflect.DeepEqual(a.E2E, Summarize(l.E2E)) {
			t.Errorf("aggregate %+v does not summarize %+v", a, l)
		}
	}
}

func TestClientFailuresAreNamedAsTheLoadGenerators(t *testing.T) {
	records := []Record{
		rec(0, "a", 3, 0, 0, 0.1, 1, 6, true, ""),
		rec(0, "a", 3, 1, 0, -1, 0, 0, false, ErrClient),
		rec(0, "a", 3, 2, 0, -1, 0, 0, false, ErrClient),
	}
	a := Aggregates([]Wave{wave(0, "a", 3, 0)}, records, nil, "")[0]
	if a.Failures.ByKind[ErrClient] != 2 {
		t.Fatalf("by_kind = %v", a.Failures.ByKind)
	}
	if !hasWarning(a, "2 failures were the load generator's own (client), not the server's") {
		t.Errorf("client failures not named: %q", a.Warnings)
	}
}
