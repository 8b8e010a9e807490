package compare

import (
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
)

func judged(t *testing.T, r *bundle.Results, expr string) {
	t.Helper()
	o, err := contract.ParseObjectives(expr)
	if err != nil {
		t.Fatal(err)
	}
	r.SLO = contract.NewSLO(o, 0.95)
	r.Recompute()
}

// B's batching server decodes 25% slower: against a TPOT objective between
// the two speeds its attainment falls, and the attainment gate trips there.
func TestAttainmentGate(t *testing.T) {
	a, b := pair(true)
	var tpot float64
	for _, x := range a.Aggregates {
		if x.Server == "batching" && x.Concurrency == 1 {
			tpot = *x.TPOT.P99 * 1000 * 1.1
		}
	}
	expr := "tpot<=" + contract.FormatMS(tpot)
	judged(t, a, expr)
	judged(t, b, expr)
	r := compareSides(side{res: a}, side{res: b}, mustGates(t, "attainment<-2%", "naive:attainment<-10pp", "slo_goodput<-50%"))
	tripped := strings.Join(r.Tripped(), "\n")
	if !strings.Contains(tripped, "attainment<-2%: batching at 1 client: 100.0% → ") {
		t.Errorf("the attainment gate did not trip on batching at 1 client: %q", tripped)
	}
	if strings.Contains(tripped, "naive:attainment") {
		t.Errorf("the naive server's attainment gate tripped: %q", tripped)
	}
	for _, g := range r.Gates {
		if g.Evaluated == 0 {
			t.Errorf("gate %s evaluated on no row", g.Gate.Text)
		}
	}
}

func TestAttainmentGateWithoutObjectives(t *testing.T) {
	a, b := pair(false)
	r := compareSides(side{res: a}, side{res: b}, mustGates(t, "attainment<-2%"))
	g := r.Gates[0]
	if g.Evaluated != 0 || len(g.Skipped) == 0 || !strings.Contains(g.Skipped[0], "A and B has no attainment (no objectives, or no request)") {
		t.Errorf("evaluated %d, skipped %q", g.Evaluated, g.Skipped)
	}
	judged(t, b, "ttft<=1s")
	if r := compareSides(side{res: a}, side{res: b}, nil); len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "SLO objectives differ: A none, B ttft<=1s at 0.95") {
		t.Errorf("notes %q", r.Notes)
	}
}
