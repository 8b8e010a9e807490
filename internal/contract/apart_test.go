package contract

import (
	"testing"
)

// The side probes beside a load's recorded waves are summarized apart,
// pooled over its repeats, and never enter its own figures; the recorded
// requests are broken down by the model they asked for.
func TestApplyApart(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	waves := []Wave{
		{ID: 1, Server: "s", Kind: KindRecorded, Mode: ModeClosed, Concurrency: 3, Repeat: 1},
		{ID: 2, Server: "s", Kind: KindSideProbe, Mode: ModeOpen, RequestRateRPS: 2, Repeat: 1, Beside: 1},
		{ID: 3, Server: "s", Kind: KindRecorded, Mode: ModeClosed, Concurrency: 3, Repeat: 2},
		{ID: 4, Server: "s", Kind: KindSideProbe, Mode: ModeOpen, RequestRateRPS: 2, Repeat: 2, Beside: 3},
		{ID: 5, Server: "s", Kind: KindSideProbe, Mode: ModeOpen, Repeat: 1, Beside: 99}, // beside no recorded wave
	}
	rec := func(wave, client int, kind, model string, ok bool, end float64) Record {
		r := Record{Kind: kind, Server: "s", Wave: wave, Client: client, Model: model, OK: ok, EndS: end, OutputTokens: 1}
		if ok {
			r.FirstContentS, r.ChunkTimesS, r.Text = f(end/2), []float64{end / 2}, "x"
		} else {
			r.ErrorKind = ErrTimeout
		}
		if kind == KindRecorded {
			r.Concurrency = 3
		}
		return r
	}
	records := []Record{
		rec(1, 0, KindRecorded, "b", true, 1), rec(1, 1, KindRecorded, "a", true, 2), rec(1, 2, KindRecorded, "b", false, 3),
		rec(2, 0, KindSideProbe, "", true, 0.1), rec(2, 1, KindSideProbe, "", false, 9),
		rec(3, 0, KindRecorded, "a", true, 4), rec(3, 1, KindRecorded, "a", true, 6), rec(3, 2, KindRecorded, "b", true, 5),
		rec(4, 0, KindSideProbe, "", true, 0.3),
		rec(5, 0, KindSideProbe, "", true, 7),
	}
	aggs := Aggregates(waves, records, []string{"s"}, "")
	ApplyApart(aggs, waves, records)
	if len(aggs) != 1 {
		t.Fatalf("%d aggregates", len(aggs))
	}
	a := aggs[0]
	if a.E2E.N != 5 || a.Failures.Total != 6 {
		t.Errorf("the load's own figures: %d E2E over %d attempts; want 5 over 6 (no side probe)", a.E2E.N, a.Failures.Total)
	}
	if len(a.Models) != 2 || a.Models[0].Model != "a" || a.Models[1].Model != "b" {
		t.Fatalf("models %+v", a.Models)
	}
	ma, mb := a.Models[0], a.Models[1]
	if ma.Requests != 3 || ma.Failures != 0 || ma.E2E.N != 3 || *ma.E2E.P50 != 4 || ma.TTFT.N != 3 {
		t.Errorf("model a: %+v", ma)
	}
	if mb.Requests != 3 || mb.Failures != 1 || mb.E2E.N != 2 || *mb.E2E.P50 != 3 {
		t.Errorf("model b: %+v", mb)
	}
	sp := a.SideProbes
	if sp == nil || sp.Requests != 3 || sp.Failures != 1 || sp.E2E.N != 2 || *sp.E2E.P50 != 0.2 || *sp.MaxE2ES != 0.3 {
		t.Fatalf("side probes %+v", sp)
	}

	// Without models or side probes, nothing is added.
	plain := Aggregates(waves[:1], records[:3], []string{"s"}, "")
	for i := range records[:3] {
		records[i].Model = ""
	}
	ApplyApart(plain, waves[:1], records[:3])
	if plain[0].Models != nil || plain[0].SideProbes != nil {
		t.Errorf("models %+v, side probes %+v: want none", plain[0].Models, plain[0].SideProbes)
	}
}
