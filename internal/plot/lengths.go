package plot

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"

	"github.com/rehearse/rehearse/internal/contract"
)

// lengthFigures draws the input and output token lengths of every server's
// recorded requests as histograms, one outline per server, pooled over all
// its loads and repeats as contract.TrafficLengths pools them: input over
// every attempt with a client count, output over the successful requests.
// One figure per bundle; a panel with no counts is left out.
func lengthFigures(d *data) ([]Figure, error) {
	pops := recordedLengths(d)
	const title = "Input and output lengths"
	var panels []*gplot.Plot
	var notes []string
	for _, pan := range lengthPopulations {
		var all []float64
		for _, s := range d.servers {
			all = append(all, pan.pop(pops[s])...)
		}
		if len(all) == 0 {
			notes = append(notes, fmt.Sprintf("%s: no request has a count.", pan.name))
			continue
		}
		b := lengthBins(all)
		p, err := lengthPanel(d, pops, pan, b)
		if err != nil {
			return nil, fmt.Errorf("lengths.svg: %w", err)
		}
		panels = append(panels, p)
		notes = append(notes, fmt.Sprintf("%s: %s.", pan.name, b.describe()))
	}
	if len(panels) == 0 {
		return nil, nil
	}
	caption := "Histograms of tokens per request over every recorded wave of each server (all loads and repeats pooled), one outline per server; the height of a bin is its share of the server's requests, so servers with different counts compare. Input is the prompt's message content as the client counted it, over every attempt with a count; output is output_tokens of the successful requests. " + strings.Join(notes, " ")
	doc, err := svg(title, panels...)
	if err != nil {
		return nil, fmt.Errorf("lengths.svg: %w", err)
	}
	return []Figure{{Name: "lengths.svg", Title: title, Caption: caption, SVG: doc}}, nil
}

// recordedLengths are each server's token lengths pooled over its recorded
// requests, as contract.TrafficLengths pools them.
func recordedLengths(d *data) map[string]*contract.TrafficLengths {
	pops := map[string]*contract.TrafficLengths{}
	for _, s := range d.servers {
		pops[s] = &contract.TrafficLengths{}
	}
	for _, r := range d.res.Records {
		if t := pops[r.Server]; t != nil && r.Kind == contract.KindRecorded {
			t.Add(r)
		}
	}
	return pops
}

// lengthPopulation is what one panel of the lengths figure draws: a length
// of the pooled requests, and whose (who) it is.
type lengthPopulation struct {
	name, label, who string
	pop              func(*contract.TrafficLengths) []float64
}

// lengthPopulations are the lengths figure's panels, top to bottom.
var lengthPopulations = []lengthPopulation{
	{"Input tokens per request", "input tokens (client-counted prompt content)", "attempts", func(t *contract.TrafficLengths) []float64 { return t.Input }},
	{"Output tokens per request", "output tokens (successful requests)", "successful requests", func(t *contract.TrafficLengths) []float64 { return t.Output }},
}

// lengthPanel is the panel of pan's histograms in bins b, an outline per
// server with a count.
func lengthPanel(d *data, pops map[string]*contract.TrafficLengths, pan lengthPopulation, b bins) (*gplot.Plot, error) {
	p := newPlot(pan.name, pan.label, "share of "+pan.who+" (%)")
	top := 0.0
	for _, s := range d.servers {
		xs := pan.pop(pops[s])
		if len(xs) == 0 {
			continue
		}
		xys, h := b.outline(xs)
		top = math.Max(top, h)
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, fmt.Errorf("server %s: %w", s, err)
		}
		l.LineStyle = lineStyle(d.index[s])
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%s (n=%d)", s, len(xs)), l)
	}
	lengthAxis(&p.X, b)
	p.Y.Min, p.Y.Max = 0, top*1.05
	p.Y.Tick.Marker = fixedTicks(linearTicks(p.Y.Max)...)
	headroom(&p.Y, len(d.servers))
	return p, nil
}

// lengthAxis sets a, a lengths panel's x axis, to span bins b: a log axis
// for log bins; else a bin of margin each side, with a tick at every count
// for a dozen unit bins or fewer, round ticks otherwise.
func lengthAxis(a *gplot.Axis, b bins) {
	lo, hi := b.edges[0], b.edges[len(b.edges)-1]
	if b.sx.log {
		setLog(a, lo, hi)
		return
	}
	// A bin of margin each side keeps the outermost bins off the axes.
	a.Min, a.Max = lo-b.width, hi+b.width
	var ticks []float64
	if b.width == 1 && hi-lo <= 12 {
		for v := lo + 0.5; v < hi; v++ {
			ticks = append(ticks, v)
		}
	} else {
		// Round ticks inside the range, labelled as whole counts.
		for _, v := range linearTicks(a.Max) {
			if v >= a.Min {
				ticks = append(ticks, v)
			}
		}
	}
	a.Tick.Marker = fixedTicks(ticks...)
}

// bins are the edges of a length histogram on its x scale.
type bins struct {
	edges []float64 // ascending, in tokens
	width float64   // linear bins: the width in tokens; 0 for log bins
	sx    scale
}

// maxUnitBins is the widest range of token counts drawn with a bin per
// count: a few short prompts of 5 to 40 tokens keep their exact lengths.
const maxUnitBins = 60

// lengthBins chooses bins for token counts: a bin per count where the
// counts span at most maxUnitBins values (the builtin prompts, fixed
// max_tokens); ten log-spaced bins a decade, edges between whole counts,
// where they span more than 20×
// (ShareGPT's 4 to 4,000 tokens); else about 30 linear bins of a round
// width (1, 2 or 5 × 10^k tokens) aligned on multiples of it.
func lengthBins(xs []float64) bins {
	lo, hi := minOf(xs), maxOf(xs)
	if hi-lo+1 <= maxUnitBins {
		var e []float64
		for v := math.Floor(lo) - 0.5; v <= math.Floor(hi)+0.5; v++ {
			e = append(e, v)
		}
		return bins{edges: e, width: 1}
	}
	if lo >= 1 && hi/lo > 20 {
		const perDecade = 10
		k0 := math.Floor(math.Log10(lo) * perDecade)
		k1 := math.Ceil(math.Log10(hi)*perDecade + 1e-9)
		// Edges fall between whole counts, so no bin is narrower than one
		// token (short lengths would otherwise leave empty bins between).
		var e []float64
		for k := k0; k <= k1; k++ {
			v := math.Round(math.Pow(10, k/perDecade)) - 0.5
			if len(e) == 0 || v > e[len(e)-1] {
				e = append(e, v)
			}
		}
		if last := e[len(e)-1]; last <= hi {
			e = append(e, math.Floor(hi)+0.5)
		}
		return bins{edges: e, sx: scale{log: true}}
	}
	raw := (hi - lo) / 30
	p := math.Pow10(int(math.Floor(math.Log10(raw))))
	w := 10 * p
	for _, m := range []float64{1, 2, 5} {
		if m*p >= raw {
			w = m * p
			break
		}
	}
	w = math.Max(1, math.Round(w))
	var e []float64
	for v := math.Floor(lo/w) * w; ; v += w {
		e = append(e, v)
		if v > hi {
			break
		}
	}
	return bins{edges: e, width: w}
}

// shares returns the percentage of xs in each bin; a value below the first
// edge (0 tokens on log bins) counts in the first bin.
func (b bins) shares(xs []float64) []float64 {
	out := make([]float64, len(b.edges)-1)
	for _, x := range xs {
		i := 0
		for i < len(out)-1 && x >= b.edges[i+1] {
			i++
		}
		out[i]++
	}
	for i := range out {
		out[i] *= 100 / float64(len(xs))
	}
	return out
}

// outline is the histogram of xs in b as a line, stepping over each bin
// at its share and closed to 0 at both ends, and the tallest share.
func (b bins) outline(xs []float64) (plotter.XYs, float64) {
	shares := b.shares(xs)
	top := 0.0
	xys := make(plotter.XYs, 0, 2*len(shares)+2)
	xys = append(xys, plotter.XY{X: b.sx.v(b.edges[0]), Y: 0})
	for k, h := range shares {
		xys = append(xys, plotter.XY{X: b.sx.v(b.edges[k]), Y: h}, plotter.XY{X: b.sx.v(b.edges[k+1]), Y: h})
		top = math.Max(top, h)
	}
	xys = append(xys, plotter.XY{X: b.sx.v(b.edges[len(b.edges)-1]), Y: 0})
	return xys, top
}

func (b bins) describe() string {
	switch {
	case b.sx.log:
		return "ten log-spaced bins a decade (log x axis; a count of 0 falls in the first bin)"
	case b.width == 1:
		return "a bin per token count"
	}
	return "bins of " + strconv.FormatFloat(b.width, 'f', -1, 64) + " tokens"
}
