package plot

import (
	"fmt"
	"image/color"
	"math"
	"sort"
	"strconv"
	"strings"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/search"
)

// Figure files of a capacity search (SPEC §8), drawn when results.json has
// a capacity section.
const (
	CapacityFigure        = "capacity.svg"
	CapacityLatencyFigure = "capacity-latency.svg"
)

// IsCapacityFigure reports whether name is one of the capacity figures,
// which the report shows in its capacity section rather than among the
// others.
func IsCapacityFigure(name string) bool {
	return name == CapacityFigure || name == CapacityLatencyFigure
}

// Verdict styles: a probe's verdict is told by its marker's shape and
// colour alike, so it reads in grey print too.
var (
	passColour  = color.NRGBA{0x00, 0x9E, 0x73, 0xff} // bluish green
	failColour  = color.NRGBA{0xD5, 0x5E, 0x00, 0xff} // vermillion
	bracketFill = color.NRGBA{0xE6, 0x9F, 0x00, 0x40} // translucent orange
	verdicts    = []struct {
		name  string
		style draw.GlyphStyle
	}{
		{search.VerdictPass, draw.GlyphStyle{Color: passColour, Radius: vg.Points(3.5), Shape: draw.CircleGlyph{}}},
		{search.VerdictFail, draw.GlyphStyle{Color: failColour, Radius: vg.Points(4), Shape: draw.CrossGlyph{}}},
		{search.VerdictUnresolved, draw.GlyphStyle{Color: grey, Radius: vg.Points(3.5), Shape: draw.RingGlyph{}}},
		{search.VerdictScreened, draw.GlyphStyle{Color: grey, Radius: vg.Points(3.5), Shape: draw.TriangleGlyph{}}},
	}
)

// dodge is the x offset, in octaves, between probes at the same load (the
// re-runs of the final points), so that each one's marker and whisker show.
const dodge = 0.06

// log2Axis sets a, which shows log2 of the load, to span lo..hi (loads)
// with a labelled tick at every power of two, and at the probed loads
// themselves when they are few.
func log2Axis(a *gplot.Axis, lo, hi float64, loads []int) {
	e0 := math.Floor(math.Log2(lo))
	e1 := math.Ceil(math.Log2(hi))
	if e1 <= e0 {
		e1 = e0 + 1
	}
	a.Min, a.Max = e0-0.35, e1+0.35
	labelled := map[float64]bool{}
	var ticks gplot.ConstantTicks
	add := func(v float64) {
		if labelled[v] {
			return
		}
		labelled[v] = true
		ticks = append(ticks, gplot.Tick{Value: math.Log2(v), Label: strconv.FormatFloat(v, 'g', -1, 64)})
	}
	for e := e0; e <= e1; e++ {
		add(math.Pow(2, e))
	}
	if len(loads) <= 6 && e1-e0 <= 4 {
		for _, l := range loads {
			add(float64(l))
		}
	}
	sort.Slice(ticks, func(i, j int) bool { return ticks[i].Value < ticks[j].Value })
	a.Tick.Marker = ticks
}

// loadRange is the smallest and largest load of probes, and the loads.
func loadRange(cs []search.Capacity) (lo, hi float64, loads []int) {
	lo, hi = math.Inf(1), math.Inf(-1)
	seen := map[int]bool{}
	for _, c := range cs {
		for _, p := range c.Probes {
			if p.Load < 1 {
				continue
			}
			lo, hi = math.Min(lo, float64(p.Load)), math.Max(hi, float64(p.Load))
			if !seen[p.Load] {
				seen[p.Load] = true
				loads = append(loads, p.Load)
			}
		}
	}
	sort.Ints(loads)
	return lo, hi, loads
}

// dodged returns each probe's x (log2 of its load), offset by dodge per
// earlier probe at the same load and centred on the load.
func dodged(probes []search.ProbeRecord) []float64 {
	count := map[int]int{}
	for _, p := range probes {
		count[p.Load]++
	}
	seen := map[int]int{}
	out := make([]float64, len(probes))
	for i, p := range probes {
		k := seen[p.Load]
		seen[p.Load]++
		out[i] = math.Log2(float64(p.Load)) + dodge*(float64(k)-float64(count[p.Load]-1)/2)
	}
	return out
}

// intervalPoints are probes' attainments with their Wilson intervals.
type intervalPoints struct {
	plotter.XYs
	lo, hi []float64
}

func (r intervalPoints) YError(i int) (float64, float64) { return r.lo[i], r.hi[i] }

// capacityFigures draws, when the results have a capacity search, the
// attainment of every probe against its load with its 95 % Wilson interval,
// the target α and the final bracket (one panel per server), and the p95
// TTFT and TPOT of every probe against load with the objectives.
func capacityFigures(d *data) ([]Figure, error) {
	var cs []search.Capacity
	for _, c := range d.res.Capacity {
		if len(c.Probes) > 0 {
			cs = append(cs, c)
		}
	}
	if len(cs) == 0 {
		return nil, nil
	}
	a, err := attainmentFigure(d, cs)
	if err != nil {
		return nil, err
	}
	figs := []Figure{a}
	l, ok, err := capacityLatencyFigure(d, cs)
	if err != nil {
		return nil, err
	}
	if ok {
		figs = append(figs, l)
	}
	return figs, nil
}

func attainmentFigure(d *data, cs []search.Capacity) (Figure, error) {
	name := CapacityFigure
	title := "Capacity search: attainment against clients"
	var panels []*gplot.Plot
	for _, c := range cs {
		p, err := attainmentPanel(c)
		if err != nil {
			return Figure{}, fmt.Errorf("%s: server %s: %w", name, c.Server, err)
		}
		panels = append(panels, p)
	}
	caption := "Every probe of the search, in its verdict's marker: its attainment (requests that succeeded and met every objective ÷ requests measured) with the 95% Wilson interval as a whisker. A probe passes when the whole interval lies above the dashed target α, fails when it lies wholly below, and is unresolved otherwise (or below min_requests). The shaded band is the final bracket between the largest load that passed and the smallest that did not; where the search has only one of them, an orange line marks it. X axis: clients on a log₂ scale; re-runs at one load are drawn side by side."
	if anyScreened(cs) {
		caption += " A triangle is a screen of the doubling (a round or a few, able only to fail a load) that did not fail its load: screened, never a pass."
	}
	for _, c := range cs {
		if c.Predicted != nil {
			caption += " Dotted grey lines are the bracket predicted for the server (from a fitted profile, say), probed first."
			break
		}
	}
	doc, err := svg(title, panels...)
	if err != nil {
		return Figure{}, fmt.Errorf("%s: %w", name, err)
	}
	return Figure{Name: name, Title: title, Caption: caption, SVG: doc}, nil
}

// attainmentPanel is one server's panel of the attainment figure: its
// bracket, its predicted bracket, the target and every probe.
func attainmentPanel(c search.Capacity) (*gplot.Plot, error) {
	p := newPlot(fmt.Sprintf("%s: attainment of each probe", c.Server), "clients (sustained closed loop, log₂ scale)", "requests meeting every objective")
	lo, hi, loads := loadRange([]search.Capacity{c})
	log2Axis(&p.X, lo, hi, loads)
	// The bracket first, so that the points lie over it.
	entries, err := bracketLayer(p, c)
	if err != nil {
		return nil, err
	}
	n, err := predictedLayer(p, c.Predicted)
	if err != nil {
		return nil, err
	}
	entries += n
	alpha, err := plotter.NewLine(plotter.XYs{{X: p.X.Min, Y: c.AttainmentTarget}, {X: p.X.Max, Y: c.AttainmentTarget}})
	if err != nil {
		return nil, err
	}
	alpha.LineStyle = draw.LineStyle{Color: color.Gray{0x33}, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(5), vg.Points(3)}}
	p.Add(alpha)
	p.Legend.Add(fmt.Sprintf("target α = %s", pctLabel(c.AttainmentTarget)), alpha)
	entries++
	n, err = probeLayers(p, c.Probes)
	if err != nil {
		return nil, err
	}
	entries += n
	p.Y.Min, p.Y.Max = 0, 1
	p.Y.Tick.Marker = percentTicks(0, 0.25, 0.5, 0.75, 1)
	headroom(&p.Y, entries)
	return p, nil
}

// bracketLayer draws c's final bracket as a band, or the one end it has
// as a line, and returns the legend entries it added.
func bracketLayer(p *gplot.Plot, c search.Capacity) (int, error) {
	switch {
	case c.MaxPass != nil && c.MinFail != nil:
		x0, x1 := math.Log2(float64(*c.MaxPass)), math.Log2(float64(*c.MinFail))
		band, err := plotter.NewPolygon(plotter.XYs{{X: x0, Y: 0}, {X: x1, Y: 0}, {X: x1, Y: 1}, {X: x0, Y: 1}})
		if err != nil {
			return 0, err
		}
		band.Color = bracketFill
		band.LineStyle.Width = 0
		p.Add(band)
		p.Legend.Add(fmt.Sprintf("bracket: passes at %d, not at %d", *c.MaxPass, *c.MinFail), band)
		return 1, nil
	case c.MaxPass != nil || c.MinFail != nil:
		v, what := c.MaxPass, "largest pass"
		if c.StopReason == search.StopMaxConcurrency {
			what = "passes up to the search's maximum"
		}
		if v == nil {
			v, what = c.MinFail, "smallest load that did not pass"
		}
		x := math.Log2(float64(*v))
		edge, err := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: 1}})
		if err != nil {
			return 0, err
		}
		edge.LineStyle = draw.LineStyle{Color: color.NRGBA{0xE6, 0x9F, 0x00, 0xff}, Width: vg.Points(3)}
		p.Add(edge)
		p.Legend.Add(fmt.Sprintf("%s: %d", what, *v), edge)
		return 1, nil
	}
	return 0, nil
}

// predictedLayer draws a predicted bracket's ends as dotted lines, one
// legend entry for both.
func predictedLayer(p *gplot.Plot, pr *search.Bracket) (int, error) {
	if pr == nil {
		return 0, nil
	}
	entries := 0
	for _, v := range []int{pr.MaxPass, pr.MinFail} {
		if v < 1 {
			continue
		}
		x := math.Log2(float64(v))
		edge, err := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: 1}})
		if err != nil {
			return 0, err
		}
		edge.LineStyle = draw.LineStyle{Color: grey, Width: vg.Points(1.2), Dashes: []vg.Length{vg.Points(2), vg.Points(2)}}
		p.Add(edge)
		if entries == 0 {
			entries = 1
			p.Legend.Add(fmt.Sprintf("predicted bracket: passes at %d, fails at %d", pr.MaxPass, pr.MinFail), edge)
		}
	}
	return entries, nil
}

// probeLayers draws every probe at its attainment with its interval, one
// layer (and legend entry) per verdict.
func probeLayers(p *gplot.Plot, probes []search.ProbeRecord) (int, error) {
	entries := 0
	xs := dodged(probes)
	for _, v := range verdicts {
		var pts intervalPoints
		for i, pr := range probes {
			if pr.Verdict != v.name {
				continue
			}
			pts.XYs = append(pts.XYs, plotter.XY{X: xs[i], Y: pr.Attainment})
			pts.lo = append(pts.lo, math.Max(0, pr.Attainment-pr.CILow))
			pts.hi = append(pts.hi, math.Max(0, pr.CIHigh-pr.Attainment))
		}
		if len(pts.XYs) == 0 {
			continue
		}
		eb, err := plotter.NewYErrorBars(pts)
		if err != nil {
			return 0, err
		}
		eb.LineStyle = draw.LineStyle{Color: v.style.Color, Width: vg.Points(1.2)}
		sc, err := plotter.NewScatter(pts.XYs)
		if err != nil {
			return 0, err
		}
		sc.GlyphStyle = v.style
		p.Add(eb, sc)
		p.Legend.Add(fmt.Sprintf("%s (%d)", v.name, len(pts.XYs)), sc)
		entries++
	}
	return entries, nil
}

func pctLabel(f float64) string { return strconv.FormatFloat(100*f, 'g', 4, 64) + "%" }

// percentTicks labels fractions as percentages.
func percentTicks(vs ...float64) gplot.ConstantTicks {
	t := make(gplot.ConstantTicks, len(vs))
	for i, v := range vs {
		t[i] = gplot.Tick{Value: v, Label: pctLabel(v)}
	}
	return t
}

// capacityLatencyFigure draws p95 TTFT (top) and p95 TPOT (bottom) of every
// probe against load, one series per server joined through the median of
// its probes at each load, with each objective set as a horizontal line.
func capacityLatencyFigure(d *data, cs []search.Capacity) (Figure, bool, error) {
	name := CapacityLatencyFigure
	title := "Capacity search: p95 TTFT and TPOT against clients"
	var panels []*gplot.Plot
	objectives := false
	for _, m := range latencyMetrics {
		p, objective, err := latencyPanel(d, cs, m)
		if err != nil {
			return Figure{}, false, fmt.Errorf("%s: %w", name, err)
		}
		if p == nil {
			continue
		}
		panels = append(panels, p)
		objectives = objectives || objective
	}
	if len(panels) == 0 {
		return Figure{}, false, nil
	}
	doc, err := svg(title, panels...)
	if err != nil {
		return Figure{}, false, fmt.Errorf("%s: %w", name, err)
	}
	return Figure{Name: name, Title: title, Caption: capacityLatencyCaption(objectives), SVG: doc}, true, nil
}

// latencyMetric is what one panel of the capacity latency figure draws: a
// p95 of each probe and the SLO objective that bounds it.
type latencyMetric struct {
	name, label, objective string
	value                  func(search.ProbeRecord) *float64
	limitMS                func(contract.Objectives) *float64
}

// latencyMetrics are the capacity latency figure's panels, top to bottom.
var latencyMetrics = []latencyMetric{
	{"p95 time to first token", "p95 TTFT (s)", contract.ObjTTFT, func(p search.ProbeRecord) *float64 { return p.TTFTP95S }, func(o contract.Objectives) *float64 { return o.TTFTMS }},
	{"p95 time per output token", "p95 TPOT (s per token after the first)", contract.ObjTPOT, func(p search.ProbeRecord) *float64 { return p.TPOTP95S }, func(o contract.Objectives) *float64 { return o.TPOTMS }},
}

// latencyPanel is the panel of m against clients: each server's probes with
// a line through their medians, and the objectives set; nil when neither a
// probe nor an objective has a value. objective reports whether an
// objective line is drawn.
func latencyPanel(d *data, cs []search.Capacity, m latencyMetric) (p *gplot.Plot, objective bool, err error) {
	p = newPlot(fmt.Sprintf("%s of each probe", m.name), "clients (sustained closed loop, log₂ scale)", m.label)
	lo, hi, loads := loadRange(cs)
	log2Axis(&p.X, lo, hi, loads)
	all, limits := latencyValues(cs, m)
	if len(all) == 0 {
		return nil, false, nil
	}
	sy := scale{log: logWorthy(all, 10)}
	entries := 0
	for _, c := range cs {
		n, err := probeLatencyLayer(p, c, m, sy, d.index[c.Server])
		if err != nil {
			return nil, false, fmt.Errorf("server %s: %w", c.Server, err)
		}
		entries += n
	}
	n, err := objectiveLayer(p, m.objective, limits, sy)
	if err != nil {
		return nil, false, err
	}
	entries += n
	if sy.log {
		setLog(&p.Y, minOf(all), maxOf(all))
	} else {
		p.Y.Min, p.Y.Max = 0, maxOf(all)*1.05
		p.Y.Tick.Marker = fixedTicks(linearTicks(p.Y.Max)...)
	}
	headroom(&p.Y, entries)
	return p, n > 0, nil
}

// latencyValues are every positive value of m that a panel spans, the
// objectives' included, and each objective set (s) with the servers whose
// objective it is.
func latencyValues(cs []search.Capacity, m latencyMetric) (all []float64, limits map[float64][]string) {
	limits = map[float64][]string{}
	for _, c := range cs {
		if l := m.limitMS(c.Objectives); l != nil && *l > 0 {
			limits[*l/1000] = append(limits[*l/1000], c.Server)
			all = append(all, *l/1000)
		}
		for _, pr := range c.Probes {
			if v := m.value(pr); v != nil && *v > 0 {
				all = append(all, *v)
			}
		}
	}
	return all, limits
}

// probeLatencyLayer draws c's probes' values of m as markers, in server
// style i, with a line through their median at each load, and returns the
// legend entries it added (0 when no probe has a value).
func probeLatencyLayer(p *gplot.Plot, c search.Capacity, m latencyMetric, sy scale, i int) (int, error) {
	byLoad := map[int][]float64{}
	var pts plotter.XYs
	xs := dodged(c.Probes)
	for k, pr := range c.Probes {
		if v := m.value(pr); v != nil && *v > 0 {
			pts = append(pts, plotter.XY{X: xs[k], Y: sy.v(*v)})
			byLoad[pr.Load] = append(byLoad[pr.Load], *v)
		}
	}
	if len(pts) == 0 {
		return 0, nil
	}
	var line plotter.XYs
	for _, l := range sortedKeys(byLoad) {
		vs := byLoad[l]
		sort.Float64s(vs)
		line = append(line, plotter.XY{X: math.Log2(float64(l)), Y: sy.v(median(vs))})
	}
	ln, err := plotter.NewLine(line)
	if err != nil {
		return 0, err
	}
	ln.LineStyle = lineStyle(i)
	sc, err := plotter.NewScatter(pts)
	if err != nil {
		return 0, err
	}
	sc.GlyphStyle = glyphStyle(i)
	p.Add(ln, sc)
	p.Legend.Add(c.Server, ln, sc)
	return 1, nil
}

// objectiveLayer draws each objective of limits as a dash-dotted line
// across p, named for its servers when they differ, and returns the legend
// entries it added.
func objectiveLayer(p *gplot.Plot, objective string, limits map[float64][]string, sy scale) (int, error) {
	entries := 0
	for _, lim := range sortedFloatKeys(limits) {
		ref, err := plotter.NewLine(plotter.XYs{{X: p.X.Min, Y: sy.v(lim)}, {X: p.X.Max, Y: sy.v(lim)}})
		if err != nil {
			return 0, err
		}
		ref.LineStyle = draw.LineStyle{Color: color.Gray{0x33}, Width: vg.Points(1.2), Dashes: []vg.Length{vg.Points(7), vg.Points(3), vg.Points(2), vg.Points(3)}}
		p.Add(ref)
		label := fmt.Sprintf("objective %s ≤ %s", objective, contract.FormatMS(lim*1000))
		if len(limits) > 1 {
			label += " (" + strings.Join(limits[lim], ", ") + ")"
		}
		p.Legend.Add(label, ref)
		entries++
	}
	return entries, nil
}

// capacityLatencyCaption is the capacity latency figure's caption; objectives
// says whether any objective line is drawn.
func capacityLatencyCaption(objectives bool) string {
	caption := "The 95th percentile of time to first token (top) and of time per output token (bottom) over the successful measured requests of each probe, one marker per probe; the line joins each server's median at every load probed."
	if objectives {
		caption += " A dash-dotted black line is an objective of the SLO; only the objectives set are drawn."
	} else {
		caption += " The SLO sets neither a TTFT nor a TPOT objective, so no objective line is drawn."
	}
	return caption + " X axis: clients on a log₂ scale; a log y axis is used where the values differ by more than 10×."
}

func sortedKeys(m map[int][]float64) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}

func sortedFloatKeys(m map[float64][]string) []float64 {
	out := make([]float64, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Float64s(out)
	return out
}

// median of sorted vs (not empty).
func median(vs []float64) float64 {
	n := len(vs)
	if n%2 == 1 {
		return vs[n/2]
	}
	return (vs[n/2-1] + vs[n/2]) / 2
}

// anyScreened reports whether a probe of cs was screened.
func anyScreened(cs []search.Capacity) bool {
	for _, c := range cs {
		for _, p := range c.Probes {
			if p.Verdict == search.VerdictScreened {
				return true
			}
		}
	}
	return false
}
