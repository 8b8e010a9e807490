package report

import (
	"bytes"
	"fmt"
	"math"

	"github.com/rehearse/rehearse/internal/bundle"
)

// USD formats dollars: cents from $1 up, three significant figures below.
func USD(v *float64) string {
	if v == nil {
		return dash
	}
	switch x := *v; {
	case x >= 1000:
		return fmt.Sprintf("$%.0f", x)
	case x >= 1:
		return fmt.Sprintf("$%.2f", x)
	case x > 0:
		return "$" + fmt.Sprintf("%.*f", 2-int(math.Floor(math.Log10(x))), x)
	}
	return fmt.Sprintf("$%.2f", *v)
}

// CostBasisText is the price the cost figures rest on: "$3.50 per
// GPU-hour × 2 GPUs".
func CostBasisText(c bundle.CostBasis) string {
	gpus := "1 GPU"
	if c.GPUs != 1 {
		gpus = fmt.Sprintf("%d GPUs", c.GPUs)
	}
	return fmt.Sprintf("%s per GPU-hour × %s", USD(&c.GPUHourUSD), gpus)
}

// CapacityCostSentence prices server's capacity answer, "" when the bundle
// has no price or the answer none: "At $3.50 per GPU-hour × 1 GPU, that
// is $0.48 per million output tokens (at 2,040 good tok/s)."
func CapacityCostSentence(res *bundle.Results, server string) string {
	e, ok := res.Cost.CapacityCostOf(server)
	if !ok || res.Provenance.Cost == nil {
		return ""
	}
	basis := CostBasisText(*res.Provenance.Cost)
	if e.USDPerMillionOutputTokens == nil || e.GoodputTokS == nil {
		return fmt.Sprintf("At %s, no cost per token: no load passed with good tokens.", basis)
	}
	return fmt.Sprintf("At %s, that is %s per million output tokens (of good requests, at %.0f good tok/s%s).", basis, USD(e.USDPerMillionOutputTokens), *e.GoodputTokS, simulatedRates(res))
}

// simulatedRates warns that a simulation's rates are wall-clock rates of
// compressed time, so its cost per token is too: "" for real servers.
func simulatedRates(res *bundle.Results) string {
	sim := res.Provenance.Simulation
	if sim == nil || sim.TimeScale == 0 || sim.TimeScale == 1 {
		return ""
	}
	return fmt.Sprintf(" on the wall clock of a simulation %s× faster than simulated time: multiply the cost by %s for simulated time", Number(sim.TimeScale), Number(sim.TimeScale))
}

// CostTable prices every aggregate's median goodput: server, load, goodput,
// cost per million output tokens.
func CostTable(res *bundle.Results) Section {
	sec := Section{Columns: []Column{
		{Head: "Server", Short: "server"}, {Head: "Load", Short: "load"},
		{Head: "Goodput, median tok/s", Short: "goodput tok/s"}, {Head: "Cost per million output tokens", Short: "$/M tok"},
	}}
	if res.Cost == nil {
		return sec
	}
	for _, a := range res.Cost.Aggregates {
		g := dash
		if a.GoodputTokS != nil {
			g = fmt.Sprintf("%.1f", *a.GoodputTokS)
		}
		sec.Rows = append(sec.Rows, []string{a.Server, a.Load, g, USD(a.USDPerMillionOutputTokens)})
	}
	return sec
}

// writeCost is README.md's cost section: the price, then every aggregate
// priced at its median goodput.
func writeCost(b *bytes.Buffer, res *bundle.Results) {
	if res.Provenance.Cost == nil || res.Cost == nil {
		return
	}
	b.WriteString("## Cost\n\n")
	fmt.Fprintf(b, "Priced at %s, as given on the command line (`provenance.cost`): cost per million output tokens = price per GPU-hour × GPUs ÷ (output tokens per second × 3600) × 10⁶. ", CostBasisText(*res.Provenance.Cost))
	b.WriteString("A capacity answer is priced at its good-token rate (output tokens of requests that met every objective); a load below at its median goodput (output tokens of successful requests). `rehearse verify` recomputes every figure.")
	if s := simulatedRates(res); s != "" {
		fmt.Fprintf(b, " The rates are%s.", s)
	}
	b.WriteString("\n\n")
	if sec := CostTable(res); len(sec.Rows) > 0 {
		b.Write(sec.Markdown())
		b.WriteString("\n")
	}
}
