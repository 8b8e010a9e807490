package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/bundle/bundletest"
	"github.com/rehearse/rehearse/internal/contract"
)

// The terminal and README.md show the same cells: the text rendering holds
// every cell of the markdown one, row for row.
func TestResultsTableRenderersAgree(t *testing.T) {
	res := bundletest.SeedLike()
	tab := ResultsTable(res)
	if len(tab.Closed.Rows) != len(res.Workload.Concurrencies) || len(tab.Open.Rows) != 0 {
		t.Fatalf("want a closed-loop row per concurrency and no open-loop row: %+v", tab)
	}
	var b bytes.Buffer
	if err := tab.Text(&b); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 1+len(tab.Closed.Rows) {
		t.Fatalf("want a header and a line per row:\n%s", b.String())
	}
	for i, row := range tab.Closed.Rows {
		for _, c := range row {
			if !strings.Contains(lines[i+1], c) {
				t.Errorf("line %d lacks %q: %s", i+1, c, lines[i+1])
			}
			if !strings.Contains(string(tab.Closed.Markdown()), "| "+c+" |") {
				t.Errorf("markdown lacks %q", c)
			}
		}
	}
	if tab.Baseline != "naive" || len(tab.Speedup) != 1 || tab.Speedup[0] != "batching" {
		t.Errorf("speed-up %v over %q, want [batching] over naive", tab.Speedup, tab.Baseline)
	}
}

// Without the baseline's aggregates there is nothing to divide by: no
// speed-up column, in either rendering.
func TestResultsTableNoSpeedupWithoutBaseline(t *testing.T) {
	res := bundletest.SeedLike()
	var kept []contract.Aggregate
	for _, a := range res.Aggregates {
		if a.Server != res.BaselineName() {
			kept = append(kept, a)
		}
	}
	res.Aggregates = kept
	tab := ResultsTable(res)
	for _, c := range tab.Closed.Columns {
		if strings.Contains(strings.ToLower(c.Head), "speed-up") || c.Server == res.BaselineName() {
			t.Errorf("column %+v without the baseline's aggregates", c)
		}
	}
}

// Open-loop aggregates make a section of their own, a row per rate from the
// lowest up, and never a speed-up column.
func TestResultsTableOpenSection(t *testing.T) {
	res := bundletest.SeedLike()
	for i := range res.Aggregates {
		a := &res.Aggregates[i]
		a.Mode, a.RequestRateRPS, a.Concurrency = contract.ModeOpen, float64(a.Concurrency)/2, 0
	}
	tab := ResultsTable(res)
	if len(tab.Closed.Rows) != 0 || len(tab.Open.Rows) != len(res.Workload.Concurrencies) {
		t.Fatalf("want only open-loop rows: %+v", tab)
	}
	if got := tab.Open.Rows[0][0]; got != "0.5" {
		t.Errorf("first rate %q, want 0.5", got)
	}
	for _, c := range tab.Open.Columns {
		if strings.Contains(c.Short, "speed-up") {
			t.Errorf("open-loop column %+v", c)
		}
	}
	var b bytes.Buffer
	ResultsTable(&bundle.Results{}).Text(&b)
	if !strings.Contains(b.String(), "No recorded waves") {
		t.Errorf("empty table printed %q", b.String())
	}
}

// README.md's Results show the whole table: a rehearsal of open-loop waves
// only has its rows there, under the same heads as a closed-loop one.
func TestMarkdownResultsHaveOpenLoopRows(t *testing.T) {
	res := bundletest.SeedLike()
	for i := range res.Aggregates {
		a := &res.Aggregates[i]
		a.Mode, a.RequestRateRPS, a.Concurrency = contract.ModeOpen, float64(a.Concurrency)/2, 0
	}
	md := string(Markdown(res, nil, nil))
	results, _, _ := strings.Cut(md[strings.Index(md, "## Results"):], "\n## ")
	for _, want := range []string{
		"| Rate, req/s | naive goodput, median [min–max] tok/s | batching goodput, median [min–max] tok/s | naive p95 TTFT |",
		"| 0.5 | " + Goodput(res.Aggregates[0].Goodput) + " |",
		"`naive` at 16 req/s: ",
	} {
		if !strings.Contains(results, want) {
			t.Errorf("Results lack %q:\n%s", want, results)
		}
	}
	if strings.Contains(results, "No recorded") || strings.Contains(results, "Speed-up") {
		t.Errorf("Results of open-loop waves:\n%s", results)
	}
}

// A ramp and a trace replay are rows of their own, after the constant
// rates, named by their labels, never merged with a rate of 0.
func TestResultsTableRampAndTraceRows(t *testing.T) {
	res := bundletest.SeedLike()
	shapes := []string{"", contract.Ramp{Strategy: "linear", StartRPS: 1, EndRPS: 20}.Label(), contract.TraceLabel, ""}
	var kept []contract.Aggregate
	for i, a := range res.Aggregates {
		a.Mode, a.Concurrency, a.LoadShape = contract.ModeOpen, 0, shapes[i%len(shapes)]
		if a.LoadShape == "" {
			a.RequestRateRPS = float64(1 + i%len(shapes))
		} else {
			a.RequestRateRPS = 0
		}
		kept = append(kept, a)
	}
	res.Aggregates = kept
	tab := ResultsTable(res)
	var loads []string
	for _, r := range tab.Open.Rows {
		loads = append(loads, r[0])
	}
	if want := "1 4 ramp 1→20 req/s trace replay"; strings.Join(loads, " ") != want {
		t.Errorf("open rows %q, want %q", loads, want)
	}
	md := string(Markdown(res, nil, nil))
	if !strings.Contains(md, "| ramp 1→20 req/s |") || !strings.Contains(md, "| trace replay |") {
		t.Errorf("README lacks the ramp and trace rows:\n%s", md)
	}
}
