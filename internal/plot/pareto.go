package plot

import (
	"fmt"

	"gonum.org/v1/plot/plotter"

	"github.com/rehearse/rehearse/internal/contract"
)

// paretoPoint is one load of one server on the per-user against per-GPU
// plane.
type paretoPoint struct{ perGPU, perUser float64 }

// ParetoPerUser is a load's output tokens per second per user: 1 ÷ its
// median TPOT (the per-request decode rate once the first token is out),
// nil where no request had two output tokens.
func ParetoPerUser(a contract.Aggregate) *float64 {
	if a.TPOT.P50 == nil || *a.TPOT.P50 <= 0 {
		return nil
	}
	v := 1 / *a.TPOT.P50
	return &v
}

// paretoFigures draws, for each load mode, output tokens/s per user against
// output tokens/s per GPU (the serving Pareto view, SPEC §10): one point
// per load, one line per server whose GPU count the rehearsal file gives.
// A server without one has no point; with none, no figure is drawn.
func paretoFigures(d *data) ([]Figure, error) {
	var figs []Figure
	for _, m := range modes {
		series := map[string][]paretoPoint{}
		var xs, ys []float64
		for _, s := range d.servers {
			for _, a := range d.aggregates(s, m) {
				if a.GoodputPerGPU == nil || a.GoodputPerGPU.Median == nil {
					continue
				}
				u := ParetoPerUser(a)
				if u == nil {
					continue
				}
				series[s] = append(series[s], paretoPoint{*a.GoodputPerGPU.Median, *u})
				xs, ys = append(xs, *a.GoodputPerGPU.Median), append(ys, *u)
			}
		}
		if len(xs) == 0 {
			continue
		}
		name := "pareto" + m.suffix + ".svg"
		title := "Tokens/s per user against tokens/s per GPU"
		if m.suffix != "" {
			title += " (" + m.name + ")"
		}
		p := newPlot(title, "output tok/s per GPU (median goodput ÷ GPUs)", "output tok/s per user (1 ÷ median TPOT)")
		for _, s := range d.servers {
			pts := series[s]
			if len(pts) == 0 {
				continue
			}
			var xy plotter.XYs
			for _, pt := range pts {
				xy = append(xy, plotter.XY{X: pt.perGPU, Y: pt.perUser})
			}
			i := d.index[s]
			l, sc, err := plotter.NewLinePoints(xy)
			if err != nil {
				return nil, fmt.Errorf("%s: server %s: %w", name, s, err)
			}
			l.LineStyle = lineStyle(i)
			sc.GlyphStyle = glyphStyle(i)
			p.Add(l, sc)
			p.Legend.Add(s, l, sc)
		}
		p.X.Min, p.X.Max = 0, maxOf(xs)*1.05
		p.X.Tick.Marker = fixedTicks(linearTicks(p.X.Max)...)
		p.Y.Min, p.Y.Max = 0, maxOf(ys)*1.05
		p.Y.Tick.Marker = fixedTicks(linearTicks(p.Y.Max)...)
		headroom(&p.Y, len(series))
		caption := fmt.Sprintf("Each point is one load (%s) of one server: x is its median goodput ÷ the server's GPUs (the distinct GPUs of its gpus: sets), y is 1 ÷ its median TPOT, the output rate one user sees once the first token is out. Up and to the right is better; a line's points move right and down as the load grows. Servers whose GPU count the rehearsal file does not give have no line.", m.xLabel)
		doc, err := svg(title, p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		figs = append(figs, Figure{Name: name, Title: title, Caption: caption, SVG: doc})
	}
	return figs, nil
}
