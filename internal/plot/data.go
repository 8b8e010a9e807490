package plot

import (
	"math"
	"sort"
	"strconv"

	gplot "gonum.org/v1/plot"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
)

// data is the results indexed for drawing.
type data struct {
	res     *bundle.Results
	servers []string       // in the rehearsal's order, then any others sorted
	index   map[string]int // server → colour index
	byWave  map[int][]contract.Record
}

func newData(res *bundle.Results) *data {
	d := &data{res: res, index: map[string]int{}, byWave: map[int][]contract.Record{}}
	add := func(s string) {
		if _, ok := d.index[s]; !ok {
			d.index[s] = len(d.servers)
			d.servers = append(d.servers, s)
		}
	}
	for _, s := range res.ServerNames() {
		add(s)
	}
	var extra []string
	seen := map[string]bool{}
	for _, a := range res.Aggregates {
		if _, ok := d.index[a.Server]; !ok && !seen[a.Server] {
			seen[a.Server] = true
			extra = append(extra, a.Server)
		}
	}
	sort.Strings(extra)
	for _, s := range extra {
		add(s)
	}
	d.byWave = bundle.RecordsByWave(res.Records)
	return d
}

// mode describes the x axis of a load mode: clients for closed-loop waves
// and the sustained closed loop, request rate for open-loop arrivals.
type mode struct {
	name   string // contract.ModeClosed, ModeSustained or ModeOpen
	suffix string // file-name suffix: "", "-sustained" or "-open"
	xLabel string
	x      func(contract.Aggregate) float64
}

var modes = []mode{
	{contract.ModeClosed, "", "clients (closed-loop wave)", func(a contract.Aggregate) float64 { return float64(a.Concurrency) }},
	{contract.ModeSustained, "-sustained", "clients (sustained closed loop)", func(a contract.Aggregate) float64 { return float64(a.Concurrency) }},
	{contract.ModeOpen, "-open", "request rate (req/s, open loop)", func(a contract.Aggregate) float64 { return a.RequestRateRPS }},
}

// aggregates returns server's aggregates of mode m, in x order. A ramp or
// a trace replay has no one rate to stand at on the x axis: it is left
// out of the figures (the tables show it).
func (d *data) aggregates(server string, m mode) []contract.Aggregate {
	var out []contract.Aggregate
	for _, a := range d.res.Aggregates {
		am := a.Mode
		if am == "" {
			am = contract.ModeClosed
		}
		if a.Server == server && am == m.name && a.LoadShape == "" {
			out = append(out, a)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return m.x(out[i]) < m.x(out[j]) })
	return out
}

// xs returns the distinct x values of mode m over every server.
func (d *data) xs(m mode) []float64 {
	set := map[float64]bool{}
	for _, s := range d.servers {
		for _, a := range d.aggregates(s, m) {
			set[m.x(a)] = true
		}
	}
	out := make([]float64, 0, len(set))
	for x := range set {
		out = append(out, x)
	}
	sort.Float64s(out)
	return out
}

// scale maps data onto a plot axis: identity, or log10 for a log axis.
// Log axes are drawn as log10 of the data on a linear axis with labelled
// ticks, which keeps gonum/plot's layout exact (its LogScale centres long
// axis labels by the arithmetic midpoint and squeezes the data area).
type scale struct{ log bool }

func (s scale) v(x float64) float64 {
	if s.log {
		return math.Log10(x)
	}
	return x
}

// xScale chooses the x scale for the values xs: log when they are positive
// and span more than a factor of 4 (clients 1, 8, 32, 64).
func xScale(xs []float64) scale {
	return scale{log: len(xs) > 1 && xs[0] > 0 && xs[len(xs)-1]/xs[0] > 4}
}

// setX configures the x axis for the values xs under s: a tick at every
// value on a log axis, the default ticks on a linear one.
func setX(p *gplot.Plot, s scale, xs []float64) {
	if len(xs) == 0 {
		return
	}
	if s.log {
		ticks := make(gplot.ConstantTicks, 0, len(xs))
		for _, x := range xs {
			ticks = append(ticks, gplot.Tick{Value: s.v(x), Label: strconv.FormatFloat(x, 'g', 4, 64)})
		}
		p.X.Tick.Marker = ticks
		p.X.Min, p.X.Max = s.v(xs[0]/1.25), s.v(xs[len(xs)-1]*1.25)
		return
	}
	if len(xs) == 1 {
		p.X.Min, p.X.Max = xs[0]-1, xs[0]+1
		if xs[0] > 0 {
			p.X.Min, p.X.Max = xs[0]*0.5, xs[0]*1.5
		}
	}
}

// logWorthy reports whether positive values spread over more than ratio
// (a log axis then shows every series; a linear one would flatten the small).
func logWorthy(vals []float64, ratio float64) bool {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range vals {
		if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return false
		}
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	return len(vals) > 1 && hi/lo > ratio
}

// setLog sets axis a, which shows log10 of the data, to whole decades
// around lo..hi (data values) with a labelled tick at every decade and
// unlabelled ones between (labelled at 2 and 5 too when few decades show).
func setLog(a *gplot.Axis, lo, hi float64) {
	e0 := int(math.Floor(math.Log10(lo)))
	e1 := int(math.Ceil(math.Log10(hi)))
	if e1 <= e0 {
		e1 = e0 + 1
	}
	a.Min, a.Max = float64(e0), float64(e1)
	var ticks gplot.ConstantTicks
	for e := e0; e <= e1; e++ {
		base := math.Pow10(e)
		ticks = append(ticks, gplot.Tick{Value: float64(e), Label: strconv.FormatFloat(base, 'g', -1, 64)})
		if e == e1 {
			break
		}
		for k := 2; k < 10; k++ {
			t := gplot.Tick{Value: math.Log10(float64(k) * base)}
			if e1-e0 <= 2 && (k == 2 || k == 5) {
				t.Label = strconv.FormatFloat(float64(k)*base, 'g', -1, 64)
			}
			ticks = append(ticks, t)
		}
	}
	a.Tick.Marker = ticks
}

// headroom raises a's maximum so the top part of the data area stays free
// for a legend of n entries drawn at the top: the legend then never covers
// data.
func headroom(a *gplot.Axis, n int) {
	h := 0.075*float64(n) + 0.05
	if h > 0.45 {
		h = 0.45
	}
	a.Max = a.Min + (a.Max-a.Min)/(1-h)
}

// fixedTicks labels exactly the values vs, so headroom above the last one
// shows no tick.
func fixedTicks(vs ...float64) gplot.ConstantTicks {
	t := make(gplot.ConstantTicks, len(vs))
	for i, v := range vs {
		t[i] = gplot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', -1, 64)}
	}
	return t
}

// linearTicks returns 0 and round steps (1, 2 or 5 × 10^k) up to max,
// four to eight of them.
func linearTicks(max float64) []float64 {
	if !(max > 0) || math.IsInf(max, 0) {
		return []float64{0}
	}
	raw := max / 5
	p := math.Pow10(int(math.Floor(math.Log10(raw))))
	step := p
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			step = m * p
			break
		}
	}
	var out []float64
	for i := 0; float64(i)*step <= max*(1+1e-9); i++ {
		v, _ := strconv.ParseFloat(strconv.FormatFloat(float64(i)*step, 'g', 12, 64), 64)
		out = append(out, v)
	}
	return out
}
