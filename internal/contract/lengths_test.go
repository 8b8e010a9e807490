package contract

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// TestTrafficLengths checks the input and output length populations: input
// over every recorded attempt with a client count (a failed one too, a
// record without a count left out), output over the successful records
// only, the warm-up never; mean and type-7 percentiles; and an empty
// population null, never 0.
func TestTrafficLengths(t *testing.T) {
	in := func(n int) *int { return &n }
	waves := []Wave{
		{ID: 1, Server: "s", Concurrency: 2, Repeat: 1, Kind: KindWarmup},
		{ID: 2, Server: "s", Concurrency: 2, Repeat: 1, Kind: KindRecorded},
		{ID: 3, Server: "s", Concurrency: 2, Repeat: 2, Kind: KindRecorded},
		{ID: 4, Server: "t", Concurrency: 2, Repeat: 1, Kind: KindRecorded},
	}
	rec := func(server string, wave int, kind string, input *int, out int, ok bool) Record {
		r := Record{Kind: kind, Server: server, Concurrency: 2, Wave: wave, StartS: 0, EndS: 1, OutputTokens: out, OK: ok, InputTokens: input}
		if !ok {
			r.ErrorKind = ErrTimeout
		}
		return r
	}
	records := []Record{
		rec("s", 1, KindWarmup, in(5000), 5000, true),
		rec("s", 2, KindRecorded, in(10), 100, true),
		rec("s", 2, KindRecorded, in(20), 200, true),
		rec("s", 3, KindRecorded, in(30), 300, true),
		rec("s", 3, KindRecorded, in(40), 7, false), // input counts, output does not
		rec("s", 3, KindRecorded, nil, 400, true),   // output counts, input does not
		rec("t", 4, KindRecorded, nil, 0, false),
	}
	aggs := Aggregates(waves, records, []string{"s", "t"}, "")
	if len(aggs) != 2 {
		t.Fatalf("%d aggregates", len(aggs))
	}
	a := aggs[0]
	check := func(name string, l Lengths, n int, mean float64, pop []float64) {
		t.Helper()
		if l.N != n || l.Mean == nil || math.Abs(*l.Mean-mean) > 1e-12 {
			t.Errorf("%s: %+v, want n %d mean %v", name, l, n, mean)
			return
		}
		s := sortedCopy(pop)
		for _, p := range []struct {
			got *float64
			q   float64
		}{{l.P50, 0.5}, {l.P90, 0.9}, {l.P99, 0.99}} {
			if want := Percentile(s, p.q); p.got == nil || *p.got != *want {
				t.Errorf("%s: p%v = %v, want %v", name, p.q*100, p.got, *want)
			}
		}
	}
	check("input", a.InputLength, 4, 25, []float64{10, 20, 30, 40})
	check("output", a.OutputLength, 4, 250, []float64{100, 200, 300, 400})
	if got := *a.InputLength.P90; math.Abs(got-37) > 1e-12 {
		t.Errorf("input p90 %v, want 37 (type 7 over 10 20 30 40)", got)
	}
	pooled := pooledTrafficLengths(waves, records, a.Key())
	if len(pooled.Input) != 4 || len(pooled.Output) != 4 {
		t.Errorf("pooled %+v: want the aggregate's populations", pooled)
	}

	// t: no count and no success: both empty, null not 0.
	b := aggs[1]
	for name, l := range map[string]Lengths{"input": b.InputLength, "output": b.OutputLength} {
		if l.N != 0 || l.Mean != nil || l.P50 != nil || l.P90 != nil || l.P99 != nil {
			t.Errorf("%s of an empty population: %+v, want n 0 and nulls", name, l)
		}
	}
	j, _ := json.Marshal(b)
	if !strings.Contains(string(j), `"input_length_tok":{"n":0,"mean":null,"p50":null,"p90":null,"p99":null}`) {
		t.Errorf("empty population JSON: %s", j)
	}
}

// pooledTrafficLengths is the length populations behind the aggregate of
// key k, pooled over the recorded repeats, as the report's figures pool them.
func pooledTrafficLengths(waves []Wave, records []Record, k Key) TrafficLengths {
	var t TrafficLengths
	EachPooled(waves, records, k, t.Add)
	return t
}
