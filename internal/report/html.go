package report

import (
	"bytes"
	"errors"
	"fmt"
	"html"
	"regexp"
	"strconv"
	"strings"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/renderer"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/plot"
)

// HTML returns report.html: one self-contained page (inline CSS and SVG; it
// loads nothing) with README.md's sections rendered from its markdown, each
// figure inlined where README.md links it (`![Title](goodput.svg)`), and any
// figure README.md does not link shown in a closing "Figures" section. The
// page is responsive: figures scale to the screen and wide tables scroll.
func HTML(res *bundle.Results, readme []byte, figs []plot.Figure) ([]byte, error) {
	if res == nil {
		return nil, errors.New("report.html: no results")
	}
	inline := make(map[string]*inlineFigure, len(figs))
	order := make([]string, 0, len(figs))
	for _, f := range figs {
		svg, err := inlineSVG(f.SVG)
		if err != nil {
			return nil, fmt.Errorf("report.html: figure %s: %w", f.Name, err)
		}
		if _, dup := inline[f.Name]; dup {
			return nil, fmt.Errorf("report.html: two figures named %s", f.Name)
		}
		inline[f.Name] = &inlineFigure{Figure: f, svg: svg}
		order = append(order, f.Name)
	}

	md := goldmark.New(
		goldmark.WithExtensions(extension.GFM),
		goldmark.WithParserOptions(parser.WithAutoHeadingID()),
		goldmark.WithRendererOptions(renderer.WithNodeRenderers(util.Prioritized(figureRenderer{inline}, 100))),
	)
	var body bytes.Buffer
	doc := md.Parser().Parse(text.NewReader(readme))
	if err := md.Renderer().Render(&body, readme, doc); err != nil {
		return nil, fmt.Errorf("report.html: rendering README.md: %w", err)
	}
	var rest []*inlineFigure
	for _, name := range order {
		if f := inline[name]; !f.shown {
			rest = append(rest, f)
		}
	}
	if len(rest) > 0 {
		body.WriteString("<h2 id=\"figures\">Figures</h2>\n")
		for _, f := range rest {
			writeFigure(&body, f, f.Title)
			if f.Caption != "" {
				fmt.Fprintf(&body, "<p class=\"caption\">%s</p>\n", html.EscapeString(f.Caption))
			}
		}
	}

	title := "rehearse report"
	if id := res.Provenance.Model.ID; id != "" {
		title += ": " + id
	}
	var out bytes.Buffer
	out.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n")
	out.WriteString("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n")
	// The page may load nothing: styles are inline, figures are inline SVG.
	out.WriteString("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:\">\n")
	fmt.Fprintf(&out, "<title>%s</title>\n<style>\n%s</style>\n</head>\n<body>\n<main>\n", html.EscapeString(title), css)
	out.Write(wrapTables(body.Bytes()))
	out.WriteString("</main>\n</body>\n</html>\n")
	return out.Bytes(), nil
}

type inlineFigure struct {
	plot.Figure
	svg   []byte
	shown bool
}

var (
	prolog   = regexp.MustCompile(`(?s)^\s*(<\?xml[^>]*\?>\s*)?(<!--.*?-->\s*)*`)
	svgStart = regexp.MustCompile(`(?s)<svg\b[^>]*>`)
	sizeAttr = regexp.MustCompile(`\s(width|height)="[^"]*"`)
)

// inlineSVG prepares a standalone SVG document for inlining: no XML prolog
// or leading comments, and no fixed width or height, so the page's CSS
// scales it by its viewBox.
func inlineSVG(doc []byte) ([]byte, error) {
	doc = prolog.ReplaceAll(doc, nil)
	loc := svgStart.FindIndex(doc)
	if loc == nil || loc[0] != 0 {
		return nil, errors.New("not an SVG document (no leading <svg> element)")
	}
	if !bytes.Contains(doc[loc[0]:loc[1]], []byte("viewBox=")) {
		return nil, errors.New("SVG has no viewBox, so it cannot scale to the page")
	}
	open := doc[loc[0]:loc[1]]
	var widthPx float64
	if m := widthPt.FindSubmatch(open); m != nil {
		if v, err := strconv.ParseFloat(string(m[1]), 64); err == nil {
			widthPx = v * 4 / 3
		}
	}
	open = sizeAttr.ReplaceAll(open, nil)
	if widthPx > 0 {
		// Grow to at most 1.2× the drawn size: wider, the text grows
		// out of proportion to the page's.
		open = append(open[:len(open)-1:len(open)-1], []byte(fmt.Sprintf(` style="max-width:%.0fpx">`, widthPx*1.2))...)
	}
	out := append([]byte{}, open...)
	return append(out, doc[loc[1]:]...), nil
}

// urlScheme matches a destination that names a scheme ("https:x" loads
// from the network as surely as "https://x" does).
var urlScheme = regexp.MustCompile(`^[a-z][a-z0-9+.-]*:`)

var widthPt = regexp.MustCompile(`\swidth="([0-9.]+)pt"`)

func writeFigure(w interface{ WriteString(string) (int, error) }, f *inlineFigure, alt string) {
	f.shown = true
	w.WriteString(`<span class="fig" role="img" aria-label="`)
	w.WriteString(html.EscapeString(alt))
	w.WriteString(`">`)
	w.WriteString(string(f.svg))
	w.WriteString("</span>")
}

// figureRenderer renders a markdown image that names a figure as that
// figure's inline SVG; other images stay images when local, and become
// links when they would be fetched from a network.
type figureRenderer struct {
	figs map[string]*inlineFigure
}

func (r figureRenderer) RegisterFuncs(reg renderer.NodeRendererFuncRegisterer) {
	reg.Register(ast.KindImage, r.renderImage)
}

func (r figureRenderer) renderImage(w util.BufWriter, source []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
	if !entering {
		return ast.WalkContinue, nil
	}
	n := node.(*ast.Image)
	dest := string(n.Destination)
	alt := plainText(n, source)
	if f, ok := r.figs[dest]; ok {
		writeFigure(w, f, alt)
		return ast.WalkSkipChildren, nil
	}
	lower := strings.ToLower(strings.TrimSpace(dest))
	switch {
	case strings.HasPrefix(lower, "javascript:") || strings.HasPrefix(lower, "vbscript:"):
		w.WriteString(html.EscapeString(alt))
	case (urlScheme.MatchString(lower) && !strings.HasPrefix(lower, "data:")) || strings.HasPrefix(lower, "//") || strings.HasPrefix(lower, `\\`):
		fmt.Fprintf(w, `<a href="%s">%s</a>`, html.EscapeString(dest), html.EscapeString(alt))
	default:
		fmt.Fprintf(w, `<img src="%s" alt="%s">`, html.EscapeString(dest), html.EscapeString(alt))
	}
	return ast.WalkSkipChildren, nil
}

// plainText is the text content of n's descendants.
func plainText(n ast.Node, source []byte) string {
	var b strings.Builder
	_ = ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch t := c.(type) {
		case *ast.Text:
			// Backslash escapes (README escapes "[" and "]" in alt text)
			// are markdown syntax, not part of the text.
			b.Write(util.UnescapePunctuations(t.Segment.Value(source)))
		case *ast.String:
			b.Write(t.Value)
		}
		return ast.WalkContinue, nil
	})
	return b.String()
}

// wrapTables puts every table in a horizontally scrolling box, so a wide
// table never widens the page on a phone. goldmark escapes raw HTML in
// README.md, so every "<table>" here is one it rendered.
func wrapTables(body []byte) []byte {
	body = bytes.ReplaceAll(body, []byte("<table>"), []byte(`<div class="scroll"><table>`))
	return bytes.ReplaceAll(body, []byte("</table>"), []byte("</table></div>"))
}

const css = `:root { color-scheme: light; }
* { box-sizing: border-box; }
body { margin: 0; background: #fff; color: #1b1b1b;
  font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Liberation Sans", Arial, sans-serif; }
main { max-width: 72rem; margin: 0 auto; padding: 1rem 1rem 3rem; }
h1 { font-size: 1.6rem; line-height: 1.25; margin: 0.5rem 0 1rem; }
h2 { font-size: 1.3rem; margin: 2rem 0 0.75rem; padding-bottom: 0.25rem; border-bottom: 1px solid #ddd; }
h3 { font-size: 1.1rem; margin: 1.5rem 0 0.5rem; }
p, ul, ol { margin: 0.5rem 0 0.9rem; }
a { color: #0b5cad; }
code { font: 0.9em/1.4 ui-monospace, "Liberation Mono", Menlo, Consolas, monospace; background: #f3f3f3; padding: 0.05em 0.25em; border-radius: 3px; overflow-wrap: anywhere; }
pre { overflow-x: auto; background: #f6f6f6; padding: 0.75rem; border-radius: 4px; }
pre code { background: none; padding: 0; overflow-wrap: normal; }
.scroll { overflow-x: auto; margin: 0.75rem 0 1rem; -webkit-overflow-scrolling: touch; }
table { border-collapse: collapse; font-size: 0.92rem; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #d6d6d6; padding: 0.3rem 0.55rem; vertical-align: top; }
td { white-space: nowrap; }
th { background: #f2f4f7; min-width: 4.5rem; }
td:first-child, th:first-child { position: sticky; left: 0; background: #f2f4f7; }
blockquote { margin: 0.75rem 0; padding: 0.5rem 0.9rem; border-left: 4px solid #c9a227; background: #fffbea; }
blockquote p { margin: 0.25rem 0; }
tbody tr:nth-child(even) { background: #fafafa; }
.fig { display: block; margin: 1.25rem 0 0.25rem; }
.fig svg { display: block; width: 100%; height: auto; }
.fig svg text { font-family: "Liberation Sans", Arimo, Arial, Helvetica, sans-serif !important; }
.caption, .fig + em, p > em:only-child { color: #444; font-size: 0.92rem; }
@media (max-width: 40rem) {
  body { font-size: 15px; }
  main { padding: 0.75rem 0.6rem 2rem; }
  h1 { font-size: 1.35rem; }
  table { font-size: 0.85rem; }
}
`
