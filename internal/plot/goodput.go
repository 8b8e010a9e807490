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
		f, ok, err := goodputFigure(d, m)
		if err != nil {
			return nil, err
		}
		if ok {
			figs = append(figs, f)
		}
	}
	return figs, nil
}

// goodputFigure is the goodput figure of mode m; false when no server has
// a goodput at a load of m.
func goodputFigure(d *data, m mode) (Figure, bool, error) {
	xs := d.xs(m)
	if len(xs) == 0 {
		return Figure{}, false, nil
	}
	name := "goodput" + m.suffix + ".svg"
	series, all := goodputSeries(d, m)
	if len(all) == 0 {
		return Figure{}, false, nil
	}
	title, window := goodputTitle(m)
	p := newPlot(title, m.xLabel, "goodput (tok/s)")
	sx, sy := xScale(xs), scale{log: logWorthy(all, 30)}
	for _, s := range d.servers {
		if err := spreadLayer(p, s, series[s], sx, sy, d.index[s]); err != nil {
			return Figure{}, false, fmt.Errorf("%s: server %s: %w", name, s, err)
		}
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
		return Figure{}, false, fmt.Errorf("%s: %w", name, err)
	}
	return Figure{Name: name, Title: title, Caption: caption, SVG: doc}, true, nil
}

// goodputSeries are each server's goodput at each load of m with a median,
// minimum and maximum, and every minimum and maximum (all).
func goodputSeries(d *data, m mode) (series map[string][]spreadPoint, all []float64) {
	series = map[string][]spreadPoint{}
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
	return series, all
}

// goodputTitle is the title of m's goodput figure, and the window its
// goodput is measured over, as the caption names it.
func goodputTitle(m mode) (title, window string) {
	switch m.name {
	case contract.ModeOpen:
		return "Goodput against request rate", "the wave's wall time"
	case contract.ModeSustained:
		return "Goodput against clients, sustained closed loop", "the measured window (first measured send to last measured end; warm-up requests excluded)"
	}
	return "Goodput against clients", "the wave's wall time"
}

// spreadLayer draws server s's points pts as a line through the medians,
// with markers and a bar from minimum to maximum, in server style i;
// nothing when pts is empty.
func spreadLayer(p *gplot.Plot, s string, pts []spreadPoint, sx, sy scale, i int) error {
	if len(pts) == 0 {
		return nil
	}
	var rp rangePoints
	for _, pt := range pts {
		rp.XYs = append(rp.XYs, plotter.XY{X: sx.v(pt.x), Y: sy.v(pt.median)})
		rp.lo = append(rp.lo, sy.v(pt.median)-sy.v(pt.min))
		rp.hi = append(rp.hi, sy.v(pt.max)-sy.v(pt.median))
	}
	l, sc, err := plotter.NewLinePoints(rp.XYs)
	if err != nil {
		return err
	}
	l.LineStyle = lineStyle(i)
	sc.GlyphStyle = glyphStyle(i)
	eb, err := plotter.NewYErrorBars(rp)
	if err != nil {
		return err
	}
	eb.LineStyle = lineStyle(i)
	eb.LineStyle.Dashes = nil
	eb.LineStyle.Width = vg.Points(1)
	p.Add(l, sc, eb)
	p.Legend.Add(s, l, sc)
	return nil
}

// ttftFigures draws p95 TTFT against clients (log scale where the servers
// differ by more than 10×) with the failure rate beside it, one line per
// server.
func ttftFigures(d *data) ([]Figure, error) {
	var figs []Figure
	for _, m := range modes {
		f, ok, err := ttftFigure(d, m)
		if err != nil {
			return nil, err
		}
		if ok {
			figs = append(figs, f)
		}
	}
	return figs, nil
}

// ttftFigure is the TTFT and failures figure of mode m; false when no
// server has a p95 TTFT at a load of m.
func ttftFigure(d *data, m mode) (Figure, bool, error) {
	xs := d.xs(m)
	if len(xs) == 0 {
		return Figure{}, false, nil
	}
	name := "ttft" + m.suffix + ".svg"
	pts := ttftSeries(d, m)
	if len(pts.ttfts) == 0 {
		return Figure{}, false, nil
	}
	title := "p95 TTFT and failure rate against " + loadName(m)
	pt := newPlot("p95 time to first token", m.xLabel, "p95 TTFT (s)")
	pf := newPlot("Failed requests", m.xLabel, "failure rate (% of attempts)")
	sx, sy := xScale(xs), scale{log: logWorthy(pts.ttfts, 10)}
	for _, s := range d.servers {
		i := d.index[s]
		if err := pointsLayer(pt, s, pts.ttft[s], sx, sy, i); err != nil {
			return Figure{}, false, fmt.Errorf("%s: server %s: %w", name, s, err)
		}
		if err := pointsLayer(pf, s, pts.failures[s], sx, scale{}, i); err != nil {
			return Figure{}, false, fmt.Errorf("%s: server %s: %w", name, s, err)
		}
	}
	setX(pt, sx, xs)
	setX(pf, sx, xs)
	if sy.log {
		setLog(&pt.Y, minOf(pts.ttfts), maxOf(pts.ttfts))
	} else {
		pt.Y.Min, pt.Y.Max = 0, maxOf(pts.ttfts)*1.05
		pt.Y.Tick.Marker = fixedTicks(linearTicks(pt.Y.Max)...)
	}
	headroom(&pt.Y, len(pts.ttft))
	pf.Y.Min, pf.Y.Max = 0, 100
	pf.Y.Tick.Marker = fixedTicks(0, 25, 50, 75, 100)
	headroom(&pf.Y, len(pts.failures))
	doc, err := svg(title, pt, pf)
	if err != nil {
		return Figure{}, false, fmt.Errorf("%s: %w", name, err)
	}
	return Figure{Name: name, Title: title, Caption: ttftCaption(sy.log, pts.missing), SVG: doc}, true, nil
}

// ttftPoints are the values of a TTFT figure, in data units.
type ttftPoints struct {
	ttft, failures map[string]plotter.XYs // server → p95 TTFT (s), failure rate (%) against load
	ttfts          []float64              // every p95 TTFT drawn
	missing        int                    // server×load points without a p95 TTFT
}

// ttftSeries are each server's p95 TTFT and failure rate at each load of m
// that has one.
func ttftSeries(d *data, m mode) ttftPoints {
	pts := ttftPoints{ttft: map[string]plotter.XYs{}, failures: map[string]plotter.XYs{}}
	for _, s := range d.servers {
		for _, a := range d.aggregates(s, m) {
			if a.TTFT.P95 != nil && *a.TTFT.P95 > 0 {
				pts.ttft[s] = append(pts.ttft[s], plotter.XY{X: m.x(a), Y: *a.TTFT.P95})
				pts.ttfts = append(pts.ttfts, *a.TTFT.P95)
			} else {
				pts.missing++
			}
			if a.Failures.Total > 0 {
				pts.failures[s] = append(pts.failures[s], plotter.XY{X: m.x(a), Y: 100 * a.Failures.Rate})
			}
		}
	}
	return pts
}

// loadName names the load on m's x axis, as a title says it.
func loadName(m mode) string {
	switch m.name {
	case contract.ModeOpen:
		return "request rate"
	case contract.ModeSustained:
		return "clients, sustained closed loop"
	}
	return "clients"
}

// pointsLayer draws server s's points xys (in data units) on scales sx and
// sy as a line with markers in server style i; nothing when xys is empty.
func pointsLayer(p *gplot.Plot, s string, xys plotter.XYs, sx, sy scale, i int) error {
	if len(xys) == 0 {
		return nil
	}
	scaled := make(plotter.XYs, len(xys))
	for k, v := range xys {
		scaled[k] = plotter.XY{X: sx.v(v.X), Y: sy.v(v.Y)}
	}
	l, sc, err := plotter.NewLinePoints(scaled)
	if err != nil {
		return err
	}
	l.LineStyle = lineStyle(i)
	sc.GlyphStyle = glyphStyle(i)
	p.Add(l, sc)
	p.Legend.Add(s, l, sc)
	return nil
}

// ttftCaption is a TTFT figure's caption: logAxis says whether its TTFT axis is
// a log scale, missing how many server×load points have no TTFT.
func ttftCaption(logAxis bool, missing int) string {
	axis := "linear"
	if logAxis {
		axis = "log scale"
	}
	caption := fmt.Sprintf("Top: the 95th percentile of time to first token over the successful requests of all repeats (%s; failures never enter it). Bottom: failed attempts ÷ all attempts over the repeats.", axis)
	if missing > 0 {
		caption += fmt.Sprintf(" %d server×load points have no successful request and so no TTFT point.", missing)
	}
	return caption
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
