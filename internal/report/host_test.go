package report

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle/bundletest"
	"github.com/rehearse/rehearse/internal/contract"
)

// waveP95TTFT is the p95 TTFT of wave id's successful records.
func waveP95TTFT(t *testing.T, recs []contract.Record, id int) float64 {
	t.Helper()
	var xs []float64
	for _, r := range recs {
		if v, ok := r.TTFT(); ok && r.OK && r.Wave == id {
			xs = append(xs, v)
		}
	}
	slices.Sort(xs)
	p := contract.Percentile(xs, 0.95)
	if p == nil {
		t.Fatalf("wave %d has no TTFT", id)
	}
	return *p
}

// The load generator section warns of a client stall or a late simulator
// as large as a tenth of the wave's p95 TTFT, and of none smaller.
func TestHostStallsWarnWhenTheyCouldBendAFigure(t *testing.T) {
	res := bundletest.SeedLike()
	var recorded []int
	for i, w := range res.Waves {
		if w.Kind == contract.KindRecorded {
			recorded = append(recorded, i)
		}
	}
	big, small, simLate, lost := recorded[0], recorded[1], recorded[2], recorded[3]
	p95 := waveP95TTFT(t, res.Records, res.Waves[big].ID)
	res.Waves[big].ClientStalls = &contract.Stalls{PeriodS: 0.005, Ticks: 100, MaxS: 0.2 * p95, P99S: 0.001, Over: 1}
	res.Waves[small].ClientStalls = &contract.Stalls{PeriodS: 0.005, Ticks: 100, MaxS: 0.05 * waveP95TTFT(t, res.Records, res.Waves[small].ID)}
	res.Waves[simLate].ServerSlip = &contract.ServerSlip{Steps: 100, Late: 3, MaxS: waveP95TTFT(t, res.Records, res.Waves[simLate].ID)}
	res.Waves[lost].ServerSlip = &contract.ServerSlip{Steps: 100, SlipS: 0.25}
	warns := hostWarnings(res)
	joined := strings.Join(warns, "\n")
	if len(warns) != 3 {
		t.Errorf("want 3 warnings, got %q", joined)
	}
	for _, want := range []string{
		"wave " + itoa(res.Waves[big].ID) + " (", "the client stalled", "20% of the wave's p95 TTFT",
		"wave " + itoa(res.Waves[simLate].ID) + " (", "3 simulator steps ran over 20 ms late",
		"wave " + itoa(res.Waves[lost].ID) + " (", "lost 250.0 ms of its schedule",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("warnings %q do not contain %q", joined, want)
		}
	}
	if strings.Contains(joined, "wave "+itoa(res.Waves[small].ID)+" (") {
		t.Errorf("a stall of 5%% of p95 TTFT warned: %q", joined)
	}
	md := string(Markdown(res, nil, nil))
	if !strings.Contains(md, "| Client stalls | Simulator lateness |") || !strings.Contains(md, "- ⚠ ") {
		t.Error("the load generator section has no host columns or warnings")
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
