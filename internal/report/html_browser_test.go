package report

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/plot"
	"github.com/rehearse/rehearse/internal/plot/plottest"
)

// findChromium returns the headless browser to drive: $REHEARSE_CHROMIUM,
// else Debian's chromium (scripts/install-browser.sh installs it).
func findChromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("REHEARSE_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no chromium on PATH: run scripts/install-browser.sh (Debian's chromium) to check report.html in a real browser"
	if os.Getenv("REHEARSE_REQUIRE_BROWSER") == "1" {
		t.Fatal(msg + " (REHEARSE_REQUIRE_BROWSER=1 makes this a failure)")
	}
	t.Skip(msg)
	return ""
}

// bundlePage renders report.html of the bundle in dir from its results.json
// and README.md.
func bundlePage(t *testing.T, dir string) ([]byte, []plot.Figure) {
	t.Helper()
	res, err := bundle.ReadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(dir, bundle.ReadmeFile))
	if err != nil {
		t.Fatal(err)
	}
	figs, err := plot.Render(res)
	if err != nil {
		t.Fatal(err)
	}
	page, err := HTML(res, readme, figs)
	if err != nil {
		t.Fatal(err)
	}
	return page, figs
}

type box struct {
	W     float64 `json:"w"`
	H     float64 `json:"h"`
	Right float64 `json:"right"`
}

type pageLayout struct {
	InnerWidth  float64 `json:"innerWidth"`
	ScrollWidth float64 `json:"scrollWidth"`
	Tables      []struct {
		box
		Head string `json:"head"`
		Rows int    `json:"rows"`
	} `json:"tables"`
	Figures []struct {
		box
		Title      string `json:"title"`
		Texts      int    `json:"texts"`
		ShownTexts int    `json:"shownTexts"`
		Paths      int    `json:"paths"`
	} `json:"figures"`
}

// layoutJS measures what the browser rendered: every table and every inline
// figure's bounding box, how many of a figure's texts have a box, and
// whether the page is wider than the screen.
const layoutJS = `(() => {
  const box = e => { const r = e.getBoundingClientRect(); return {w: r.width, h: r.height, right: r.right}; };
  const tables = [...document.querySelectorAll('table')].map(t => {
    const th = t.querySelector('th');
    return {...box(t), head: th ? th.textContent.trim() : '', rows: t.rows.length};
  });
  const figures = [...document.querySelectorAll('.fig > svg')].map(s => {
    const title = s.querySelector('title');
    const texts = [...s.querySelectorAll('text')];
    const shown = texts.filter(x => { const r = x.getBoundingClientRect(); return r.width > 0 && r.height > 0; });
    return {...box(s), title: title ? title.textContent : '', texts: texts.length, shownTexts: shown.length, paths: s.querySelectorAll('path').length};
  });
  return {innerWidth: window.innerWidth, scrollWidth: document.documentElement.scrollWidth, tables, figures};
})()`

// TestHTMLInBrowser loads report.html from disk in headless Chromium at a
// phone's and a laptop's width and checks that the results table and every
// figure rendered with a size, that every figure fits the screen, and that
// the page itself never scrolls sideways (wide tables scroll in their box).
// REHEARSE_SCREENSHOT_DIR, when set, receives a full-page PNG of each.
// REHEARSE_BROWSER_BUNDLE, when set, names a bundle (the demo's) whose
// results.json and README.md make the page instead of the synthetic one.
func TestHTMLInBrowser(t *testing.T) {
	browser := findChromium(t)
	type fixture struct {
		name string
		page []byte
		figs []plot.Figure
	}
	page, _, figs := htmlFixture(t)
	capPage, capFigs := capacityHTMLFixture(t)
	fixtures := []fixture{{"rehearsal", page, figs}, {"capacity", capPage, capFigs}}
	if b := os.Getenv("REHEARSE_BROWSER_BUNDLE"); b != "" {
		page, figs = bundlePage(t, b)
		fixtures = []fixture{{"bundle", page, figs}}
	}
	dir := t.TempDir()
	for _, fx := range fixtures {
		if err := os.WriteFile(filepath.Join(dir, fx.name+".html"), fx.page, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(browser),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(filepath.Join(dir, "profile")),
	)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	var u string

	// Every request the page makes, and every console error (a Content
	// Security Policy violation is one): a self-contained page makes no
	// request but its own and logs nothing.
	var mu sync.Mutex
	var requests, consoleErrors []string
	if err := chromedp.Listen(bctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			if e.Request.URL != u { // the page being checked: set under mu
				requests = append(requests, e.Request.URL)
			}
		case *cdplog.EventEntryAdded:
			if e.Entry.Level == cdplog.EntryLevelError {
				consoleErrors = append(consoleErrors, e.Entry.Text)
			}
		case *cdpruntime.EventExceptionThrown:
			consoleErrors = append(consoleErrors, e.ExceptionDetails.Text)
		}
	}); err != nil {
		t.Fatal(err)
	}

	for _, fx := range fixtures {
		page, figs := fx.page, fx.figs
		mu.Lock()
		u = (&url.URL{Scheme: "file", Path: filepath.Join(dir, fx.name+".html")}).String()
		mu.Unlock()
		testViewports(t, bctx, fx.name, u, page, figs, &mu, &requests, &consoleErrors)
	}
}

// testViewports loads the page at u at a phone's and a laptop's width and
// checks its layout (TestHTMLInBrowser).
func testViewports(t *testing.T, bctx context.Context, name, u string, page []byte, figs []plot.Figure, mu *sync.Mutex, requests, consoleErrors *[]string) {
	for _, vp := range []struct {
		name          string
		width, height int64
		opts          []chromedp.EmulateViewportOption
	}{
		{"phone", 390, 844, []chromedp.EmulateViewportOption{chromedp.EmulateMobile, chromedp.EmulatePortrait}},
		{"laptop", 1366, 900, nil},
	} {
		t.Run(name+"/"+vp.name, func(t *testing.T) {
			if err := chromedp.Do(bctx,
				chromedp.EmulateViewport(vp.width, vp.height, vp.opts...),
				chromedp.Navigate(u),
				chromedp.WaitReady("main"),
			); err != nil {
				t.Fatalf("loading %s: %v", u, err)
			}
			lay, err := chromedp.Run(bctx, chromedp.Evaluate[pageLayout](layoutJS))
			if err != nil {
				t.Fatal(err)
			}
			if lay.InnerWidth != float64(vp.width) {
				t.Errorf("viewport %v px wide, want %d (is the viewport meta tag there?)", lay.InnerWidth, vp.width)
			}
			if lay.ScrollWidth > lay.InnerWidth+1 {
				t.Errorf("page is %v px wide on a %v px screen: it scrolls sideways", lay.ScrollWidth, lay.InnerWidth)
			}
			results := 0
			for _, tb := range lay.Tables {
				// A rehearsal's results table, or a capacity search's probes.
				if (tb.Head == "Clients" || tb.Head == "Probe") && tb.Rows > 1 {
					results++
					if tb.W <= 0 || tb.H <= 0 {
						t.Errorf("results table rendered %v×%v px", tb.W, tb.H)
					}
				}
			}
			if results == 0 {
				t.Errorf("no results table (a table headed Clients, or Probe for a capacity search) rendered; tables: %+v", lay.Tables)
			}
			if len(lay.Figures) != len(figs) {
				t.Errorf("%d figures rendered, want %d", len(lay.Figures), len(figs))
			}
			for _, f := range lay.Figures {
				if f.W < 100 || f.H < 50 {
					t.Errorf("figure %q rendered %v×%v px", f.Title, f.W, f.H)
				}
				if f.Right > lay.InnerWidth+1 {
					t.Errorf("figure %q ends at %v px, past the %v px screen", f.Title, f.Right, lay.InnerWidth)
				}
				if f.Texts == 0 || f.ShownTexts != f.Texts || f.Paths == 0 {
					t.Errorf("figure %q: %d of %d texts shown, %d paths", f.Title, f.ShownTexts, f.Texts, f.Paths)
				}
			}
			mu.Lock()
			if len(*requests) > 0 || len(*consoleErrors) > 0 {
				t.Errorf("the page requested %q and logged errors %q; it must load nothing", *requests, *consoleErrors)
			}
			*requests, *consoleErrors = nil, nil
			mu.Unlock()
			if out := os.Getenv("REHEARSE_SCREENSHOT_DIR"); out != "" {
				png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(out, "report-"+name+"-"+vp.name+".png"), png, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(out, name+"-"+HTMLFile), page, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// capacityHTMLFixture is report.html of a synthetic capacity search.
func capacityHTMLFixture(t testing.TB) ([]byte, []plot.Figure) {
	t.Helper()
	res := plottest.CapacityResults(plottest.DefaultCapacity())
	res.Provenance.Cost = &bundle.CostBasis{GPUHourUSD: 3.5, GPUs: 1}
	res.Recompute()
	figs, err := plot.Render(res)
	if err != nil {
		t.Fatal(err)
	}
	refs := make([]FigureRef, 0, len(figs))
	for _, f := range figs {
		refs = append(refs, FigureRef{File: f.Name, Title: f.Title, Caption: f.Caption})
	}
	page, err := HTML(res, Markdown(res, refs, nil), figs)
	if err != nil {
		t.Fatal(err)
	}
	return page, figs
}
