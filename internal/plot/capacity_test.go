package plot

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/golden"
	"github.com/rehearse/rehearse/internal/plot/plottest"
	"github.com/rehearse/rehearse/internal/search"
)

func TestCapacityFiguresGolden(t *testing.T) {
	res := plottest.CapacityResults(plottest.DefaultCapacity())
	if probs := bundle.VerifyResults(res); len(probs) > 0 {
		t.Fatalf("synthetic capacity results do not verify: %v", probs)
	}
	for _, c := range res.Capacity {
		t.Logf("%s: max_pass %v min_fail %v stop %s, %d probes", c.Server, deref(c.MaxPass), deref(c.MinFail), c.StopReason, len(c.Probes))
	}
	figs := render(t, res)
	for _, n := range []string{CapacityFigure, CapacityLatencyFigure} {
		f, ok := figs[n]
		if !ok {
			t.Fatalf("%s missing; figures %v", n, names(figs))
		}
		got := fmt.Sprintf("name %s\ntitle %s\ncaption %s\n%s", f.Name, f.Title, f.Caption, structure(t, f.SVG))
		golden.Check(t, strings.TrimSuffix(n, ".svg")+".golden", []byte(got))
	}
}

func deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

// Each probe is drawn in its verdict's marker: the legend counts them, and
// the α line and the bracket are named.
func TestCapacityAttainmentMarksVerdicts(t *testing.T) {
	res := plottest.CapacityResults(plottest.DefaultCapacity())
	doc := string(render(t, res)[CapacityFigure].SVG)
	for _, c := range res.Capacity {
		n := map[string]int{}
		for _, p := range c.Probes {
			n[p.Verdict]++
		}
		for v, k := range n {
			if !strings.Contains(doc, fmt.Sprintf(">%s (%d)</text>", v, k)) {
				t.Errorf("%s: legend lacks %s (%d)", c.Server, v, k)
			}
		}
		if c.MaxPass == nil || c.MinFail == nil {
			t.Fatalf("%s: fixture should have a bracket", c.Server)
		}
		if want := fmt.Sprintf(">bracket: passes at %d, not at %d</text>", *c.MaxPass, *c.MinFail); !strings.Contains(doc, want) {
			t.Errorf("%s: no %q", c.Server, want)
		}
	}
	if got := strings.Count(doc, ">target α = 95%</text>"); got != 2 {
		t.Errorf("%d α legends, want one per server", got)
	}
	// Pass markers are filled bluish-green circles, one per pass and one
	// per legend entry.
	passes := 0
	for _, c := range res.Capacity {
		for _, p := range c.Probes {
			if p.Verdict == "pass" {
				passes++
			}
		}
	}
	if got := strings.Count(doc, "fill:#009E73"); got != passes+len(res.Capacity) {
		t.Errorf("%d filled pass markers, want %d probes + %d legend entries", got, passes, len(res.Capacity))
	}
}

// Only the objectives the SLO sets are drawn; a search with no pass shows
// its smallest failing load alone.
func TestCapacityObjectivesOnlyWhenSet(t *testing.T) {
	o := plottest.DefaultCapacity()
	o.Objectives = "ttft<=2s"
	o.Servers = o.Servers[:1]
	res := plottest.CapacityResults(o)
	doc := string(render(t, res)[CapacityLatencyFigure].SVG)
	if !strings.Contains(doc, ">objective ttft ≤ 2s</text>") || strings.Contains(doc, "objective tpot") {
		t.Errorf("latency figure should draw the TTFT objective only")
	}
	o.Objectives = "ttft<=1ms"
	res = plottest.CapacityResults(o)
	if c := res.Capacity[0]; c.MaxPass != nil || c.StopReason != "unmet_at_minimum" {
		t.Fatalf("fixture: %+v", c)
	}
	figs := render(t, res)
	if !strings.Contains(string(figs[CapacityFigure].SVG), ">smallest load that did not pass: 1</text>") {
		t.Errorf("an unmet search does not mark its failing load")
	}
}

func TestNoCapacityNoCapacityFigures(t *testing.T) {
	for n := range render(t, plottest.Results(plottest.Default())) {
		if IsCapacityFigure(n) {
			t.Errorf("%s drawn without a capacity search", n)
		}
	}
}

// A predicted bracket, probed first, is drawn beside the measured one.
func TestCapacityPredictedBracket(t *testing.T) {
	o := plottest.DefaultCapacity()
	o.Servers = o.Servers[1:]
	o.Spec.Predicted = &search.Bracket{MaxPass: 128, MinFail: 192}
	res := plottest.CapacityResults(o)
	if p := res.Capacity[0].Predicted; p == nil || p.MaxPass != 128 {
		t.Fatalf("fixture: predicted %+v", p)
	}
	doc := string(render(t, res)[CapacityFigure].SVG)
	if !strings.Contains(doc, ">predicted bracket: passes at 128, fails at 192</text>") {
		t.Error("no predicted bracket in the legend")
	}
	o.Spec.Predicted = nil
	if doc := string(render(t, plottest.CapacityResults(o))[CapacityFigure].SVG); strings.Contains(doc, "predicted") {
		t.Error("a predicted bracket drawn without a prediction")
	}
}
