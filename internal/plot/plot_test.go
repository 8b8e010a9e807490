package plot

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/golden"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/plot/plottest"
)

// figureDir, when set, receives every figure the tests render, for a person
// to look at.
var figureDir = os.Getenv("REHEARSE_FIGURE_DIR")

// structure summarizes an SVG document for golden comparison: its title and
// size, every text in drawing order, and how many paths of each colour it
// draws (one colour per server, so series and point counts show), leaving
// out coordinates so a layout nudge does not break the test.
func structure(t *testing.T, doc []byte) string {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(doc))
	var b strings.Builder
	colours := map[string]int{}
	var inText, inTitle bool
	paths := 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			switch el.Name.Local {
			case "svg":
				fmt.Fprintf(&b, "svg %s × %s\n", attr(el, "width"), attr(el, "height"))
			case "title":
				inTitle = true
			case "text":
				inText = true
			case "path":
				paths++
				for _, k := range []string{"stroke", "fill"} {
					if m := regexp.MustCompile(`(?:^|;)` + k + `:(#[0-9A-Fa-f]{6})`).FindStringSubmatch(attr(el, "style")); m != nil {
						colours[k+" "+m[1]]++
					}
				}
			}
		case xml.EndElement:
			inText = inText && el.Name.Local != "text"
			inTitle = inTitle && el.Name.Local != "title"
		case xml.CharData:
			switch {
			case inTitle:
				fmt.Fprintf(&b, "title %q\n", string(el))
			case inText:
				fmt.Fprintf(&b, "text %q\n", string(el))
			}
		}
	}
	keys := make([]string, 0, len(colours))
	for k := range colours {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintf(&b, "paths %d\n", paths)
	for _, k := range keys {
		fmt.Fprintf(&b, "  %s: %d\n", k, colours[k])
	}
	return b.String()
}

func attr(el xml.StartElement, name string) string {
	for _, a := range el.Attr {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

func render(t *testing.T, res *bundle.Results) map[string]Figure {
	t.Helper()
	figs, err := Render(res)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]Figure{}
	for _, f := range figs {
		if _, dup := out[f.Name]; dup {
			t.Fatalf("two figures named %s", f.Name)
		}
		if f.Title == "" || f.Caption == "" || len(f.SVG) == 0 {
			t.Errorf("%s: empty title, caption or SVG", f.Name)
		}
		out[f.Name] = f
		if figureDir != "" {
			if err := os.WriteFile(filepath.Join(figureDir, f.Name), f.SVG, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return out
}

func names(figs map[string]Figure) []string {
	var ns []string
	for n := range figs {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}

func TestRenderGolden(t *testing.T) {
	figs := render(t, plottest.Results(plottest.Default()))
	want := []string{"cdf.svg", "goodput.svg", "lengths.svg", "mechanism.svg", "timeline-batching.svg", "timeline-naive.svg", "ttft.svg"}
	if got := names(figs); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("figures %v, want %v", got, want)
	}
	for _, n := range want {
		f := figs[n]
		got := fmt.Sprintf("name %s\ntitle %s\ncaption %s\n%s", f.Name, f.Title, f.Caption, structure(t, f.SVG))
		golden.Check(t, strings.TrimSuffix(n, ".svg")+".golden", []byte(got))
	}
}

func TestRenderIsDeterministic(t *testing.T) {
	a, err := Render(plottest.Results(plottest.Default()))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Render(plottest.Results(plottest.Default()))
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != len(b) {
		t.Fatalf("%d figures, then %d", len(a), len(b))
	}
	for i := range a {
		if a[i].Name != b[i].Name || !bytes.Equal(a[i].SVG, b[i].SVG) {
			t.Errorf("%s: two renders of the same results differ", a[i].Name)
		}
	}
}

// countColour counts the paths stroked in colour c.
func countColour(doc []byte, c string) int {
	return strings.Count(string(doc), "stroke:"+c)
}

func TestGoodputSeriesAndErrorBars(t *testing.T) {
	res := plottest.Results(plottest.Default())
	doc := render(t, res)["goodput.svg"].SVG
	for i, s := range []string{"naive", "batching"} {
		c := fmt.Sprintf("#%02X%02X%02X", palette[i].R, palette[i].G, palette[i].B)
		// Per aggregate an error bar: a 1 pt stroke and two caps.
		n := 0
		for _, a := range res.Aggregates {
			if a.Server == s {
				n++
			}
		}
		if got, want := countColour(doc, c+`"`), 3*n; got != want {
			t.Errorf("%s (%s): %d error-bar strokes, want %d (3 per concurrency)", s, c, got, want)
		}
		// One polyline through the medians with a vertex per aggregate.
		line := regexp.MustCompile(`<path d="M[^"]*" style="fill:none;stroke:`+c+`;stroke-width:1.6`).FindAllString(string(doc), -1)
		if len(line) < 1 || strings.Count(line[0], "L") != n-1 {
			t.Errorf("%s: median line %q should join %d points", s, line, n)
		}
		if !bytes.Contains(doc, []byte(">"+s+"</text>")) {
			t.Errorf("legend lacks %s", s)
		}
	}
	for _, label := range []string{"goodput (tok/s)", "clients (closed-loop wave)", ">1<", ">8<", ">32<", ">64<", ">10<", ">10000<"} {
		if !bytes.Contains(doc, []byte(label)) {
			t.Errorf("goodput.svg lacks %q", label)
		}
	}
}

func TestTimelineFallsBackToClosestConcurrency(t *testing.T) {
	o := plottest.Default()
	o.Concurrencies = []int{1, 4, 16}
	o.MechanismCheck = false
	figs := render(t, plottest.Results(o))
	if _, ok := figs["mechanism.svg"]; ok {
		t.Error("mechanism.svg drawn without a mechanism check")
	}
	tl, ok := figs["timeline-naive.svg"]
	if !ok {
		t.Fatalf("no timeline; figures %v", names(figs))
	}
	if !strings.Contains(tl.Title, "4-client") || !strings.Contains(tl.Caption, "No 8-client wave was recorded; 4 clients is the closest") {
		t.Errorf("timeline title %q / caption %q should name the 4-client wave and say why", tl.Title, tl.Caption)
	}
	// Four requests: four first-content ticks (black, 1.4 pt) plus the legend's.
	if got := strings.Count(string(tl.SVG), "stroke:#000000;stroke-width:1.4"); got != 5 {
		t.Errorf("%d first-content ticks, want 4 and one in the legend", got)
	}
	if !strings.Contains(tl.Title, "every request of the 4-client wave") {
		t.Errorf("title %q", tl.Title)
	}
}

func TestTimelineMarksFailures(t *testing.T) {
	o := plottest.Default()
	o.Concurrencies = []int{8}
	o.TimeoutS = 2 // the serial server fails most of an 8-client wave
	figs := render(t, plottest.Results(o))
	tl := figs["timeline-naive.svg"]
	if !strings.Contains(tl.Caption, "requests failed") || !strings.Contains(string(tl.SVG), ">failed</text>") {
		t.Errorf("timeline of a wave with timeouts does not show failures: caption %q", tl.Caption)
	}
	if bt := figs["timeline-batching.svg"]; strings.Contains(string(bt.SVG), ">failed</text>") {
		t.Error("batching timeline has a failed legend entry without failures")
	}
}

func TestAllFailedConcurrencyStillRenders(t *testing.T) {
	o := plottest.Default()
	o.TimeoutS = 1 // the serial server completes nothing; batching everything
	res := plottest.Results(o)
	figs := render(t, res)
	for _, n := range []string{"goodput.svg", "ttft.svg", "cdf.svg"} {
		if _, ok := figs[n]; !ok {
			t.Errorf("%s missing", n)
		}
	}
	nulls := 0
	for _, a := range res.Aggregates {
		if a.TTFT.P95 == nil {
			nulls++
		}
	}
	if nulls == 0 {
		t.Fatal("fixture should have aggregates without a successful request")
	}
	if c := figs["ttft.svg"].Caption; !strings.Contains(c, "no successful request") {
		t.Errorf("ttft caption %q does not say some points are missing", c)
	}
}

func TestOpenLoopAggregates(t *testing.T) {
	res := plottest.Results(plottest.Default())
	for i := range res.Waves {
		w := &res.Waves[i]
		if w.Kind == contract.KindRecorded {
			w.Mode = contract.ModeOpen
			w.RequestRateRPS = float64(w.Concurrency) / 2
		}
	}
	res.Recompute()
	figs := render(t, res)
	for _, n := range []string{"goodput-open.svg", "ttft-open.svg"} {
		f, ok := figs[n]
		if !ok {
			t.Fatalf("%s missing; figures %v", n, names(figs))
		}
		if !strings.Contains(string(f.SVG), "request rate (req/s, open loop)") {
			t.Errorf("%s lacks the request-rate axis label", n)
		}
	}
	for _, n := range []string{"goodput.svg", "timeline-naive.svg", "cdf.svg"} {
		if _, ok := figs[n]; ok {
			t.Errorf("%s drawn without closed-loop waves", n)
		}
	}
}

func TestMechanismSeriesWithNaN(t *testing.T) {
	res := plottest.Results(plottest.Default())
	s := res.MechanismCheck.Series
	s[3][1] = math.NaN()
	s[5][1] = math.Inf(1)
	f, ok := render(t, res)["mechanism.svg"]
	if !ok || !strings.Contains(f.Caption, "2 samples were not finite numbers and are not drawn") {
		t.Errorf("NaN samples: figure drawn %v, caption %q", ok, f.Caption)
	}
	for i := range s {
		s[i][1] = math.NaN()
	}
	if _, ok := render(t, res)["mechanism.svg"]; ok {
		t.Error("a series of NaN only still drew a figure")
	}
}

func TestSingleServerSingleConcurrency(t *testing.T) {
	o := plottest.Default()
	o.Servers = o.Servers[1:]
	o.Baseline = ""
	o.Concurrencies = []int{4}
	o.Repeats = 1
	o.MechanismCheck = false
	figs := render(t, plottest.Results(o))
	want := "cdf.svg goodput.svg lengths.svg timeline-batching.svg ttft.svg"
	if got := strings.Join(names(figs), " "); got != want {
		t.Errorf("figures %s, want %s", got, want)
	}
	if !strings.Contains(string(figs["goodput.svg"].SVG), ">4</text>") {
		t.Error("goodput.svg lacks the tick of its one concurrency")
	}
}

func TestTimelineNamesAreUnique(t *testing.T) {
	o := plottest.Default()
	o.Servers[0].Name, o.Servers[1].Name = "a b", "a_b"
	o.Baseline = "a b"
	figs := render(t, plottest.Results(o)) // render fails on a duplicate name
	for _, n := range []string{"timeline-a_b.svg", "timeline-a_b-2.svg"} {
		if _, ok := figs[n]; !ok {
			t.Errorf("no %s among %v", n, names(figs))
		}
	}
}

func TestEmptyResults(t *testing.T) {
	figs, err := Render(&bundle.Results{})
	if err != nil || len(figs) != 0 {
		t.Errorf("empty results: %d figures, err %v; want none", len(figs), err)
	}
	if _, err := Render(nil); err == nil {
		t.Error("nil results: no error")
	}
}

func TestFileName(t *testing.T) {
	for in, want := range map[string]string{"vLLM": "vllm", "naive-1.5b": "naive-1.5b", "a/b c": "a_b_c", "": "server"} {
		if got := fileName(in); got != want {
			t.Errorf("fileName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLinearTicks(t *testing.T) {
	for _, c := range []struct {
		max  float64
		want string
	}{{67.2, "[0 20 40 60]"}, {1, "[0 0.2 0.4 0.6 0.8 1]"}, {0.047, "[0 0.01 0.02 0.03 0.04]"}, {0, "[0]"}} {
		if got := fmt.Sprint(linearTicks(c.max)); got != c.want {
			t.Errorf("linearTicks(%g) = %s, want %s", c.max, got, c.want)
		}
	}
}

func BenchmarkRender(b *testing.B) {
	res := plottest.Results(plottest.Default())
	for b.Loop() {
		if _, err := Render(res); err != nil {
			b.Fatal(err)
		}
	}
}

// TestLengthBins checks the bin choice of the length histogram: a bin per
// count for a few short prompts, log bins for a ShareGPT-like spread,
// round linear bins between.
func TestLengthBins(t *testing.T) {
	short := lengthBins([]float64{12, 15, 9, 30, 22})
	if short.width != 1 || short.sx.log || short.edges[0] != 8.5 || short.edges[len(short.edges)-1] != 30.5 {
		t.Errorf("short prompts: %+v, want a bin per count from 8.5 to 30.5", short)
	}
	wide := lengthBins([]float64{4, 60, 800, 3900})
	if !wide.sx.log || wide.edges[0] > 4 || wide.edges[len(wide.edges)-1] < 3900 || len(wide.edges) > 40 {
		t.Errorf("ShareGPT-like: %+v, want log bins covering 4 to 3900", wide)
	}
	mid := lengthBins([]float64{900, 1000, 1100, 1500})
	if mid.sx.log || mid.width != 20 || mid.edges[0] != 900 || mid.edges[len(mid.edges)-1] < 1500 {
		t.Errorf("900–1500: %+v, want bins of 20 tokens from 900", mid)
	}
	sh := wide.shares([]float64{0, 4, 3900, 3900})
	sum := 0.0
	for _, v := range sh {
		sum += v
	}
	if math.Abs(sum-100) > 1e-9 || sh[0] != 50 || sh[len(sh)-1] != 50 {
		t.Errorf("shares %v: want 50%% in the first bin (0 and 4), 50%% in the last, 100%% in all", sh)
	}
}

// TestLengthsFigureShareGPTLike draws a long-tailed spread of lengths on a
// log axis, every request in a bin.
func TestLengthsFigureShareGPTLike(t *testing.T) {
	res := plottest.Results(plottest.Default())
	for i := range res.Records {
		n := int(math.Exp(1.5 + 0.02*float64(i%300))) // 4 to ≈ 1,600 tokens
		res.Records[i].InputTokens = &n
	}
	f := render(t, res)["lengths.svg"]
	if !strings.Contains(f.Caption, "ten log-spaced bins a decade") {
		t.Errorf("caption %q: want log bins for the input", f.Caption)
	}
	if !strings.Contains(string(f.SVG), ">1000</text>") {
		t.Error("lengths.svg lacks the 1000 tick of its log axis")
	}
}

// TestSustainedFigures checks that a bundle of sustained waves gets its own
// goodput, TTFT, CDF and timeline figures (none of the closed loop's), and
// that its timeline has a row per client, not per request.
func TestSustainedFigures(t *testing.T) {
	o := plottest.Default()
	o.MechanismCheck = false
	res := plottest.Results(o)
	for i := range res.Waves {
		res.Waves[i].Mode = contract.ModeSustained
	}
	res.Recompute()
	figs := render(t, res)
	want := "cdf-sustained.svg goodput-sustained.svg lengths.svg timeline-sustained-batching.svg timeline-sustained-naive.svg ttft-sustained.svg"
	if got := strings.Join(names(figs), " "); got != want {
		t.Fatalf("figures %s, want %s", got, want)
	}
	if c := figs["goodput-sustained.svg"].Caption; !strings.Contains(c, "measured window") {
		t.Errorf("goodput caption %q does not name the measured window", c)
	}
	tl := figs["timeline-sustained-batching.svg"]
	if !strings.Contains(tl.Caption, "One row per client") || !strings.Contains(string(tl.SVG), ">client</text>") {
		t.Errorf("sustained timeline is not a row per client: %q", tl.Caption)
	}
}
