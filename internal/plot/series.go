package plot

import (
	"fmt"
	"math"
	"sort"
	"strconv"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
)

// mechanismFigures draws the mechanism-check series: the polled metric (by
// default running requests) against time, with the wave's client count.
func mechanismFigures(d *data) ([]Figure, error) {
	m := d.res.MechanismCheck
	if m != nil && m.RestsOnClient() && m.Client != nil {
		return clientMechanismFigures(d, m)
	}
	if m == nil || len(m.Series) == 0 {
		return nil, nil
	}
	xys, dropped := finiteSeries(m.Series)
	if len(xys) == 0 {
		return nil, nil
	}
	title := fmt.Sprintf("Mechanism check: %s on %s", m.Metric, m.Server)
	p, parts, err := mechanismPanel(d, m, title, xys)
	if err != nil {
		return nil, err
	}
	doc, err := svg(title, p)
	if err != nil {
		return nil, fmt.Errorf("mechanism.svg: %w", err)
	}
	return []Figure{{Name: "mechanism.svg", Title: title, Caption: mechanismCaption(m, parts, dropped), SVG: doc}}, nil
}

// finiteSeries is a polled series's finite samples in time order, and how
// many it left out (a scrape may report NaN or ±Inf).
func finiteSeries(series [][2]float64) (xys plotter.XYs, dropped int) {
	for _, pt := range series {
		if !finite(pt[0]) || !finite(pt[1]) {
			dropped++
			continue
		}
		xys = append(xys, plotter.XY{X: pt[0], Y: pt[1]})
	}
	sort.SliceStable(xys, func(i, j int) bool { return xys[i].X < xys[j].X })
	return xys, dropped
}

// mechanismPanel is the mechanism check's panel: the polled sum xys as a
// solid step line, the parts of the sum dashed, and the wave's clients.
// parts reports whether any part is drawn.
func mechanismPanel(d *data, m *bundle.MechanismCheck, title string, xys plotter.XYs) (p *gplot.Plot, parts bool, err error) {
	p = newPlot(title, "time since the wave's release (s)", m.Metric)
	l, err := plotter.NewLine(xys)
	if err != nil {
		return nil, false, fmt.Errorf("mechanism.svg: %w", err)
	}
	i, ok := d.index[m.Server]
	if !ok {
		i = 0
	}
	l.LineStyle = lineStyle(i)
	l.LineStyle.Dashes = nil
	l.StepStyle = plotter.PostStep
	p.Add(l)
	p.Legend.Add(fmt.Sprintf("%s, polled every %s s", m.Metric, strconv.FormatFloat(m.PeriodS, 'g', 4, 64)), l)
	ymax := maxOf(xyValues(xys).ys())
	// The parts of the sum: each replica's series, or each label set's
	// (vLLM's engine="0", engine="1"), thinner and dashed.
	ps, err := mechanismParts(m, i)
	if err != nil {
		return nil, false, err
	}
	for _, pt := range ps {
		p.Add(pt.line)
		p.Legend.Add(pt.name, pt.line)
		ymax = math.Max(ymax, pt.max)
	}
	if m.Concurrency > 0 {
		if err := clientsLayer(p, m.Concurrency, xys[0].X, xys[len(xys)-1].X); err != nil {
			return nil, false, fmt.Errorf("mechanism.svg: %w", err)
		}
		if c := float64(m.Concurrency); c > ymax {
			ymax = c
		}
	}
	p.X.Min, p.X.Max = math.Min(0, xys[0].X), xys[len(xys)-1].X
	p.X.Tick.Marker = fixedTicks(linearTicks(p.X.Max)...)
	p.Y.Min, p.Y.Max = 0, ymax*1.05
	p.Y.Tick.Marker = fixedTicks(linearTicks(p.Y.Max)...)
	headroom(&p.Y, 2)
	return p, len(ps) > 0, nil
}

// clientsLayer draws the wave's client count as a grey dashed line from
// time x0 to x1.
func clientsLayer(p *gplot.Plot, clients int, x0, x1 float64) error {
	c := float64(clients)
	ref, err := plotter.NewLine(plotter.XYs{{X: x0, Y: c}, {X: x1, Y: c}})
	if err != nil {
		return err
	}
	ref.LineStyle.Color = grey
	ref.LineStyle.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(ref)
	p.Legend.Add(fmt.Sprintf("clients in the wave (%d)", clients), ref)
	return nil
}

// mechanismCaption is the mechanism figure's caption: parts says whether
// the parts of the sum are drawn, dropped how many samples are not.
func mechanismCaption(m *bundle.MechanismCheck, parts bool, dropped int) string {
	caption := fmt.Sprintf("%s polled from %s's /metrics during a separate %d-client wave that is not part of the results table", m.Metric, m.Server, m.Concurrency)
	if m.Max != nil {
		caption += fmt.Sprintf("; observed maximum %s", strconv.FormatFloat(*m.Max, 'g', 6, 64))
	}
	caption += "."
	if parts {
		caption += " The solid line is the sum; each dashed line one part of it (a replica of the server, or a label set of the metric such as vLLM's engine=\"0\")."
	}
	if m.Errors > 0 {
		caption += fmt.Sprintf(" %d scrapes failed and are absent from the series.", m.Errors)
	}
	if dropped > 0 {
		caption += fmt.Sprintf(" %d samples were not finite numbers and are not drawn.", dropped)
	}
	return caption
}

// clientMechanismFigures draws the mechanism check that rests on the
// client's records (no server metric read): the requests streaming and
// the requests in flight against time.
func clientMechanismFigures(d *data, m *bundle.MechanismCheck) ([]Figure, error) {
	c := m.Client
	if len(c.InFlight) == 0 {
		return nil, nil
	}
	title := fmt.Sprintf("Mechanism check: requests streaming on %s (client records)", m.Server)
	p := newPlot(title, "time since the wave's release (s)", "requests")
	i, ok := d.index[m.Server]
	if !ok {
		i = 0
	}
	end := c.InFlight[len(c.InFlight)-1][0]
	for k, s := range []struct {
		name   string
		series [][2]float64
	}{
		{"streaming (first content received, not ended)", c.Streaming},
		{"in flight (sent, not ended)", c.InFlight},
	} {
		xys := plotter.XYs{{X: 0, Y: 0}}
		for _, pt := range s.series {
			xys = append(xys, plotter.XY{X: pt[0], Y: pt[1]})
		}
		xys = append(xys, plotter.XY{X: end, Y: 0})
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, fmt.Errorf("mechanism.svg: %w", err)
		}
		l.LineStyle = lineStyle(i)
		l.LineStyle.Dashes = nil
		if k == 1 {
			l.LineStyle.Color = grey
			l.LineStyle.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		l.StepStyle = plotter.PostStep
		p.Add(l)
		p.Legend.Add(s.name, l)
	}
	ymax := float64(max(c.InFlightMax, m.Concurrency, 1))
	p.X.Min, p.X.Max = 0, end
	p.X.Tick.Marker = fixedTicks(linearTicks(p.X.Max)...)
	p.Y.Min, p.Y.Max = 0, ymax*1.05
	p.Y.Tick.Marker = fixedTicks(linearTicks(p.Y.Max)...)
	headroom(&p.Y, 2)
	caption := fmt.Sprintf("No server metric was read: the client's own records of a separate %d-client wave on %s, not part of the results table. "+
		"A request streams from its first content to its end; at most %d streamed at once, of at most %d in flight.", m.Concurrency, m.Server, c.StreamingMax, c.InFlightMax)
	doc, err := svg(title, p)
	if err != nil {
		return nil, fmt.Errorf("mechanism.svg: %w", err)
	}
	return []Figure{{Name: "mechanism.svg", Title: title, Caption: caption, SVG: doc}}, nil
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

type xyValues plotter.XYs

func (xys xyValues) ys() []float64 {
	out := make([]float64, len(xys))
	for i, p := range xys {
		out[i] = p.Y
	}
	return out
}

// cdfFigures draws the TTFT and TPOT distributions (empirical CDFs) per
// server at the highest concurrency of the closed-loop waves (cdf.svg) and
// of the sustained ones (cdf-sustained.svg), pooled over the successful
// requests of its recorded repeats, as the contract pools them.
func cdfFigures(d *data) ([]Figure, error) {
	var figs []Figure
	for _, m := range []string{contract.ModeClosed, contract.ModeSustained} {
		fs, err := cdfFigure(d, m)
		if err != nil {
			return nil, err
		}
		figs = append(figs, fs...)
	}
	return figs, nil
}

func cdfFigure(d *data, mode string) ([]Figure, error) {
	top := topConcurrency(d, mode)
	if top == 0 {
		return nil, nil
	}
	ttft, tpot := cdfPopulations(d, mode, top)
	file, load := "cdf.svg", fmt.Sprintf("%d clients", top)
	if mode == contract.ModeSustained {
		file, load = "cdf-sustained.svg", fmt.Sprintf("%d clients, sustained", top)
	}
	title := fmt.Sprintf("TTFT and TPOT distributions at %s", load)
	var panels []*gplot.Plot
	var absent []string
	for _, pan := range []struct {
		name, label string
		pop         map[string][]float64
	}{
		{"Time to first token", "TTFT (s)", ttft},
		{"Time per output token", "TPOT (s per token after the first)", tpot},
	} {
		p, err := cdfPanel(d, fmt.Sprintf("%s, %s", pan.name, load), pan.label, pan.pop)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if p == nil {
			absent = append(absent, pan.name)
			continue
		}
		panels = append(panels, p)
	}
	if len(panels) == 0 {
		return nil, nil
	}
	doc, err := svg(title, panels...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return []Figure{{Name: file, Title: title, Caption: cdfCaption(d, mode, load, ttft, tpot, absent), SVG: doc}}, nil
}

// topConcurrency is the highest concurrency of the recorded waves of mode
// (0: none).
func topConcurrency(d *data, mode string) int {
	top := 0
	for _, w := range d.res.Waves {
		wm := w.Mode
		if wm == "" {
			wm = contract.ModeClosed
		}
		if w.Kind == contract.KindRecorded && wm == mode && w.Concurrency > top {
			top = w.Concurrency
		}
	}
	return top
}

// cdfPopulations are each server's TTFTs and TPOTs of its successful
// requests at load top of mode: PooledLatencies's, without pooling its
// every inter-chunk gap (a hundred floats a record), which no panel draws.
func cdfPopulations(d *data, mode string, top int) (ttft, tpot map[string][]float64) {
	ttft, tpot = map[string][]float64{}, map[string][]float64{}
	for _, s := range d.servers {
		contract.EachPooled(d.res.Waves, d.res.Records, contract.Key{Server: s, Mode: mode, Concurrency: top}, func(r contract.Record) {
			if !r.OK {
				return
			}
			if v, ok := r.TTFT(); ok {
				ttft[s] = append(ttft[s], v)
			}
			if v, ok := r.TPOT(); ok {
				tpot[s] = append(tpot[s], v)
			}
		})
	}
	return ttft, tpot
}

// cdfPanel is one panel of empirical CDFs, a line per server; nil when no
// server has a value.
func cdfPanel(d *data, title, label string, pop map[string][]float64) (*gplot.Plot, error) {
	p := newPlot(title, label, "fraction of successful requests ≤ x")
	var all []float64
	for _, s := range d.servers {
		all = append(all, pop[s]...)
	}
	if len(all) == 0 {
		return nil, nil
	}
	sx := scale{log: logWorthy([]float64{minOf(all), maxOf(all)}, 30)}
	for _, s := range d.servers {
		xs := pop[s]
		if len(xs) == 0 {
			continue
		}
		xys := ecdf(xs)
		for k := range xys {
			xys[k].X = sx.v(xys[k].X)
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, fmt.Errorf("server %s: %w", s, err)
		}
		l.LineStyle = lineStyle(d.index[s])
		l.StepStyle = plotter.PostStep
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%s (n=%d)", s, len(xs)), l)
	}
	p.Y.Min, p.Y.Max = 0, 1
	p.Y.Tick.Marker = fixedTicks(0, 0.25, 0.5, 0.75, 1)
	headroom(&p.Y, len(d.servers))
	if sx.log {
		setLog(&p.X, minOf(all), maxOf(all))
	} else {
		p.X.Min, p.X.Max = 0, maxOf(all)*1.05
		p.X.Tick.Marker = fixedTicks(linearTicks(p.X.Max)...)
	}
	return p, nil
}

// cdfCaption is the CDF figure's caption at load of mode.
func cdfCaption(d *data, mode, load string, ttft, tpot map[string][]float64, absent []string) string {
	var missing []string
	for _, s := range d.servers {
		if len(ttft[s]) == 0 {
			missing = append(missing, s)
		}
	}
	step := "a step per request"
	for _, s := range d.servers {
		if len(ttft[s]) > cdfMaxPoints || len(tpot[s]) > cdfMaxPoints {
			step = fmt.Sprintf("a step per request, or, for a server with more than %d, a step at each of %d order statistics evenly spaced in rank (the smallest and largest included; every table figure is computed from all requests)", cdfMaxPoints, cdfMaxPoints)
			break
		}
	}
	caption := fmt.Sprintf("Empirical CDFs over the successful requests of every recorded repeat at %s, the highest concurrency; %s. TTFT = first content − send; TPOT = (end − first content) ÷ (output tokens − 1). A log x axis is used where the servers differ by more than 30×.", load, step)
	if mode == contract.ModeSustained {
		caption += " Measured requests only; the warm-up is not in them."
	}
	for _, a := range absent {
		caption += fmt.Sprintf(" %s: no request qualifies.", a)
	}
	if len(missing) > 0 {
		caption += fmt.Sprintf(" No successful request at %s for: %v.", load, missing)
	}
	return caption
}

// cdfMaxPoints is the most steps a CDF is drawn with: a server with more
// successful requests is drawn through cdfMaxPoints of its order
// statistics, evenly spaced in rank (the smallest and the largest among
// them), so that a figure's size does not grow with the bundle's.
const cdfMaxPoints = 512

// ecdf returns the steps of the empirical CDF of xs, starting from 0: a
// step per value, or, beyond cdfMaxPoints values, a step at each of
// cdfMaxPoints order statistics evenly spaced in rank, each at its exact
// height (rank ÷ n), so no drawn point is off the true CDF.
func ecdf(xs []float64) plotter.XYs {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	idx := func(k int) int { return k }
	m := n
	if n > cdfMaxPoints {
		m = cdfMaxPoints
		idx = func(k int) int { return int(math.Round(float64(k) * float64(n-1) / float64(m-1))) }
	}
	out := make(plotter.XYs, 0, m+1)
	out = append(out, plotter.XY{X: s[0], Y: 0})
	for k := 0; k < m; k++ {
		i := idx(k)
		out = append(out, plotter.XY{X: s[i], Y: float64(i+1) / float64(n)})
	}
	return out
}

// mechanismPart is one part of the mechanism check's sum, drawn.
type mechanismPart struct {
	name string
	line *plotter.Line
	max  float64
}

// mechanismParts are the lines of each replica's series (a server of
// several) or each label set's (one process whose metric has several).
func mechanismParts(m *bundle.MechanismCheck, colour int) ([]mechanismPart, error) {
	type named struct {
		name   string
		series [][2]float64
	}
	var src []named
	for _, rs := range m.Replicas {
		src = append(src, named{fmt.Sprintf("replica %d", rs.Replica), rs.Series})
	}
	if len(src) == 0 {
		for _, ls := range m.LabelSets {
			src = append(src, named{"{" + ls.Labels + "}", ls.Series})
		}
	}
	var out []mechanismPart
	for k, n := range src {
		xys, _ := finiteSeries(n.series)
		if len(xys) == 0 {
			continue
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, fmt.Errorf("mechanism.svg: %s: %w", n.name, err)
		}
		l.LineStyle = lineStyle(colour + 1 + k)
		l.LineStyle.Width = vg.Points(1)
		l.LineStyle.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
		l.StepStyle = plotter.PostStep
		out = append(out, mechanismPart{name: n.name, line: l, max: maxOf(xyValues(xys).ys())})
	}
	return out, nil
}
