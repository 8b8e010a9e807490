// Package compare puts two results bundles side by side: per server and load
// present in both, goodput medians with their run-to-run ranges, p95 TTFT
// and failure rates, with B ÷ A ratios, and per server searched in both,
// its capacity under the SLO; it flags goodput changes larger than the
// run-to-run range of either bundle, and evaluates CI gates such as
// "goodput<-5%" on every common row and "capacity<-10%" on every common
// capacity search.
package compare

import (
	"context"
	"fmt"
	"io"
	"math"
	"reflect"
	"sort"
	"strings"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/report"
)

// Rule is the flagging rule, stated in every output.
const Rule = "A goodput change is flagged (!) when B's median lies outside A's [min–max] of the repeats and A's median outside B's (a change larger than the run-to-run range of either bundle), and the medians differ by more than 1%."

// MinFlaggedChange is the smallest relative goodput change Rule flags, so
// that a change finer than the printed precision (two near-deterministic
// runs with tiny ranges) is never flagged.
const MinFlaggedChange = 0.01

// Options is what `rehearse compare` was asked.
type Options struct {
	// A and B are the bundle directories, A the reference.
	A, B     string
	Gates    []Gate
	Markdown bool
}

// Validate checks the options before any work.
func (o Options) Validate() error {
	if o.A == "" || o.B == "" {
		return fmt.Errorf("compare needs two bundle directories, A and B")
	}
	return nil
}

// Run reads both bundles, verifying each, compares them and writes the comparison to w as
// text or markdown. The error is about reading the bundles or writing w,
// or the interruption when ctx ends while they are read; tripped gates are
// in the report (Report.Tripped).
func Run(ctx context.Context, o Options, w io.Writer) (Report, error) {
	if err := o.Validate(); err != nil {
		return Report{}, err
	}
	a, aVLLM, err := load(ctx, o.A)
	if err != nil {
		return Report{}, fmt.Errorf("bundle A: %w", err)
	}
	b, bVLLM, err := load(ctx, o.B)
	if err != nil {
		return Report{}, fmt.Errorf("bundle B: %w", err)
	}
	r := compareSides(side{a, aVLLM}, side{b, bVLLM}, o.Gates)
	r.LabelA, r.LabelB = o.A, o.B
	if o.Markdown {
		err = r.Markdown(w)
	} else {
		err = r.Text(w)
	}
	return r, err
}

// load reads a bundle that verifies (a *bundle.UnverifiedError lists the
// problems of one that does not): a comparison or a CI gate cannot rest on
// figures verify would reject, nor on a bundle whose logs or records were
// changed after its digests were made. A path that is a file, not a
// folder, is read as a vLLM result JSON (ReadVLLM), and vllm says so.
func load(ctx context.Context, path string) (res *bundle.Results, vllm bool, err error) {
	if isFile(path) {
		res, err = ReadVLLM(ctx, path)
		return res, true, err
	}
	res, err = bundle.ReadVerifiedHead(ctx, path)
	return res, false, err
}

// side is one side of a comparison: a bundle's results, or a vLLM result
// JSON's (aggregates only).
type side struct {
	res  *bundle.Results
	vllm bool
}

// Row is one server at one load present in both bundles.
type Row struct {
	Server string
	// Load is "64 clients" (closed loop) or "2.5 req/s" (open loop).
	Load string
	A, B contract.Aggregate
	// GoodputRatio is B's median goodput ÷ A's, nil where A's is 0 or
	// either is absent; TTFTP95Ratio likewise for p95 TTFT.
	GoodputRatio *float64
	TTFTP95Ratio *float64
	// GoodputChanged is the flagging rule (Rule) applied to goodput.
	GoodputChanged bool
	// FailureRateDelta is B's failure rate minus A's.
	FailureRateDelta float64
}

// GateResult is one gate evaluated on every common row.
type GateResult struct {
	Gate Gate
	// Tripped describes each row where the gate tripped.
	Tripped []string
	// Evaluated counts rows where the gate could be computed; Skipped
	// says why the others could not.
	Evaluated int
	Skipped   []string
}

// Report is the comparison of bundle B against bundle A.
type Report struct {
	LabelA, LabelB string
	Rows           []Row
	// OnlyA and OnlyB list server×load pairs present in one bundle only.
	OnlyA, OnlyB []string
	// Notes say where the two rehearsals differ in what they asked.
	Notes []string
	Gates []GateResult
	// Capacity pairs the capacity searches of the servers searched in
	// both bundles (OnlyA and OnlyB name the others).
	Capacity []CapacityRow
}

// compareSides compares side b against side a, per server and load
// present in both, in a's order, and evaluates gates on every such row.
// Either side may be a vLLM result JSON: its loads are held against the other side's servers, and
// only what both sides record is said to differ.
func compareSides(sa, sb side, gates []Gate) Report {
	a, b := sa.res, sb.res
	switch {
	case sa.vllm && !sb.vllm:
		a = cloneAggregates(a)
		alignServers(a, b)
	case sb.vllm && !sa.vllm:
		b = cloneAggregates(b)
		alignServers(b, a)
	}
	r := Report{LabelA: "A", LabelB: "B"}
	inB := map[contract.Key]contract.Aggregate{}
	for _, ag := range b.Aggregates {
		inB[ag.Key()] = ag
	}
	inA := map[contract.Key]bool{}
	for _, ag := range a.Aggregates {
		k := ag.Key()
		inA[k] = true
		bg, ok := inB[k]
		if !ok {
			r.OnlyA = append(r.OnlyA, k.Server+" at "+k.LoadLabel())
			continue
		}
		row := Row{Server: k.Server, Load: k.LoadLabel(), A: ag, B: bg,
			GoodputRatio: ratio(ag.Goodput.Median, bg.Goodput.Median),
			TTFTP95Ratio: ratio(ag.TTFT.P95, bg.TTFT.P95),
		}
		row.GoodputChanged = beyondRanges(ag.Goodput, bg.Goodput)
		row.FailureRateDelta = bg.Failures.Rate - ag.Failures.Rate
		r.Rows = append(r.Rows, row)
	}
	for _, bg := range b.Aggregates {
		if k := bg.Key(); !inA[k] {
			r.OnlyB = append(r.OnlyB, k.Server+" at "+k.LoadLabel())
		}
	}
	if sa.vllm || sb.vllm {
		r.Notes = vllmDifferences(sa, sb)
	} else {
		r.Notes = differences(a, b)
	}
	capRows, onlyA, onlyB, capNotes := capacityRows(a, b)
	r.Capacity = capRows
	r.OnlyA, r.OnlyB = append(r.OnlyA, onlyA...), append(r.OnlyB, onlyB...)
	r.Notes = append(r.Notes, capNotes...)
	for _, g := range gates {
		if g.Metric == CapacityMetric {
			r.Gates = append(r.Gates, evaluateCapacity(g, r.Capacity))
			continue
		}
		r.Gates = append(r.Gates, evaluate(g, r.Rows))
	}
	return r
}

func ratio(a, b *float64) *float64 {
	if a == nil || b == nil || *a == 0 {
		return nil
	}
	v := *b / *a
	return &v
}

// beyondRanges is Rule: B's median outside A's [min–max] and A's median
// outside B's, by more than MinFlaggedChange.
func beyondRanges(a, b contract.Spread) bool {
	if a.Median == nil || b.Median == nil || a.Min == nil || a.Max == nil || b.Min == nil || b.Max == nil {
		return false
	}
	outside := func(x, lo, hi float64) bool { return x < lo || x > hi }
	if *a.Median != 0 && math.Abs(*b.Median / *a.Median - 1) <= MinFlaggedChange {
		return false
	}
	return outside(*b.Median, *a.Min, *a.Max) && outside(*a.Median, *b.Min, *b.Max)
}

func evaluate(g Gate, rows []Row) GateResult {
	res := GateResult{Gate: g}
	met, _ := contract.MetricNamed(g.Metric)
	matched := 0
	for _, row := range rows {
		if g.Server != "" && row.Server != g.Server {
			continue
		}
		matched++
		where := row.Server + " at " + row.Load
		va, vb := met.Value(row.A), met.Value(row.B)
		if va == nil || vb == nil {
			side := "A"
			if va != nil {
				side = "B"
			} else if vb == nil {
				side = "A and B"
			}
			res.Skipped = append(res.Skipped, fmt.Sprintf("%s: %s has no %s (%s)", where, side, g.Metric, met.AbsentReason()))
			continue
		}
		change := *vb - *va
		if g.Relative {
			if *va == 0 {
				res.Skipped = append(res.Skipped, fmt.Sprintf("%s: A's %s is 0, so a relative change means nothing", where, g.Metric))
				continue
			}
			change /= *va
		}
		res.Evaluated++
		if (g.Op == '<' && change < g.Threshold) || (g.Op == '>' && change > g.Threshold) {
			res.Tripped = append(res.Tripped, fmt.Sprintf("%s: %s → %s (%s)", where, report.Value(met, *va), report.Value(met, *vb), formatChange(g, change)))
		}
	}
	if matched == 0 && g.Server != "" {
		res.Skipped = append(res.Skipped, fmt.Sprintf("no row of server %q is present in both bundles", g.Server))
	}
	return res
}

func formatChange(g Gate, change float64) string {
	if g.Relative {
		return report.Change(&change)
	}
	met, _ := contract.MetricNamed(g.Metric)
	return report.Difference(met, change)
}

// Tripped lists every tripped gate row, and every gate that could be
// evaluated on no row (a gate that tests nothing must not pass silently).
func (r Report) Tripped() []string {
	var out []string
	for _, g := range r.Gates {
		for _, t := range g.Tripped {
			out = append(out, g.Gate.Text+": "+t)
		}
		if g.Evaluated == 0 {
			out = append(out, g.Gate.Text+": evaluated on no server and load present in both bundles")
		}
	}
	return out
}

// cloneAggregates copies r with its own aggregate and server slices.
func cloneAggregates(r *bundle.Results) *bundle.Results {
	c := *r
	c.Aggregates = append([]contract.Aggregate(nil), r.Aggregates...)
	c.Servers = append([]bundle.Server(nil), r.Servers...)
	return &c
}

// vllmDifferences are the notes of a comparison with a vLLM result JSON:
// what that side is, and the models where both name one (nothing else of
// the workload is in such a file).
func vllmDifferences(sa, sb side) []string {
	var notes []string
	for _, s := range []struct {
		name string
		side
	}{{"A", sa}, {"B", sb}} {
		if s.vllm {
			notes = append(notes, s.name+" "+VLLMNote)
		}
	}
	ma, mb := sa.res.Provenance.Model.ID, sb.res.Provenance.Model.ID
	if ma != "" && mb != "" && ma != mb {
		notes = append(notes, fmt.Sprintf("models differ: A %v, B %v", ma, mb))
	}
	return notes
}

// differences notes where the two rehearsals asked different things, so a
// reader knows when a ratio compares unlike workloads.
func differences(a, b *bundle.Results) []string {
	var notes []string
	diff := func(what string, x, y any) {
		if !reflect.DeepEqual(x, y) {
			notes = append(notes, fmt.Sprintf("%s differ: A %v, B %v", what, x, y))
		}
	}
	wa, wb := a.Workload, b.Workload
	diff("models", a.Provenance.Model.ID, b.Provenance.Model.ID)
	diff("max_tokens", wa.MaxTokens, wb.MaxTokens)
	diff("repeats", wa.Repeats, wb.Repeats)
	diff("client timeouts (s)", wa.TimeoutS, wb.TimeoutS)
	diff("temperatures", wa.Temperature, wb.Temperature)
	diff("warm-up waves", wa.WarmupWaves, wb.WarmupWaves)
	diff("warm-up waves per load", wa.WarmupWavesPerLoad, wb.WarmupWavesPerLoad)
	if !reflect.DeepEqual(wa.Prompts, wb.Prompts) {
		notes = append(notes, fmt.Sprintf("prompts differ (A %d, B %d)", len(wa.Prompts), len(wb.Prompts)))
	}
	diff("output token sources", a.Provenance.OutputTokensSource, b.Provenance.OutputTokensSource)
	if sa, sb := sloText(a.SLO), sloText(b.SLO); sa != sb {
		notes = append(notes, fmt.Sprintf("SLO objectives differ: A %s, B %s", sa, sb))
	}
	if (a.Provenance.Simulation == nil) != (b.Provenance.Simulation == nil) {
		notes = append(notes, "one bundle is simulated and the other is not")
	}
	gpu := func(r *bundle.Results) string {
		var names []string
		for _, g := range r.Provenance.GPUs {
			names = append(names, g.Name)
		}
		sort.Strings(names)
		return strings.Join(names, "+")
	}
	diff("GPUs", gpu(a), gpu(b))
	return notes
}

// Text writes the comparison as an aligned plain-text table.
func (r Report) Text(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "A: %s\nB: %s\n\n", r.LabelA, r.LabelB)
	head := []string{"server", "load", "goodput A tok/s", "goodput B tok/s", "B/A", "p95 TTFT A", "p95 TTFT B", "B/A", "failures A", "failures B"}
	rows := [][]string{head}
	for _, row := range r.Rows {
		rows = append(rows, cells(row, false))
	}
	writeAligned(&b, rows)
	fmt.Fprintf(&b, "\n%s\n", Rule)
	writeCapacity(&b, r, false)
	writeTail(&b, r, false)
	_, err := io.WriteString(w, b.String())
	return err
}

// Markdown writes the comparison as a markdown table.
func (r Report) Markdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "## Comparison\n\n- A: `%s`\n- B: `%s`\n\n", r.LabelA, r.LabelB)
	b.WriteString("| Server | Load | Goodput A, median [min–max] tok/s | Goodput B, median [min–max] tok/s | B/A | p95 TTFT A | p95 TTFT B | B/A | Failures A | Failures B |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, row := range r.Rows {
		cs := cells(row, true)
		b.WriteString("| " + strings.Join(cs, " | ") + " |\n")
	}
	fmt.Fprintf(&b, "\n%s\n", strings.Replace(Rule, "(!)", "(**!**)", 1))
	writeCapacity(&b, r, true)
	writeTail(&b, r, true)
	_, err := io.WriteString(w, b.String())
	return err
}

func cells(row Row, md bool) []string {
	gr := report.Ratio(row.GoodputRatio)
	if row.GoodputChanged {
		if md {
			gr = "**" + gr + " !**"
		} else {
			gr += " !"
		}
	}
	server := row.Server
	if md {
		server = "`" + strings.ReplaceAll(server, "|", `\|`) + "`"
	}
	return []string{
		server, row.Load,
		report.Goodput(row.A.Goodput), report.Goodput(row.B.Goodput), gr,
		report.Seconds(row.A.TTFT.P95), report.Seconds(row.B.TTFT.P95), report.Ratio(row.TTFTP95Ratio),
		report.FailureCount(row.A.Failures), report.FailureCount(row.B.Failures),
	}
}

func writeTail(b *strings.Builder, r Report, md bool) {
	item, sub := "  ", "    "
	if md {
		item, sub = "- ", "  - "
	}
	section := func(title string) {
		if md {
			fmt.Fprintf(b, "\n### %s\n\n", title)
		} else {
			fmt.Fprintf(b, "\n%s:\n", title)
		}
	}
	if len(r.Rows) == 0 && len(r.Capacity) == 0 {
		section("Nothing to compare")
		fmt.Fprintf(b, "%sno server and load is present in both bundles\n", item)
	}
	if len(r.OnlyA)+len(r.OnlyB) > 0 {
		section("Present in one bundle only")
		for _, s := range r.OnlyA {
			fmt.Fprintf(b, "%sonly in A: %s\n", item, s)
		}
		for _, s := range r.OnlyB {
			fmt.Fprintf(b, "%sonly in B: %s\n", item, s)
		}
	}
	if len(r.Notes) > 0 {
		section("The rehearsals differ")
		for _, n := range r.Notes {
			fmt.Fprintf(b, "%s%s\n", item, n)
		}
	}
	if len(r.Gates) > 0 {
		section("Gates")
		for _, g := range r.Gates {
			var status string
			switch {
			case len(g.Tripped) > 0:
				status = fmt.Sprintf("TRIPPED on %d of %d rows", len(g.Tripped), g.Evaluated)
			case g.Evaluated == 0:
				status = "TRIPPED: evaluated on no row"
			default:
				status = fmt.Sprintf("passed on %d rows", g.Evaluated)
			}
			name := g.Gate.Text
			if md {
				name = "`" + name + "`"
			}
			fmt.Fprintf(b, "%s%s: %s\n", item, name, status)
			for _, t := range g.Tripped {
				fmt.Fprintf(b, "%stripped: %s\n", sub, t)
			}
			for _, s := range g.Skipped {
				fmt.Fprintf(b, "%snot evaluated: %s\n", sub, s)
			}
		}
	}
}

// writeAligned writes rows as columns padded to their widest cell (by
// rune count, so "–" and "×" align), the first two to the left.
func writeAligned(b *strings.Builder, rows [][]string) { writeAlignedLeft(b, rows, 2) }

// writeAlignedLeft is writeAligned with the first left columns to the left.
func writeAlignedLeft(b *strings.Builder, rows [][]string, left int) {
	widths := map[int]int{}
	for _, row := range rows {
		for i, c := range row {
			if n := len([]rune(c)); n > widths[i] {
				widths[i] = n
			}
		}
	}
	for _, row := range rows {
		for i, c := range row {
			pad := widths[i] - len([]rune(c))
			if i < left {
				b.WriteString(c + strings.Repeat(" ", pad))
			} else {
				b.WriteString(strings.Repeat(" ", pad) + c)
			}
			if i < len(row)-1 {
				b.WriteString("  ")
			}
		}
		b.WriteString("\n")
	}
}

func sloText(s *contract.SLO) string {
	if s == nil {
		return "none"
	}
	return fmt.Sprintf("%s at %v", s.Objectives.String(), s.AttainmentTarget)
}
