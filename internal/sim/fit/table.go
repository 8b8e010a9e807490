package fit

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// validateValue formats a metric's value: goodput in tok/s, throughput in
// req/s, latencies in ms.
func validateValue(metric string, v *float64) string {
	if v == nil {
		return "—"
	}
	switch {
	case strings.HasSuffix(metric, "_tok_s"):
		return fmt.Sprintf("%.1f tok/s", *v)
	case strings.HasSuffix(metric, "_rps"):
		return fmt.Sprintf("%.3f req/s", *v)
	}
	return fmt.Sprintf("%.1f ms", 1000**v)
}

// validateError formats a row's error: relative, or absolute (with the
// relative beside it) for a small TTFT.
func validateError(r *ErrorRow) string {
	if r == nil || r.Error == nil {
		return "—"
	}
	rel := fmt.Sprintf("%+.1f %%", 100**r.Error)
	if r.JudgedBy == "absolute" && r.AbsError != nil {
		return fmt.Sprintf("%+.1f ms (%s)", 1000**r.AbsError, rel)
	}
	if r.WithinGoal != nil && !*r.WithinGoal {
		return rel + " !"
	}
	return rel
}

// validatePair is the predictor's and the live run's row of one metric.
type validatePair struct {
	server, load, metric string
	pred, live           *ErrorRow
}

func validatePairs(rows []ErrorRow) []validatePair {
	var out []validatePair
	for i := range rows {
		r := &rows[i]
		j := slices.IndexFunc(out, func(p validatePair) bool { return p.server == r.Server && p.load == r.Load && p.metric == r.Metric })
		if j < 0 {
			out = append(out, validatePair{server: r.Server, load: r.Load, metric: r.Metric})
			j = len(out) - 1
		}
		if r.Source == SourceLive {
			out[j].live = r
		} else {
			out[j].pred = r
		}
	}
	return out
}

func measuredOf(p validatePair) *float64 {
	if p.pred != nil {
		return p.pred.Measured
	}
	if p.live != nil {
		return p.live.Measured
	}
	return nil
}

func predictedOf(r *ErrorRow) *float64 {
	if r == nil {
		return nil
	}
	return r.Predicted
}

// WriteTable writes the error table of rows, as aligned text or, with
// markdown, as a Markdown table, and its legend.
func WriteTable(w io.Writer, rows []ErrorRow, markdown bool) {
	if markdown {
		writeMarkdown(w, rows)
		return
	}
	writeText(w, rows)
}

func writeText(w io.Writer, rows []ErrorRow) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "server\tload\tmetric\tmeasured\tpredictor\terror\tlive\terror\n")
	for _, p := range validatePairs(rows) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.server, p.load, p.metric,
			validateValue(p.metric, measuredOf(p)), validateValue(p.metric, predictedOf(p.pred)), validateError(p.pred),
			validateValue(p.metric, predictedOf(p.live)), validateError(p.live))
	}
	tw.Flush()
	writeLegend(w)
}

func writeMarkdown(w io.Writer, rows []ErrorRow) {
	fmt.Fprintf(w, "| server | load | metric | measured | predictor | error | live | error |\n")
	fmt.Fprintf(w, "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |\n")
	for _, p := range validatePairs(rows) {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", p.server, p.load, p.metric,
			validateValue(p.metric, measuredOf(p)), validateValue(p.metric, predictedOf(p.pred)), validateError(p.pred),
			validateValue(p.metric, predictedOf(p.live)), validateError(p.live))
	}
	fmt.Fprintln(w)
	writeLegend(w)
}

func writeLegend(w io.Writer) {
	fmt.Fprintf(w, "Error = (predicted − measured) ÷ measured; \"!\" marks a goal metric (goodput, E2E, TPOT) outside ±%.0f %%; a TTFT under %.0f ms is judged by its absolute error. Output tokens are counted as generated (usage) on every side.\n",
		100*ValidateGoal, 1000*SmallTTFTS)
}
