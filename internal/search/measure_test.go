package search

import (
	"math"
	"testing"

	"github.com/rehearse/rehearse/internal/contract"
)

// TestMeasure: a probe's outcome is its records' attainment, verdict, the
// p95 (not the maximum) of their TTFT and TPOT by the contract's
// percentile, and its rates over the measured window.
func TestMeasure(t *testing.T) {
	var recs []contract.Record
	for i := range 20 {
		first := 0.01 * float64(i+1) // TTFTs 10 … 200 ms
		recs = append(recs, contract.Record{
			Kind: contract.KindRecorded, OK: true, StartS: 0, FirstContentS: &first,
			EndS: first + 0.1, OutputTokens: 11, // TPOT (0.1 s ÷ 10) = 10 ms each
		})
	}
	recs[19].OK, recs[19].ErrorKind = false, contract.ErrTimeout
	ttft := 150.0
	slo := contract.SLO{Objectives: contract.Objectives{TTFTMS: &ttft}, AttainmentTarget: 0.5}
	o := Measure(7, recs, slo, 10)
	if o.N != 20 || o.Good != 15 || o.Failures != 1 || o.WaveIDs[0] != 7 || o.Verdict != VerdictPass {
		t.Fatalf("outcome %+v: want 15 good of 20 (TTFT ≤ 150 ms: the first 15), 1 failure, a pass at α 0.5", o)
	}
	// The successful TTFTs are 10 … 190 ms: type 7's p95 of 19 values is
	// 181 ms, not the largest (190 ms).
	if o.TTFTP95S == nil || math.Abs(*o.TTFTP95S-0.181) > 1e-9 {
		t.Errorf("ttft p95 %v, want 0.181", o.TTFTP95S)
	}
	if o.TPOTP95S == nil || math.Abs(*o.TPOTP95S-0.01) > 1e-9 {
		t.Errorf("tpot p95 %v, want 0.010", o.TPOTP95S)
	}
	// The window runs from the first start (0) to the last end (0.3 s).
	if math.Abs(o.AchievedRPS-20/0.3) > 1e-6 || math.Abs(o.GoodputTokS-15*11/0.3) > 1e-6 {
		t.Errorf("rates %v req/s, %v tok/s", o.AchievedRPS, o.GoodputTokS)
	}
}
