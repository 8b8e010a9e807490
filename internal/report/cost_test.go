package report

import (
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/plot"
	"github.com/rehearse/rehearse/internal/plot/plottest"
)

func TestUSD(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	for _, c := range []struct {
		v    *float64
		want string
	}{{f(0.4812), "$0.481"}, {f(0.0123456), "$0.0123"}, {f(3.5), "$3.50"}, {f(1234.5), "$1234"}, {nil, dash}} {
		if got := USD(c.v); got != c.want {
			t.Errorf("USD(%v) = %q, want %q", c.v, got, c.want)
		}
	}
}

// A priced capacity bundle's README leads with each answer and its cost,
// shows the capacity figures in the capacity section (not among the
// others), and prices every aggregate in its cost section.
func TestCapacityReportWithCost(t *testing.T) {
	res := plottest.CapacityResults(plottest.DefaultCapacity())
	res.Provenance.Cost = &bundle.CostBasis{GPUHourUSD: 3.6, GPUs: 1}
	res.Recompute()
	figs, err := plot.Render(res)
	if err != nil {
		t.Fatal(err)
	}
	var refs []FigureRef
	for _, f := range figs {
		refs = append(refs, FigureRef{File: f.Name, Title: f.Title, Caption: f.Caption})
	}
	md := string(Markdown(res, refs, nil))
	capAt := strings.Index(md, "## Capacity under the SLO")
	figAt := strings.Index(md, "![Capacity search: attainment against clients](capacity.svg)")
	figuresAt := strings.Index(md, "## Figures")
	if capAt < 0 || figAt < capAt || (figuresAt >= 0 && figAt > figuresAt) {
		t.Errorf("capacity figure at %d, capacity section at %d, figures at %d", figAt, capAt, figuresAt)
	}
	if strings.Count(md, "(capacity.svg)") != 1 || strings.Count(md, "(capacity-latency.svg)") != 1 {
		t.Error("a capacity figure is linked other than once")
	}
	for _, c := range res.Capacity {
		e, _ := res.Cost.CapacityCostOf(c.Server)
		want := "At $3.60 per GPU-hour × 1 GPU, that is " + USD(e.USDPerMillionOutputTokens) + " per million output tokens"
		if !strings.Contains(md, CapacitySentence(c)+"** "+want) {
			t.Errorf("%s: README lacks %q after its sentence", c.Server, want)
		}
	}
	if !strings.Contains(md, "## Cost") || !strings.Contains(md, "Cost per million output tokens |") {
		t.Errorf("no cost table of the aggregates")
	}
	res.Provenance.Cost = nil
	res.Recompute()
	if md := string(Markdown(res, refs, nil)); strings.Contains(md, "per GPU-hour") || strings.Contains(md, "## Cost") {
		t.Error("an unpriced bundle shows cost")
	}
	page, err := HTML(res, Markdown(res, refs, nil), figs)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(page), "<title>Capacity search: attainment against clients</title>") != 1 {
		t.Error("report.html does not inline the capacity figure once")
	}
}

// A simulation's rates are of compressed time: the cost says so.
func TestCostOfASimulationSaysItsTimeScale(t *testing.T) {
	res := plottest.CapacityResults(plottest.DefaultCapacity())
	res.Provenance.Cost = &bundle.CostBasis{GPUHourUSD: 1, GPUs: 1}
	res.Provenance.Simulation.TimeScale = 10
	res.Recompute()
	if s := CapacityCostSentence(res, "batching"); !strings.Contains(s, "multiply the cost by 10 for simulated time") {
		t.Errorf("sentence %q", s)
	}
	if md := string(Markdown(res, nil, nil)); !strings.Contains(md, "The rates are on the wall clock of a simulation 10× faster") {
		t.Error("cost section does not name the time scale")
	}
}
