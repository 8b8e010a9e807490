package contract

import (
	"math"
	"strings"
	"testing"
)

// steadyRecord is a successful request of a sustained wave sent at start,
// ending at end, its first content ttft later, of tokens output tokens.
func steadyRecord(wave, client int, start, end, ttft float64, tokens int) Record {
	first := start + ttft
	return Record{Kind: KindRecorded, Server: "s", Concurrency: 4, Wave: wave, Repeat: 1, Client: client,
		StartS: start, FirstContentS: &first, ChunkTimesS: []float64{first, end}, EndS: end, OutputTokens: tokens, OK: true}
}

// rampDipDrain is a sustained wave of 4 clients, each request 2 s: the
// clients start 0.5 s apart (ramp-up: 4 in flight from 1.5 s), client 1
// waits 0.2 s before its third request (a dip to 3 in flight, 4.5–4.7 s),
// and they stop one by one from 6.7 s (drain). The ramp-up's three
// requests have a TTFT of 0.05 s, every other one 0.2 s.
func rampDipDrain(wave int) []Record {
	var recs []Record
	for _, c := range []struct {
		client int
		starts []float64
	}{
		{0, []float64{0, 2, 4, 6}},
		{1, []float64{0.5, 2.5, 4.7}},
		{2, []float64{1, 3, 5}},
		{3, []float64{1.5, 3.5, 5.5}},
	} {
		for _, s := range c.starts {
			ttft := 0.2
			if s < 1.5 {
				ttft = 0.05
			}
			recs = append(recs, steadyRecord(wave, c.client, s, s+2, ttft, 10))
		}
	}
	return recs
}

// TestFindSteadyWindow: the window runs from the instant the threshold is
// first in flight to the last instant the count falls below it; the
// ramp-up and the drain fall outside, a dip in the middle stays inside and
// is measured (below_s).
func TestFindSteadyWindow(t *testing.T) {
	var spans []Span
	for _, r := range rampDipDrain(1) {
		spans = append(spans, Span{r.StartS, r.EndS})
	}
	w, ok := FindSteadyWindow(spans, 4)
	if !ok || w.StartS != 1.5 || w.EndS != 6.7 || math.Abs(w.BelowS-0.2) > 1e-12 {
		t.Errorf("window %+v, %v: want [1.5, 6.7) with 0.2 s below the threshold (the dip)", w, ok)
	}
	if _, ok := FindSteadyWindow(spans, 5); ok {
		t.Error("a window at 5 clients, with never more than 4 in flight")
	}
	if _, ok := FindSteadyWindow(nil, 1); ok {
		t.Error("a window with no request")
	}
	for c, want := range map[int]int{1: 1, 4: 4, 19: 19, 20: 19, 64: 61, 100: 95} {
		if got := SteadyThreshold(c); got != want {
			t.Errorf("SteadyThreshold(%d) = %d, want %d", c, got, want)
		}
	}
}

// TestSteadyAggregate: a sustained aggregate's steady figures are over the
// requests sent inside the window: 10 of 13, their goodput over the
// window's 5.2 s, their TTFT (the ramp-up's faster ones left out), with a
// warning that 10 requests are few; a closed aggregate has none.
func TestSteadyAggregate(t *testing.T) {
	waves := []Wave{{ID: 1, Server: "s", Concurrency: 4, Repeat: 1, Kind: KindRecorded, Mode: ModeSustained}}
	aggs := Aggregates(waves, rampDipDrain(1), []string{"s"}, "")
	if len(aggs) != 1 || aggs[0].Steady == nil {
		t.Fatalf("aggregates %+v: want one with steady figures", aggs)
	}
	s := aggs[0].Steady
	w := s.Windows[0]
	if s.InFlightMin != 4 || w.StartS == nil || *w.StartS != 1.5 || *w.EndS != 6.7 || w.N != 10 || s.N != 10 || s.Failures != 0 {
		t.Errorf("steady %+v, window %+v: want 10 requests of [1.5, 6.7) at 4 in flight", s, w)
	}
	if math.Abs(s.DurationS-5.2) > 1e-12 || s.MeasuredS != 8 || math.Abs(s.Share-5.2/8) > 1e-12 {
		t.Errorf("duration %v of %v (%v): want 5.2 of 8", s.DurationS, s.MeasuredS, s.Share)
	}
	if g := *s.Goodput.Median; math.Abs(g-100/5.2) > 1e-9 {
		t.Errorf("steady goodput %v, want 100 tokens / 5.2 s", g)
	}
	if s.TTFT.N != 10 || math.Abs(*s.TTFT.P50-0.2) > 1e-12 || math.Abs(*aggs[0].TTFT.P50-0.2) > 1e-12 || aggs[0].TTFT.N != 13 {
		t.Errorf("TTFT steady %+v, whole %+v: want the 10 steady ones of 0.2 s, beside all 13", s.TTFT, aggs[0].TTFT)
	}
	if len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0], "holds 10 requests") {
		t.Errorf("warnings %q: want one that 10 requests are few", s.Warnings)
	}
	waves[0].Mode = ModeClosed
	if a := Aggregates(waves, rampDipDrain(1), []string{"s"}, ""); a[0].Steady != nil {
		t.Errorf("a closed aggregate has steady figures %+v", a[0].Steady)
	}
}

// TestSteadyShortAndMissing: a window under half the measured window is
// flagged with its share; a wave that never has the threshold in flight has
// no window, and says so.
func TestSteadyShortAndMissing(t *testing.T) {
	recs := []Record{
		steadyRecord(1, 0, 0, 1, 0.1, 5), steadyRecord(1, 0, 1, 2, 0.1, 5), steadyRecord(1, 0, 2, 3, 0.1, 5),
		steadyRecord(1, 1, 0.5, 1.5, 0.1, 5),
	}
	for i := range recs {
		recs[i].Concurrency = 2
	}
	waves := []Wave{{ID: 1, Server: "s", Concurrency: 2, Repeat: 1, Kind: KindRecorded, Mode: ModeSustained}}
	s := Aggregates(waves, recs, nil, "")[0].Steady
	if s.DurationS != 1 || s.MeasuredS != 3 || len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0], "steady window 1.0 s of 3.0 s measured (33%") {
		t.Errorf("steady %+v: want a window of 1 s of 3, flagged short", s)
	}
	waves[0].Concurrency = 3
	for i := range recs {
		recs[i].Concurrency = 3
	}
	s = Aggregates(waves, recs, nil, "")[0].Steady
	if s.Windows[0].StartS != nil || s.N != 0 || s.Goodput.Median != nil || len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0], "never had 3 requests in flight") {
		t.Errorf("steady %+v: want no window, and a warning", s)
	}
}

// verdictFlip is a sustained wave of 2 clients: client 0 sends 100 good
// requests of 1 s over [0, 100), client 1 ten that miss TTFT over [0, 10).
// The steady window is [0, 10): 10 good of 20; over the whole run, 100 of
// 110.
func verdictFlip() []Record {
	var recs []Record
	for i := range 100 {
		r := steadyRecord(1, 0, float64(i), float64(i+1), 0.1, 10)
		recs = append(recs, r)
	}
	for i := range 10 {
		recs = append(recs, steadyRecord(1, 1, float64(i), float64(i+1), 0.9, 10))
	}
	for i := range recs {
		recs[i].Concurrency = 2
	}
	return recs
}

// TestSteadyVerdictFlagged: at α 0.8 the whole run passes (100 of 110) and
// its steady window alone fails (10 of 20): the aggregate's steady slo says
// so, and so does a probe's steady figure, while each verdict stays the
// whole run's.
func TestSteadyVerdictFlagged(t *testing.T) {
	var o Objectives
	if err := o.Set(ObjTTFT, 500); err != nil {
		t.Fatal(err)
	}
	slo := NewSLO(o, 0.8)
	recs := verdictFlip()
	waves := []Wave{{ID: 1, Server: "s", Concurrency: 2, Repeat: 1, Kind: KindRecorded, Mode: ModeSustained}}
	aggs := Aggregates(waves, recs, nil, "")
	ApplySLO(aggs, waves, recs, slo)
	a := aggs[0]
	st := a.Steady.SLO
	if a.SLO.Verdict != VerdictPass || st == nil || st.Verdict != VerdictFail || st.N != 20 || st.Good != 10 || !st.ChangesVerdict ||
		!strings.Contains(st.Warning, "the steady window alone would fail (10/20 good") {
		t.Errorf("whole %s, steady %+v: want pass over the whole run, a flagged fail over the window", a.SLO.Verdict, st)
	}
	p := SteadyProbeOf(waves[0], recs, *slo, 10, VerdictPass)
	if p.Verdict != VerdictFail || !p.ChangesVerdict || p.N != 20 || len(p.Warnings) != 2 || !strings.Contains(p.Warnings[1], "would fail") {
		t.Errorf("probe steady %+v: want a flagged fail, and the short window", p)
	}
	// Too few requests in the window to resolve: no evidence, no flag.
	if p := SteadyProbeOf(waves[0], recs, *slo, 40, VerdictPass); p.Verdict != VerdictUnresolved || p.ChangesVerdict {
		t.Errorf("probe steady under min_requests %+v: want unresolved, not flagged", p)
	}
	ApplySLO(aggs, waves, recs, nil)
	if aggs[0].Steady.SLO != nil {
		t.Error("steady slo kept without objectives")
	}
}
