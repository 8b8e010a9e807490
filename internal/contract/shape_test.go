package contract

import (
	"slices"
	"testing"
)

// TestRampAndTracePopulations: ramp waves, trace replays and constant
// rates are populations of their own, each named by its label, and an
// aggregate's Key is its waves' key.
func TestRampAndTracePopulations(t *testing.T) {
	lin := &Ramp{Strategy: RampLinear, StartRPS: 1, EndRPS: 20}
	exp := &Ramp{Strategy: RampExponential, StartRPS: 1, EndRPS: 20}
	waves := []Wave{
		{ID: 1, Server: "a", Kind: KindRecorded, Mode: ModeOpen, Repeat: 1, RequestRateRPS: 2, Arrival: "poisson"},
		{ID: 2, Server: "a", Kind: KindRecorded, Mode: ModeOpen, Repeat: 1, Arrival: "poisson", Ramp: lin},
		{ID: 3, Server: "a", Kind: KindRecorded, Mode: ModeOpen, Repeat: 2, Arrival: "poisson", Ramp: &Ramp{Strategy: RampLinear, StartRPS: 1, EndRPS: 20}},
		{ID: 4, Server: "a", Kind: KindRecorded, Mode: ModeOpen, Repeat: 1, Arrival: "fixed", Ramp: exp},
		{ID: 5, Server: "a", Kind: KindRecorded, Mode: ModeOpen, Repeat: 1, Arrival: ArrivalTrace},
	}
	var records []Record
	for _, w := range waves {
		records = append(records, Record{Kind: KindRecorded, Server: "a", Wave: w.ID, Repeat: w.Repeat, OK: true, EndS: 1, ChunkTimesS: []float64{0.5, 1}})
	}
	aggs := Aggregates(waves, records, []string{"a"}, "")
	var labels []string
	for _, a := range aggs {
		labels = append(labels, a.LoadLabel())
		if a.Key() != KeyOf(waves[slices.IndexFunc(waves, func(w Wave) bool { return KeyOf(w) == a.Key() })]) {
			t.Errorf("%s: key %+v", a.LoadLabel(), a.Key())
		}
	}
	want := []string{"2 req/s", "ramp 1→20 req/s", "ramp 1→20 req/s, exponential", "trace replay"}
	if !slices.Equal(labels, want) {
		t.Errorf("labels %q, want %q", labels, want)
	}
	if aggs[1].Repeats != 2 || aggs[1].LoadShape != "ramp 1→20 req/s" {
		t.Errorf("the two linear ramp repeats are not one population: %+v", aggs[1])
	}
}
