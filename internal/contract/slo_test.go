package contract

import (
	"math"
	"strings"
	"testing"
)

func TestParseObjectives(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{in: "ttft<=500ms,tpot<=50ms", want: "ttft<=500ms,tpot<=50ms"},
		{in: " tpot <= 50ms , ttft<=0.5s ", want: "ttft<=500ms,tpot<=50ms"},
		{in: "e2el<=2s", want: "e2el<=2s"},
		{in: "itl<=120ms,e2el<=1500ms", want: "itl<=120ms,e2el<=1500ms"},
		{in: "TTFT<=1s", want: "ttft<=1s"},
		{in: "ttft<=2.5ms", want: "ttft<=2.5ms"},
		{in: "ttft<=500", err: `"ttft<=500": limit "500" has no unit (write 500ms or 500s)`},
		{in: "ttfb<=500ms", err: `unknown objective "ttfb"`},
		{in: "ttft<=500ms,ttft<=1s", err: "objective ttft given twice"},
		{in: "ttft<500ms", err: "name<=limit"},
		{in: "ttft=500ms", err: "name<=limit"},
		{in: "ttft", err: "not name<=limit"},
		{in: "", err: "no objective"},
		{in: "ttft<=500ms,", err: `"": not name<=limit`},
		{in: "ttft<=0ms", err: "not positive"},
		{in: "ttft<=-1s", err: "not positive"},
		{in: "ttft<=5us", err: "not a time"},
		{in: "ttft<=fast", err: "not a time"},
		{in: "ttft<=NaNs", err: "not a time"},
	} {
		o, err := ParseObjectives(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseObjectives(%q) = %v, %v; want error containing %q", tc.in, o, err, tc.err)
			}
			continue
		}
		if err != nil || o.String() != tc.want {
			t.Errorf("ParseObjectives(%q) = %q, %v; want %q", tc.in, o.String(), err, tc.want)
		}
	}
}

func TestWilsonKnownValues(t *testing.T) {
	// Values of the closed form computed apart (Python, z = 1.959963984540054),
	// rounded to 5 places; 95 of 100 is the textbook [0.8882, 0.9785].
	for _, tc := range []struct {
		k, n   int
		lo, hi float64
	}{
		{95, 100, 0.88825, 0.97846},
		{50, 100, 0.40383, 0.59617},
		{0, 10, 0, 0.27753},
		{10, 10, 0.72247, 1},
		{1, 1, 0.20655, 1},
		{9, 10, 0.59585, 0.98212},
		{190, 200, 0.91042, 0.97262},
	} {
		lo, hi := Wilson(tc.k, tc.n)
		if math.Abs(lo-tc.lo) > 5e-5 || math.Abs(hi-tc.hi) > 5e-5 {
			t.Errorf("Wilson(%d, %d) = [%.5f, %.5f], want [%.5f, %.5f]", tc.k, tc.n, lo, hi, tc.lo, tc.hi)
		}
	}
	if lo, hi := Wilson(0, 0); lo != 0 || hi != 1 {
		t.Errorf("Wilson(0, 0) = [%v, %v], want [0, 1]", lo, hi)
	}
}

func sloRec(ok bool, start, first, end float64, tokens int, chunks ...float64) Record {
	r := Record{Kind: KindRecorded, OK: ok, StartS: start, EndS: end, OutputTokens: tokens, ChunkTimesS: chunks}
	if first >= 0 {
		r.FirstContentS = &first
	}
	if !ok {
		r.ErrorKind = ErrTimeout
	}
	return r
}

func TestJudge(t *testing.T) {
	o, err := ParseObjectives("ttft<=500ms,tpot<=50ms,itl<=100ms,e2el<=2s")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		r      Record
		good   bool
		missed string
	}{
		{"all met", sloRec(true, 0, 0.4, 1.0, 13, 0.4, 0.45, 0.5), true, ""},
		{"at the limits", sloRec(true, 0, 0.5, 1.0, 11, 0.5, 0.6), true, ""},
		{"rounding at the limit is met", sloRec(true, 0.1, 0.3, 0.3+10*0.05000000000000003, 11, 0.3, 0.35), true, ""},
		{"a microsecond over is missed", sloRec(true, 0, 0.500001, 1.0, 11, 0.6, 0.65), false, "ttft"},
		{"ttft missed", sloRec(true, 0, 0.6, 1.0, 11, 0.6, 0.65), false, "ttft"},
		{"tpot missed", sloRec(true, 0, 0.1, 1.0, 11, 0.1, 0.15), false, "tpot"},
		{"itl missed", sloRec(true, 0, 0.1, 0.5, 11, 0.1, 0.3), false, "itl"},
		{"e2el and tpot missed", sloRec(true, 0, 0.1, 2.5, 11, 0.1, 0.15), false, "tpot,e2el"},
		{"one token: tpot met vacuously", sloRec(true, 0, 0.1, 1.9, 1, 0.1), true, ""},
		{"no content: ttft missed", sloRec(true, 0, -1, 0.2, 0), false, "ttft"},
		{"failure is never good", sloRec(false, 0, 0.1, 0.2, 0, 0.1), false, ""},
	} {
		v := Judge(tc.r, o)
		if v.Good != tc.good || strings.Join(v.Missed, ",") != tc.missed {
			t.Errorf("%s: Judge = %+v, want good %v missed %q", tc.name, v, tc.good, tc.missed)
		}
	}
}

func TestAttainAndVerdict(t *testing.T) {
	o, _ := ParseObjectives("ttft<=500ms,tpot<=50ms")
	var recs []Record
	for range 95 {
		recs = append(recs, sloRec(true, 0, 0.1, 0.5, 11))
	}
	recs = append(recs, sloRec(true, 0, 0.9, 1.0, 11), sloRec(true, 0, 0.9, 1.0, 11), sloRec(true, 0, 0.1, 2, 11))
	recs = append(recs, sloRec(false, 0, -1, 60, 0), sloRec(false, 0, 0.1, 60, 0))
	a := Attain(recs, o)
	if a.N != 100 || a.Good != 95 || a.Failed != 2 || a.Missed[ObjTTFT] != 2 || a.Missed[ObjTPOT] != 1 {
		t.Fatalf("Attain = %+v", a)
	}
	if math.Abs(a.Attainment-0.95) > 1e-12 || math.Abs(a.CILow-0.88825) > 5e-5 || math.Abs(a.CIHigh-0.97846) > 5e-5 {
		t.Errorf("attainment %v [%v, %v]", a.Attainment, a.CILow, a.CIHigh)
	}
	if b := a.Binding(); b != ObjTTFT {
		t.Errorf("binding %q, want ttft", b)
	}
	for _, tc := range []struct {
		alpha float64
		min   int
		want  string
	}{
		{0.95, 10, VerdictUnresolved},
		{0.80, 10, VerdictPass},
		{0.8882, 10, VerdictPass},
		{0.99, 10, VerdictFail},
		{0.80, 101, VerdictUnresolved},
	} {
		if got := a.Verdict(tc.alpha, tc.min); got != tc.want {
			t.Errorf("Verdict(%v, %d) = %s, want %s", tc.alpha, tc.min, got, tc.want)
		}
	}
	if b := AttainmentOf(95, 100); b.CILow != a.CILow || b.CIHigh != a.CIHigh || b.Attainment != a.Attainment {
		t.Errorf("AttainmentOf(95, 100) = %+v, Attain gave %+v", b, a)
	}
	if got := Attain(nil, o); got.N != 0 || got.CILow != 0 || got.CIHigh != 1 || got.Verdict(0.5, 0) != VerdictUnresolved || got.Binding() != "" {
		t.Errorf("Attain(nil) = %+v", got)
	}
	if v := verdicts(recs[94:97], o); len(v) != 3 || !v[0].Good || v[1].Good || v[1].Missed[0] != ObjTTFT {
		t.Errorf("Verdicts = %+v", v)
	}
}

func TestApplySLO(t *testing.T) {
	o, _ := ParseObjectives("ttft<=500ms")
	waves := []Wave{
		{ID: 0, Server: "s", Concurrency: 2, Repeat: 1, Kind: KindRecorded},
		{ID: 1, Server: "s", Concurrency: 2, Repeat: 2, Kind: KindRecorded},
		{ID: 2, Server: "s", Concurrency: 2, Repeat: 1, Kind: KindWarmup},
	}
	mk := func(wave int, first, end float64, tokens int, ok bool) Record {
		r := sloRec(ok, 0, first, end, tokens)
		r.Server, r.Concurrency, r.Wave = "s", 2, wave
		return r
	}
	records := []Record{
		mk(0, 0.1, 2, 10, true), mk(0, 0.9, 1, 10, true), // 1 good over 2 s
		mk(1, 0.2, 4, 20, true), mk(1, 0.3, 4, 30, false), // 1 good over 4 s
	}
	w := mk(2, 0.1, 1, 10, true)
	w.Kind = KindWarmup
	records = append(records, w)
	aggs := Aggregates(waves, records, []string{"s"}, "")
	ApplySLO(aggs, waves, records, NewSLO(o, 0.95))
	s := aggs[0].SLO
	if s == nil || s.N != 4 || s.Good != 2 || *s.Attainment != 0.5 || s.Failed != 1 || s.Missed[ObjTTFT] != 1 || *s.BindingObjective != ObjTTFT || s.Verdict != VerdictFail {
		t.Fatalf("slo = %+v", s)
	}
	if *s.RequestGoodput.Max != 0.5 || *s.RequestGoodput.Min != 0.25 || *s.TokenGoodput.Max != 5 || *s.TokenGoodput.Min != 5 {
		t.Errorf("goodput %+v %+v", s.RequestGoodput, s.TokenGoodput)
	}
	ApplySLO(aggs, waves, records, nil)
	if aggs[0].SLO != nil {
		t.Error("nil SLO left the field set")
	}
}

func TestCheckAttainmentTarget(t *testing.T) {
	for _, a := range []float64{0, 1, -0.5, 1.5, math.NaN()} {
		if CheckAttainmentTarget(a) == nil {
			t.Errorf("%v accepted", a)
		}
	}
	if err := CheckAttainmentTarget(0.95); err != nil {
		t.Error(err)
	}
}

func verdicts(records []Record, o Objectives) []RequestVerdict {
	out := make([]RequestVerdict, len(records))
	for i, r := range records {
		out[i] = Judge(r, o)
	}
	return out
}
