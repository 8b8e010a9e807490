package rehearsal

import (
	"context"
	"math"
	"net/http/httptest"
	"testing"

	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/promscrape"
	"github.com/rehearse/rehearse/internal/sim"
	"github.com/rehearse/rehearse/internal/sim/engine"
)

// TestSimClockReadsTheSimulatorsPage reads a live simulator's /metrics:
// it is a simulator's, and two readings with nothing between them say
// nothing happened.
func TestSimClockReadsTheSimulatorsPage(t *testing.T) {
	s, err := sim.New(sim.Options{Engine: engine.Batching, TimeScale: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	sc := promscrape.Scraper{URL: hs.URL + "/metrics"}
	a, ok := scrapeSimClock(context.Background(), sc)
	if !ok || a.scale != 4 || len(a.bounds) < 2 || !math.IsInf(a.bounds[len(a.bounds)-1], 1) {
		t.Fatalf("reading %+v, ok %v; want the simulator's clock at scale 4", a, ok)
	}
	b, _ := scrapeSimClock(context.Background(), sc)
	if got, ok := slipBetween(a, b); !ok || *got != (contract.ServerSlip{}) {
		t.Errorf("an idle simulator between two readings: %+v, ok %v; want all zero", got, ok)
	}
	if _, ok := scrapeSimClock(context.Background(), promscrape.Scraper{URL: hs.URL + "/health"}); ok {
		t.Error("a page without the simulator's series read as a simulator's clock")
	}
}

func TestSlipBetween(t *testing.T) {
	inf := math.Inf(1)
	bounds := []float64{0.001, 0.005, 0.02, 0.05, 0.1, inf}
	a := simClock{steps: 100, slipS: 1, scale: 10, latenessMax: 7, bounds: bounds, cum: []uint64{90, 95, 98, 99, 100, 100}}
	// 50 more steps: 40 on time, 6 by at most 20 ms, 3 up to 50 ms, one
	// up to 100 ms; 2 simulated seconds lost.
	b := simClock{steps: 150, slipS: 3, scale: 10, latenessMax: 7, bounds: bounds, cum: []uint64{130, 135, 144, 148, 150, 150}}
	got, ok := slipBetween(a, b)
	want := contract.ServerSlip{Steps: 50, Late: 4, MaxS: 0.1, SlipS: 0.2}
	if !ok || got.Steps != want.Steps || got.Late != want.Late || got.MaxS != want.MaxS || math.Abs(got.SlipS-want.SlipS) > 1e-12 {
		t.Errorf("slip %+v, want %+v", got, want)
	}
	// A step beyond the last bound: the simulator's largest lateness.
	c := b
	c.cum = []uint64{130, 135, 144, 148, 150, 151}
	c.steps = 151
	if got, _ := slipBetween(a, c); got.MaxS != 7 || got.Late != 5 {
		t.Errorf("a step past the last bound: %+v, want max 7 s, 5 late", got)
	}
	// A restarted simulator's counters went down.
	if _, ok := slipBetween(b, a); ok {
		t.Error("readings whose counters went down were taken for one wave")
	}
}
