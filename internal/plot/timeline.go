package plot

import (
	"fmt"
	"image/color"
	"math"
	"sort"
	"strconv"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/rehearse/rehearse/internal/contract"
)

// timelineTarget is the concurrency whose wave the timeline shows: with 8
// clients both serialization (a staircase) and batching (overlapping bars)
// are visible at a glance.
const timelineTarget = 8

// timelineFigures draws, per server, one recorded closed-loop wave at the
// concurrency closest to 8: one bar per request from send to end of stream;
// and, per server with sustained waves, one sustained wave the same way with
// a row per client, its requests one after another along the row.
func timelineFigures(d *data) ([]Figure, error) {
	var figs []Figure
	taken := map[string]bool{}
	for _, sustained := range []bool{false, true} {
		for _, s := range d.servers {
			f, ok, err := d.timelineFigure(s, sustained, taken)
			if err != nil {
				return nil, err
			}
			if ok {
				figs = append(figs, f)
			}
		}
	}
	return figs, nil
}

// timelineFigure draws server s's timeline wave of one mode, closed or
// sustained; false when s has none with records. taken holds the file
// names given so far, so that no two servers share one.
func (d *data) timelineFigure(s string, sustained bool, taken map[string]bool) (Figure, bool, error) {
	modeName := contract.ModeClosed
	if sustained {
		modeName = contract.ModeSustained
	}
	w, ok := d.timelineWave(s, modeName)
	if !ok {
		return Figure{}, false, nil
	}
	recs, fails := sortedBySend(d.byWave[w.ID])
	if len(recs) == 0 {
		return Figure{}, false, nil
	}
	all := len(recs)
	recs = sampleRequests(recs)
	tl := newTimeline(recs, w.Concurrency, sustained, palette[d.index[s]%len(palette)])
	title := fmt.Sprintf("%s: every request of the %d-client wave", s, w.Concurrency)
	if sustained {
		title = fmt.Sprintf("%s: every measured request of the %d-client sustained wave", s, w.Concurrency)
	}
	caption := timelineCaption(s, w, sustained, all, len(recs), fails)
	doc, err := svg(title, timelinePanel(s, w, tl, sustained, fails > 0))
	if err != nil {
		return Figure{}, false, fmt.Errorf("timeline of %s: %w", s, err)
	}
	return Figure{Name: timelineName(s, sustained, taken) + ".svg", Title: title, Caption: caption, SVG: doc}, true, nil
}

// sortedBySend is a copy of a wave's records in order of sending (then of
// client), and how many of them failed.
func sortedBySend(wave []contract.Record) (recs []contract.Record, fails int) {
	recs = append([]contract.Record(nil), wave...)
	sort.SliceStable(recs, func(i, j int) bool {
		if recs[i].StartS != recs[j].StartS {
			return recs[i].StartS < recs[j].StartS
		}
		return recs[i].Client < recs[j].Client
	})
	for _, r := range recs {
		if !r.OK {
			fails++
		}
	}
	return recs, fails
}

// newTimeline lays recs (in order of sending) out in rows, in colour: a row
// per request of a closed wave, the first on top; a row per client of a
// sustained one, numbered as the records number them.
func newTimeline(recs []contract.Record, concurrency int, sustained bool, colour color.Color) *timeline {
	tl := &timeline{color: colour}
	if sustained {
		tl.n = concurrency
		for _, r := range recs {
			tl.n = max(tl.n, r.Client+1)
		}
		for _, r := range recs {
			tl.rows = append(tl.rows, timelineRow{y: float64(tl.n - 1 - r.Client), rec: r})
		}
		return tl
	}
	tl.n = len(recs)
	for i, r := range recs {
		tl.rows = append(tl.rows, timelineRow{y: float64(len(recs) - 1 - i), rec: r})
	}
	return tl
}

// timelinePanel is the panel of tl, server s's wave w, with its legend
// (failures: a failed request is drawn) and its axes.
func timelinePanel(s string, w contract.Wave, tl *timeline, sustained, failures bool) *gplot.Plot {
	p := newPlot(fmt.Sprintf("%s — %d-client wave, repeat %d", s, w.Concurrency, w.Repeat), "time since the wave's release (s)", "request, in order of sending")
	if sustained {
		p = newPlot(fmt.Sprintf("%s — %d clients, sustained, repeat %d", s, w.Concurrency, w.Repeat), "time since the first measured send (s)", "client")
	}
	p.Add(tl)
	timelineLegend(p, tl.color, failures)
	// The legend sits top right, in room kept free beyond the last end.
	p.Legend.Top, p.Legend.Left = true, false
	xmin, xmax, _, _ := tl.DataRange()
	p.X.Min, p.X.Max = xmin, xmin+(xmax-xmin)*1.6
	p.X.Tick.Marker = fixedTicks(linearTicks(xmax)...)
	p.Y.Min, p.Y.Max = -0.6, float64(tl.n)-0.4
	p.Y.Tick.Marker = rowTicks(tl.n)
	return p
}

// timelineLegend adds the legend of a timeline's parts: waiting, streaming
// (in colour), first content and, with failures, failed.
func timelineLegend(p *gplot.Plot, colour color.Color, failures bool) {
	p.Legend.Add("waiting", thumb(func(c *draw.Canvas) {
		y := (c.Min.Y + c.Max.Y) / 2
		c.StrokeLine2(waitStyle, c.Min.X, y, c.Max.X, y)
	}))
	p.Legend.Add("streaming", thumb(func(c *draw.Canvas) {
		y := (c.Min.Y + c.Max.Y) / 2
		fillRect(c, colour, c.Min.X, y-vg.Points(3.5), c.Max.X, y+vg.Points(3.5))
	}))
	p.Legend.Add("first content", thumb(func(c *draw.Canvas) {
		x, y := (c.Min.X+c.Max.X)/2, (c.Min.Y+c.Max.Y)/2
		c.StrokeLine2(firstStyle, x, y-vg.Points(5), x, y+vg.Points(5))
	}))
	if failures {
		p.Legend.Add("failed", thumb(func(c *draw.Canvas) {
			y := (c.Min.Y + c.Max.Y) / 2
			fillRect(c, failed, c.Min.X, y-vg.Points(3.5), c.Max.X, y+vg.Points(3.5))
		}))
	}
}

// timelineCaption is the caption of server s's timeline of wave w, which
// has all requests, drawn of them and fails failed.
func timelineCaption(s string, w contract.Wave, sustained bool, all, drawn, fails int) string {
	caption := fmt.Sprintf("One bar per request of %s's %d-client wave (repeat %d), from its send to the end of its stream: the thin grey part is waiting for the first content (black tick), the coloured part streaming. Overlapping bars mean requests were served together (batching); a staircase means one at a time (serialization).", s, w.Concurrency, w.Repeat)
	if sustained {
		caption = fmt.Sprintf("One row per client of %s's %d-client sustained wave (repeat %d, its %d measured requests; the warm-up is not drawn), one bar per request from its send to the end of its stream: the thin grey part is waiting for the first content (black tick), the coloured part streaming. A client sends its next request as its last one ends, so rows without gaps mean %d requests were in flight throughout.", s, w.Concurrency, w.Repeat, all, w.Concurrency)
	}
	if fails > 0 {
		caption += fmt.Sprintf(" %d of %d requests failed (red, ending where the client gave up).", fails, all)
	}
	if drawn < all {
		caption += fmt.Sprintf(" The wave has %d requests: %d of them are drawn, evenly spaced in order of sending (the first and the last included), so the figure's size does not grow with the wave's.", all, drawn)
	}
	if w.Concurrency != timelineTarget {
		kind := "client wave was"
		if sustained {
			kind = "client sustained wave was"
		}
		caption += fmt.Sprintf(" No %d-%s recorded; %d clients is the closest.", timelineTarget, kind, w.Concurrency)
	}
	return caption
}

// timelineName is server s's timeline file name, without ".svg", marked
// taken: "timeline-<s>" or "timeline-sustained-<s>", numbered from 2 where
// two server names reduce to one file name ("a b", "a_b").
func timelineName(s string, sustained bool, taken map[string]bool) string {
	base := "timeline-" + fileName(s)
	if sustained {
		base = "timeline-sustained-" + fileName(s)
	}
	name := base
	for i := 2; taken[name]; i++ {
		name = fmt.Sprintf("%s-%d", base, i)
	}
	taken[name] = true
	return name
}

// timelineMaxRequests is the most requests a timeline draws: a larger
// wave is sampled (sampleRequests).
const timelineMaxRequests = 512

// sampleRequests returns recs (sorted by send) or, beyond
// timelineMaxRequests, that many of them evenly spaced in order of
// sending, the first and the last included.
func sampleRequests(recs []contract.Record) []contract.Record {
	n, m := len(recs), timelineMaxRequests
	if n <= m {
		return recs
	}
	out := make([]contract.Record, m)
	for k := range out {
		out[k] = recs[int(math.Round(float64(k)*float64(n-1)/float64(m-1)))]
	}
	return out
}

// timelineWave picks server's recorded wave of mode (closed or sustained)
// at the concurrency closest to 8 (the larger on a tie), preferring the
// first warm repeat.
func (d *data) timelineWave(server, mode string) (contract.Wave, bool) {
	var best contract.Wave
	found := false
	better := func(w contract.Wave) bool {
		if !found {
			return true
		}
		dw, db := abs(w.Concurrency-timelineTarget), abs(best.Concurrency-timelineTarget)
		switch {
		case dw != db:
			return dw < db
		case w.Concurrency != best.Concurrency:
			return w.Concurrency > best.Concurrency
		case w.Cold != best.Cold:
			return !w.Cold
		default:
			return w.Repeat < best.Repeat
		}
	}
	for _, w := range d.res.Waves {
		wm := w.Mode
		if wm == "" {
			wm = contract.ModeClosed
		}
		if w.Server != server || w.Kind != contract.KindRecorded || wm != mode {
			continue
		}
		if len(d.byWave[w.ID]) == 0 {
			continue
		}
		if better(w) {
			best, found = w, true
		}
	}
	return best, found
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// rowTicks labels rows 1..n from the top: every row for small waves, every
// eighth for large ones.
func rowTicks(n int) gplot.ConstantTicks {
	step := 1
	if n > 16 {
		step = 8
	}
	var ticks gplot.ConstantTicks
	for i := 0; i < n; i++ {
		label := ""
		if i%step == 0 || i == n-1 {
			label = strconv.Itoa(i + 1)
		}
		ticks = append(ticks, gplot.Tick{Value: float64(n - 1 - i), Label: label})
	}
	return ticks
}

var (
	waitStyle  = draw.LineStyle{Color: grey, Width: vg.Points(1.2)}
	firstStyle = draw.LineStyle{Color: color.Black, Width: vg.Points(1.4)}
)

type timelineRow struct {
	y   float64
	rec contract.Record
}

// timeline is a gonum/plot plotter drawing one horizontal bar per request,
// on n rows (a row per request of a closed wave, per client of a sustained
// one).
type timeline struct {
	rows  []timelineRow
	n     int
	color color.Color
}

// Plot implements gplot.Plotter.
func (t *timeline) Plot(c draw.Canvas, p *gplot.Plot) {
	trX, trY := p.Transforms(&c)
	half := vg.Points(6)
	if len(t.rows) > 1 {
		if h := (trY(1) - trY(0)) * 0.35; h < half {
			half = h
		}
	}
	if half < vg.Points(0.6) {
		half = vg.Points(0.6)
	}
	for _, r := range t.rows {
		y := trY(r.y)
		x0, x1 := trX(r.rec.StartS), trX(r.rec.EndS)
		xf := x1
		if r.rec.FirstContentS != nil {
			xf = trX(*r.rec.FirstContentS)
		}
		c.StrokeLine2(waitStyle, x0, y, xf, y)
		fill := t.color
		if !r.rec.OK {
			fill = failed
		}
		if x1 > xf {
			fillRect(&c, fill, xf, y-half, x1, y+half)
		} else if !r.rec.OK {
			c.StrokeLine2(draw.LineStyle{Color: failed, Width: vg.Points(1.2)}, x0, y, x1, y)
		}
		if r.rec.FirstContentS != nil {
			c.StrokeLine2(firstStyle, xf, y-half*1.5, xf, y+half*1.5)
		}
	}
}

// DataRange implements gplot.DataRanger.
func (t *timeline) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmax = 0
	for _, r := range t.rows {
		if r.rec.EndS > xmax {
			xmax = r.rec.EndS
		}
	}
	if xmax == 0 {
		xmax = 1
	}
	return 0, xmax, -0.5, float64(t.n) - 0.5
}

func fillRect(c *draw.Canvas, clr color.Color, x0, y0, x1, y1 vg.Length) {
	c.FillPolygon(clr, []vg.Point{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}})
}

// thumb is a legend thumbnail drawn by a function.
type thumb func(c *draw.Canvas)

// Thumbnail implements gplot.Thumbnailer.
func (f thumb) Thumbnail(c *draw.Canvas) { f(c) }
