// Package plot draws the figures of a results bundle as SVG with gonum/plot:
// goodput against clients, tokens/s per user against tokens/s per GPU for
// servers whose GPUs are known, p95 TTFT with the failure rate, a per-request
// timeline of one wave per server, TTFT and TPOT distributions (each for the
// closed loop and the sustained closed loop; goodput and TTFT against
// request rate for open-loop arrivals), the mechanism-check series, and the
// input and output length histograms. Every figure is computed from bundle.Results alone and
// the output is deterministic for the same input. Text uses the Liberation
// Sans metrics embedded in gonum/plot; no font is fetched or embedded.
package plot

import (
	"bytes"
	"fmt"
	"image/color"
	"regexp"
	"strings"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/rehearse/rehearse/internal/bundle"
)

// Figure is one SVG figure of a bundle.
type Figure struct {
	// Name is the file name inside the bundle, e.g. "goodput.svg".
	Name string
	// Title is a one-line title (the alt text of README.md's image link).
	Title string
	// Caption says how to read the figure and where its data comes from.
	Caption string
	SVG     []byte
}

// Render draws every figure the results support, in a fixed order; a figure
// whose data is absent (no mechanism check, no closed-loop waves) is left
// out. The same results always give the same bytes.
func Render(res *bundle.Results) ([]Figure, error) {
	if res == nil {
		return nil, fmt.Errorf("plot: no results")
	}
	d := newData(res)
	var figs []Figure
	for _, f := range []func(*data) ([]Figure, error){
		capacityFigures, goodputFigures, paretoFigures, ttftFigures, timelineFigures, mechanismFigures, cdfFigures, lengthFigures,
	} {
		fs, err := f(d)
		if err != nil {
			return nil, err
		}
		figs = append(figs, fs...)
	}
	return figs, nil
}

// Sizes of figures: narrow enough that text stays readable when a phone
// scales a figure to its width; two-panel figures stack their panels.
const (
	figWidth  = 6 * vg.Inch
	figHeight = 4 * vg.Inch
	// panelHeight is the height of each panel of a stacked figure.
	panelHeight = 3.7 * vg.Inch
)

var (
	sans = font.Font{Typeface: "Liberation", Variant: "Sans"}
	// palette is Okabe and Ito's colour-blind-safe set; a server keeps its
	// colour (by its position in the rehearsal) in every figure.
	palette = []color.NRGBA{
		{0x00, 0x72, 0xB2, 0xff}, // blue
		{0xD5, 0x5E, 0x00, 0xff}, // vermillion
		{0x00, 0x9E, 0x73, 0xff}, // bluish green
		{0xCC, 0x79, 0xA7, 0xff}, // reddish purple
		{0xE6, 0x9F, 0x00, 0xff}, // orange
		{0x56, 0xB4, 0xE9, 0xff}, // sky blue
		{0x00, 0x00, 0x00, 0xff}, // black
	}
	glyphs = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.PyramidGlyph{}, draw.CrossGlyph{}, draw.PlusGlyph{}, draw.RingGlyph{}}
	dashes = [][]vg.Length{nil, {vg.Points(6), vg.Points(3)}, {vg.Points(2), vg.Points(2)}, {vg.Points(8), vg.Points(2), vg.Points(2), vg.Points(2)}}
	grey   = color.NRGBA{0x99, 0x99, 0x99, 0xff}
	failed = color.NRGBA{0xC0, 0x00, 0x00, 0xff}
)

// newPlot returns a plot with a title, axis labels, sans-serif text sized
// for reading at a glance, and a light grid.
func newPlot(title, xLabel, yLabel string) *gplot.Plot {
	p := gplot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font = font.From(sans, 15)
	p.Title.Padding = vg.Points(6)
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	for _, a := range []*gplot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font = font.From(sans, 13)
		a.Tick.Label.Font = font.From(sans, 12)
	}
	p.Legend.TextStyle.Font = font.From(sans, 12)
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.ThumbnailWidth = vg.Points(22)
	g := plotter.NewGrid()
	g.Vertical.Color = color.Gray{0xe4}
	g.Horizontal.Color = color.Gray{0xe4}
	p.Add(g)
	return p
}

// svg draws one plot, or several stacked with aligned axes, on one canvas
// and returns the SVG.
func svg(title string, plots ...*gplot.Plot) ([]byte, error) {
	h := figHeight
	if len(plots) > 1 {
		h = panelHeight * vg.Length(len(plots))
	}
	c := vgsvg.New(figWidth, h)
	dc := draw.New(c)
	if len(plots) == 1 {
		plots[0].Draw(dc)
	} else {
		tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadY: vg.Points(16), PadTop: vg.Points(2), PadBottom: vg.Points(2), PadLeft: vg.Points(2), PadRight: vg.Points(8)}
		rows := make([][]*gplot.Plot, len(plots))
		for i, p := range plots {
			rows[i] = []*gplot.Plot{p}
		}
		cs := gplot.Align(rows, tiles, dc)
		for i, p := range plots {
			p.Draw(cs[i][0])
		}
	}
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return nil, err
	}
	doc := bytes.ReplaceAll(buf.Bytes(), []byte("font-family:Liberation Sans;"), []byte(fontFamily))
	return addTitle(doc, title), nil
}

// fontFamily names Liberation Sans, whose metrics laid the text out, then
// metric-compatible fonts a viewer is likely to have, then any sans-serif.
const fontFamily = "font-family:'Liberation Sans',Arimo,Arial,Helvetica,sans-serif;"

var svgOpen = regexp.MustCompile(`(?s)<svg[^>]*>\n?`)

// addTitle inserts a <title> right after the opening <svg> tag, so a screen
// reader and a browser tab name the figure.
func addTitle(doc []byte, title string) []byte {
	loc := svgOpen.FindIndex(doc)
	if loc == nil {
		return doc
	}
	var b bytes.Buffer
	b.Write(doc[:loc[1]])
	b.WriteString("<title>")
	b.WriteString(xmlEscape(title))
	b.WriteString("</title>\n")
	b.Write(doc[loc[1]:])
	return b.Bytes()
}

func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}

// lineStyle is server i's line.
func lineStyle(i int) draw.LineStyle {
	return draw.LineStyle{Color: palette[i%len(palette)], Width: vg.Points(1.6), Dashes: dashes[i%len(dashes)]}
}

// glyphStyle is server i's point marker.
func glyphStyle(i int) draw.GlyphStyle {
	return draw.GlyphStyle{Color: palette[i%len(palette)], Radius: vg.Points(3), Shape: glyphs[i%len(glyphs)]}
}

// fileName turns a server name into a safe part of a file name.
func fileName(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			b.WriteRune(r)
		case r >= 'A' && r <= 'Z':
			b.WriteRune(r + ('a' - 'A'))
		default:
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 {
		return "server"
	}
	return b.String()
}
