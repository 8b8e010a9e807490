package plot

import (
	"fmt"
	"math"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/rehearse/rehearse/internal/contract"
)

// rangePoints are medians with their [min–max] as error bars.
type rangePoints struct {
	plotter.XYs
	lo, hi []float64 // distance below and above the median, in axis units
}

func (r rangePoints) YError(i int) (float64, float64) { return r.lo[i], r.hi[i] }

// spreadPoint is one server's goodput at one load, in data units.
type spreadPoint struct{ x, median, min, max float64 }

// goodputFigures draws goodput against clients (a figure for closed-loop
// waves, one for the sustained closed loop, and one against request rate for
// open-loop aggregates): one line per server, median of the repeats with the
// min–max range as error bars.
func goodputFigures(d *data) ([]Figure, error) {
	var figs []Figure
	for _, m := range modes {
		xs := d.xs(m)
		if len(xs) == 0 {
			continue
		}
		name := "goodput" + m.suffix + ".svg"
		series := map[string][]spreadPoint{}
		var all []float64
		for _, s := range d.servers {
			for _, a := range d.aggregates(s, m) {
				g := a.Goodput
				if g.Median == nil || g.Min == nil || g.Max == nil {
					continue
				}
				series[s] = append(series[s], spreadPoint{m.x(a), *g.Median, *g.Min, *g.Max})
				all = append(all, *g.Min, *g.Max)
			}
		}
		if len(all) == 0 {
			continue
		}
		title := "Goodput against clients"
		window := "the wave's wall time"
		switch m.name {
		case contract.ModeOpen:
			title = "Goodput against request rate"
		case contract.ModeSustained:
			title = "Goodput against clients, sustained closed loop"
			window = "the measured window (first measured send to last measured end; warm-up requests excluded)"
		}
		p := newPlot(title, m.xLabel, "goodput (tok/s)")
		sx, sy := xScale(xs), scale{log: logWorthy(all, 30)}
		for _, s := range d.servers {
			pts := series[s]
			if len(pts) == 0 {
				continue
			}
			var rp rangePoints
			for _, pt := range pts {
				rp.XYs = append(rp.XYs, plotter.XY{X: sx.v(pt.x), Y: sy.v(pt.median)})
				rp.lo = append(rp.lo, sy.v(pt.median)-sy.v(pt.min))
				rp.hi = append(rp.hi, sy.v(pt.max)-sy.v(pt.median))
			}
			i := d.index[s]
			l, sc, err := plotter.NewLinePoints(rp.XYs)
			if err != nil {
				return nil, fmt.Errorf("%s: server %s: %w", name, s, err)
			}
			l.LineStyle = lineStyle(i)
			sc.GlyphStyle = glyphStyle(i)
			eb, err := plotter.NewYErrorBars(rp)
			if err != nil {
				return nil, fmt.Errorf("%s: server %s: %w", name, s, err)
			}
			eb.LineStyle = lineStyle(i)
			eb.LineStyle.Dashes = nil
			eb.LineStyle.Width = vg.Points(1)
			p.Add(l, sc, eb)
			p.Legend.Add(s, l, sc)
		}
		setX(p, sx, xs)
		axis := "linear"
		if sy.log {
			setLog(&p.Y, minOf(all), maxOf(all))
			axis = "log scale, so that every server's range stays visible"
		} else {
			p.Y.Min = 0
			p.Y.Max = maxOf(all) * 1.05
			p.Y.Tick.Marker = fixedTicks(linearTicks(p.Y.Max)...)
		}
		headroom(&p.Y, len(series))
		caption := fmt.Sprintf("Goodput: output tokens of successful requests ÷ %s. Each point is the median of the recorded repeats; the bar spans their minimum to maximum. Y axis: %s.", window, axis)
		doc, err := svg(title, p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		figs = append(figs, Figure{Name: name, Title: title, Caption: caption, SVG: doc})
	}
	return figs, nil
}

// ttftFigures draws p95 TTFT against clients (log scale where the servers
// differ by more than 10×) with the failure rate beside it, one line per
// server.
func ttftFigures(d *data) ([]Figure, error) {
	var figs []Figure
	for _, m := range modes {
		xs := d.xs(m)
		if len(xs) == 0 {
			continue
		}
		name := "ttft" + m.suffix + ".svg"
		what := "clients"
		switch m.name {
		case contract.ModeOpen:
			what = "request rate"
		case contract.ModeSustained:
			what = "clients, sustained closed loop"
		}
		tp, fp := map[string]plotter.XYs{}, map[string]plotter.XYs{}
		var ttfts []float64
		missing := 0
		for _, s := range d.servers {
			for _, a := range d.aggregates(s, m) {
				if a.TTFT.P95 != nil && *a.TTFT.P95 > 0 {
					tp[s] = append(tp[s], plotter.XY{X: m.x(a), Y: *a.TTFT.P95})
					ttfts = append(ttfts, *a.TTFT.P95)
				} else {
					missing++
				}
				if a.Failures.Total > 0 {
					fp[s] = append(fp[s], plotter.XY{X: m.x(a), Y: 100 * a.Failures.Rate})
				}
			}
		}
		if len(ttfts) == 0 {
			continue
		}
		title := "p95 TTFT and failure rate against " + what
		pt := newPlot("p95 time to first token", m.xLabel, "p95 TTFT (s)")
		pf := newPlot("Failed requests", m.xLabel, "failure rate (% of attempts)")
		sx, sy := xScale(xs), scale{log: logWorthy(ttfts, 10)}
		for _, s := range d.servers {
			i := d.index[s]
			for _, pair := range []struct {
				p   *gplot.Plot
				xys plotter.XYs
				sy  scale
			}{{pt, tp[s], sy}, {pf, fp[s], scale{}}} {
				if len(pair.xys) == 0 {
					continue
				}
				xys := make(plotter.XYs, len(pair.xys))
				for k, v := range pair.xys {
					xys[k] = plotter.XY{X: sx.v(v.X), Y: pair.sy.v(v.Y)}
				}
				l, sc, err := plotter.NewLinePoints(xys)
				if err != nil {
					return nil, fmt.Errorf("%s: server %s: %w", name, s, err)
				}
				l.LineStyle = lineStyle(i)
				sc.GlyphStyle = glyphStyle(i)
				pair.p.Add(l, sc)
				pair.p.Legend.Add(s, l, sc)
			}
		}
		setX(pt, sx, xs)
		setX(pf, sx, xs)
		axis := "linear"
		if sy.log {
			setLog(&pt.Y, minOf(ttfts), maxOf(ttfts))
			axis = "log scale"
		} else {
			pt.Y.Min, pt.Y.Max = 0, maxOf(ttfts)*1.05
			pt.Y.Tick.Marker = fixedTicks(linearTicks(pt.Y.Max)...)
		}
		headroom(&pt.Y, len(tp))
		pf.Y.Min, pf.Y.Max = 0, 100
		pf.Y.Tick.Marker = fixedTicks(0, 25, 50, 75, 100)
		headroom(&pf.Y, len(fp))
		caption := fmt.Sprintf("Top: the 95th percentile of time to first token over the successful requests of all repeats (%s; failures never enter it). Bottom: failed attempts ÷ all attempts over the repeats.", axis)
		if missing > 0 {
			caption += fmt.Sprintf(" %d server×load points have no successful request and so no TTFT point.", missing)
		}
		doc, err := svg(title, pt, pf)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		figs = append(figs, Figure{Name: name, Title: title, Caption: caption, SVG: doc})
	}
	return figs, nil
}

func minOf(xs []float64) float64 {
	m := math.Inf(1)
	for _, x := range xs {
		m = math.Min(m, x)
	}
	return m
}

func maxOf(xs []float64) float64 {
	m := math.Inf(-1)
	for _, x := range xs {
		m = math.Max(m, x)
	}
	return m
}
