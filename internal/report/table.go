package report

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
)

// Table is the results table in the seed's layout, as data: a closed-loop
// section with a row per concurrency, a sustained closed-loop section with a
// row per concurrency ("16 clients, sustained") and an open-loop section
// with a row per request rate, each with a column per server for goodput (median
// [min–max]), speed-up over the baseline (closed loop only), p95 TTFT and
// failures. Every cell is formatted already; the renderers, Markdown for
// README.md and Text for a terminal, only lay the cells out.
type Table struct {
	Closed, Sustained, Open Section
	// Baseline is the speed-up's denominator, and Speedup the servers with
	// a speed-up column, in column order; none when the baseline has no
	// closed-loop aggregate.
	Baseline string
	Speedup  []string
}

// Section is one part of a Table; with no rows, the part is absent.
type Section struct {
	Columns []Column
	Rows    [][]string
}

// Column is a column of a Section under two heads: Head, which says in full
// what the column holds for a reader of README.md, and Short, the same in a
// terminal's width.
type Column struct {
	// Server is the server whose figures the column holds; "" for the load.
	Server      string
	Head, Short string
}

// Empty reports whether the table has no row at all.
func (t Table) Empty() bool {
	return len(t.Closed.Rows) == 0 && len(t.Sustained.Rows) == 0 && len(t.Open.Rows) == 0
}

// ResultsTable builds the results table of res from its aggregates. Servers
// appear in the order of res.Servers (a server without an aggregate in a
// section has no column there), loads from the lowest up.
func ResultsTable(res *bundle.Results) Table {
	closed := groupByLoad(res, contract.ModeClosed)
	sustained := groupByLoad(res, contract.ModeSustained)
	open := groupByLoad(res, contract.ModeOpen)
	t := Table{Baseline: res.BaselineName()}
	if _, ok := closed.by[t.Baseline]; ok {
		for _, s := range closed.servers {
			if s != t.Baseline {
				t.Speedup = append(t.Speedup, s)
			}
		}
	}
	t.Closed = closed.section(Column{Head: "Clients", Short: "clients"}, t.Speedup,
		func(a contract.Aggregate) string { return fmt.Sprint(a.Concurrency) })
	t.Sustained = sustained.section(Column{Head: "Load", Short: "load"}, nil,
		func(a contract.Aggregate) string { return a.LoadLabel() })
	t.Open = open.section(Column{Head: "Rate, req/s", Short: "req/s"}, nil, openLoad)
	return t
}

// openLoad is an open-loop row's load: its rate, or the ramp or trace
// replay that no single rate names.
func openLoad(a contract.Aggregate) string {
	if a.LoadShape != "" {
		return a.LoadShape
	}
	return Number(a.RequestRateRPS)
}

// load is one row of a section: a concurrency or a rate, and for open
// loads the shape no single rate names (rows of constant rates first).
type load struct {
	value float64
	shape string
}

// loadGroups are the aggregates of one mode by server and load.
type loadGroups struct {
	servers []string
	loads   []load
	by      map[string]map[load]contract.Aggregate
}

func groupByLoad(res *bundle.Results, mode string) loadGroups {
	g := loadGroups{by: map[string]map[load]contract.Aggregate{}}
	seen := map[load]bool{}
	for _, a := range res.Aggregates {
		if a.Mode != mode {
			continue
		}
		l := load{value: float64(a.Concurrency)}
		if mode == contract.ModeOpen {
			l = load{value: a.RequestRateRPS, shape: a.LoadShape}
		}
		if g.by[a.Server] == nil {
			g.by[a.Server] = map[load]contract.Aggregate{}
		}
		g.by[a.Server][l] = a
		if !seen[l] {
			seen[l] = true
			g.loads = append(g.loads, l)
		}
	}
	sort.SliceStable(g.loads, func(i, j int) bool {
		a, b := g.loads[i], g.loads[j]
		if (a.shape == "") != (b.shape == "") {
			return a.shape == ""
		}
		if a.value != b.value {
			return a.value < b.value
		}
		return a.shape < b.shape
	})
	// Servers in the bundle's order, then any only the aggregates name.
	for _, s := range res.ServerNames() {
		if _, ok := g.by[s]; ok && !slices.Contains(g.servers, s) {
			g.servers = append(g.servers, s)
		}
	}
	for _, a := range res.Aggregates {
		if _, ok := g.by[a.Server]; ok && !slices.Contains(g.servers, a.Server) {
			g.servers = append(g.servers, a.Server)
		}
	}
	return g
}

func (g loadGroups) section(load Column, speedup []string, label func(contract.Aggregate) string) Section {
	if len(g.loads) == 0 {
		return Section{}
	}
	// Goodput per GPU, for the servers whose GPU count is known.
	var perGPU []string
	for _, s := range g.servers {
		for _, a := range g.by[s] {
			if a.GoodputPerGPU != nil {
				perGPU = append(perGPU, s)
				break
			}
		}
	}
	type part struct {
		servers     []string
		head, short func(server string) string
		cell        func(contract.Aggregate) string
	}
	parts := []part{
		{g.servers, func(s string) string { return s + " goodput, median [min–max] tok/s" }, func(s string) string { return s + " tok/s" },
			func(a contract.Aggregate) string { return Goodput(a.Goodput) }},
		{perGPU, func(s string) string { return s + " goodput per GPU, median [min–max] tok/s" }, func(s string) string { return s + " tok/s/GPU" },
			goodputPerGPU},
		{speedup, func(s string) string {
			if len(speedup) == 1 {
				return "Speed-up"
			}
			return s + " speed-up"
		}, func(s string) string { return s + " speed-up" },
			func(a contract.Aggregate) string { return Speedup(a.SpeedupVsBaseline) }},
		{g.servers, func(s string) string { return s + " p95 TTFT" }, func(s string) string { return s + " p95 TTFT" },
			func(a contract.Aggregate) string { return Seconds(a.TTFT.P95) }},
		{g.servers, func(s string) string { return s + " failures" }, func(s string) string { return s + " failures" },
			func(a contract.Aggregate) string { return FailureCount(a.Failures) }},
	}
	sec := Section{Columns: []Column{load}}
	for _, p := range parts {
		for _, s := range p.servers {
			sec.Columns = append(sec.Columns, Column{Server: s, Head: p.head(s), Short: p.short(s)})
		}
	}
	for _, l := range g.loads {
		var row []string
		for _, s := range g.servers {
			if a, ok := g.by[s][l]; ok {
				row = []string{label(a)}
				break
			}
		}
		for _, p := range parts {
			for _, s := range p.servers {
				a, ok := g.by[s][l]
				if !ok {
					row = append(row, dash)
					continue
				}
				row = append(row, p.cell(a))
			}
		}
		sec.Rows = append(sec.Rows, row)
	}
	return sec
}

// Markdown renders the section as a markdown table, every column aligned
// right, or nothing when it has no rows.
func (s Section) Markdown() []byte {
	if len(s.Rows) == 0 {
		return nil
	}
	var b bytes.Buffer
	head := make([]string, len(s.Columns))
	align := make([]string, len(s.Columns))
	for i, c := range s.Columns {
		head[i], align[i] = c.Head, "---:"
	}
	writeRow(&b, head)
	writeRow(&b, align)
	for _, r := range s.Rows {
		writeRow(&b, r)
	}
	return b.Bytes()
}

// Text writes the section for a terminal: the short heads, columns aligned
// right by text/tabwriter, or nothing when it has no rows.
func (s Section) Text(w io.Writer) error {
	if len(s.Rows) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := make([]string, len(s.Columns))
	for i, c := range s.Columns {
		head[i] = c.Short
	}
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	for _, r := range s.Rows {
		fmt.Fprintln(tw, strings.Join(r, "\t")+"\t")
	}
	return tw.Flush()
}

// Text writes the table for a terminal: the closed-loop section, the
// sustained one and the open-loop one, a blank line between two, or one
// line saying there is no table.
func (t Table) Text(w io.Writer) error {
	if t.Empty() {
		_, err := fmt.Fprintln(w, "No recorded waves finished: there is no results table.")
		return err
	}
	first := true
	for _, s := range []Section{t.Closed, t.Sustained, t.Open} {
		if len(s.Rows) == 0 {
			continue
		}
		if !first {
			if _, err := fmt.Fprintln(w); err != nil {
				return err
			}
		}
		first = false
		if err := s.Text(w); err != nil {
			return err
		}
	}
	return nil
}

// SummaryTable is one server's figures at a glance, as bench prints them:
// a row per aggregate (server, load, goodput median [min–max], p50 and p95
// TTFT, p95 TPOT, open-loop p99 lateness, failures with their kinds, and
// where the results have objectives SLO attainment with its interval and
// the median request goodput),
// rendered by the same Section.Text as the results table.
func SummaryTable(res *bundle.Results) Section {
	sec := Section{Columns: []Column{
		{Head: "Server", Short: "server"}, {Head: "Load", Short: "load"},
		{Head: "Goodput, median [min–max] tok/s", Short: "goodput tok/s"},
		{Head: "p50 TTFT", Short: "p50 TTFT"}, {Head: "p95 TTFT", Short: "p95 TTFT"},
		{Head: "p95 TPOT", Short: "p95 TPOT"}, {Head: "p99 lateness", Short: "p99 lateness"},
		{Head: "Failures", Short: "failures"},
	}}
	for _, a := range res.Aggregates {
		late := dash
		if a.Mode == contract.ModeOpen && a.Lateness != nil {
			late = Seconds(a.Lateness.P99)
		}
		row := []string{a.Server, a.LoadLabel(), Goodput(a.Goodput),
			Seconds(a.TTFT.P50), Seconds(a.TTFT.P95), Seconds(a.TPOT.P95), late, FailuresByKind(a.Failures)}
		if res.SLO != nil {
			row = append(row, Attainment(standing(a.SLO)), sloGoodput(a.SLO))
		}
		sec.Rows = append(sec.Rows, row)
	}
	if res.SLO != nil {
		sec.Columns = append(sec.Columns,
			Column{Head: "SLO attainment [95% CI]", Short: "attainment [95% CI]"},
			Column{Head: "Request goodput, median req/s", Short: "good req/s"})
	}
	return sec
}

// FailuresByKind is FailureCount followed by the kinds of the failures, in
// contract.ErrorKinds order: "2/3 (66.7%) (timeout 1, http_status 1)".
func FailuresByKind(f contract.Failures) string {
	s := FailureCount(f)
	if f.Count == 0 {
		return s
	}
	var parts []string
	for _, k := range contract.ErrorKinds {
		if n := f.ByKind[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, n))
		}
	}
	return s + " (" + strings.Join(parts, ", ") + ")"
}

// Warnings lists every aggregate's warnings, its steady-state ones
// (marked "steady state:") after them, each with where it holds:
// "vllm at 1 client: repeat 1 is a cold wave …".
func Warnings(res *bundle.Results) []string {
	var lines []string
	for _, a := range res.Aggregates {
		for _, w := range append(slices.Clip(a.Warnings), steadyWarnings(a)...) {
			lines = append(lines, a.Server+" at "+a.LoadLabel()+": "+w)
		}
	}
	return lines
}

// sloGoodput is the median request goodput of an aggregate's SLO figures.
func sloGoodput(s *contract.SLOAggregate) string {
	if s == nil || s.RequestGoodput.Median == nil {
		return dash
	}
	return fmt.Sprintf("%.2f", *s.RequestGoodput.Median)
}
