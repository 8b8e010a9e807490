package report

import (
	"fmt"
	"math"
	"strings"

	"github.com/rehearse/rehearse/internal/contract"
)

const dash = "—"

// Goodput formats a spread in the seed's form: 19.7 [10.2–20.2].
func Goodput(s contract.Spread) string {
	if s.Median == nil || s.Min == nil || s.Max == nil {
		return dash
	}
	return fmt.Sprintf("%.1f [%.1f–%.1f]", *s.Median, *s.Min, *s.Max)
}

// Speedup formats a ratio as 48.6×.
func Speedup(v *float64) string {
	if v == nil {
		return dash
	}
	return fmt.Sprintf("%.1f×", *v)
}

// Ratio formats a ratio of two figures of one kind, such as B's goodput over
// A's, to two decimals: 0.98×; a missing or infinite one is a dash.
func Ratio(v *float64) string {
	if v == nil || math.IsInf(*v, 0) || math.IsNaN(*v) {
		return dash
	}
	return fmt.Sprintf("%.2f×", *v)
}

// Change formats a relative change with its sign: −0.177 is -17.7%.
func Change(v *float64) string {
	if v == nil {
		return dash
	}
	return fmt.Sprintf("%+.1f%%", 100**v)
}

// Value formats a value of a metric of contract's table in its unit:
// 66.2 tok/s, 0.156 s, or a fraction as 5.2%.
func Value(m contract.Metric, v float64) string {
	switch m.Unit {
	case contract.Fraction:
		return fmt.Sprintf("%.1f%%", 100*v)
	case contract.Seconds:
		return Seconds(&v)
	}
	return fmt.Sprintf("%.1f %s", v, m.Unit)
}

// Difference formats the difference of two values of a metric in its unit,
// with its sign: +12.0 tok/s, -0.004 s, or +1.5 pp for fractions.
func Difference(m contract.Metric, d float64) string {
	switch m.Unit {
	case contract.Fraction:
		return fmt.Sprintf("%+.1f pp", 100*d)
	case contract.Seconds:
		return fmt.Sprintf("%+.3f s", d)
	}
	return fmt.Sprintf("%+.1f %s", d, m.Unit)
}

// Seconds formats a latency as 0.225 s.
func Seconds(v *float64) string {
	if v == nil {
		return dash
	}
	return fmt.Sprintf("%.3f s", *v)
}

// Bounded formats a tail percentile with its upper confidence bound
// (Percentiles.P95UB, P99UB) as format formats each: "0.412 s (≤ 0.455 s)",
// or the percentile alone where there is no bound.
func Bounded(format func(*float64) string, v, ub *float64) string {
	if v == nil || ub == nil {
		return format(v)
	}
	return format(v) + " (≤ " + format(ub) + ")"
}

// Millis formats a short latency as 12.3 ms.
func Millis(v *float64) string {
	if v == nil {
		return dash
	}
	return fmt.Sprintf("%.1f ms", *v*1000)
}

// FailureCount formats failures as 54/96 (56.3%).
func FailureCount(f contract.Failures) string {
	return fmt.Sprintf("%d/%d (%s)", f.Count, f.Total, Percent(f.Count, f.Total))
}

// Percent formats count/total as a percentage with one decimal, except the
// exact ends 0% and 100%. A share that is neither end never rounds to one:
// 1/20000 is "<0.1%" and 19999/20000 ">99.9%".
func Percent(count, total int) string {
	switch {
	case total == 0 || count == 0:
		return "0%"
	case count == total:
		return "100%"
	}
	// Half up, as the seed's report rounds (54/96 is 56.3%).
	tenths := math.Floor(1000*float64(count)/float64(total) + 0.5)
	switch {
	case tenths < 1:
		return "<0.1%"
	case tenths > 999:
		return ">99.9%"
	}
	return fmt.Sprintf("%.1f%%", tenths/10)
}

// Number formats a float with up to 3 decimals, no trailing zeros.
func Number(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	s := fmt.Sprintf("%.3f", v)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// Ints joins integers with ", ".
func Ints(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprint(x)
	}
	return strings.Join(parts, ", ")
}

// Argv renders an argv for reading, quoting words that need it.
func Argv(argv []string) string {
	parts := make([]string, len(argv))
	for i, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`|&;<>(){}*?#~") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		parts[i] = a
	}
	return strings.Join(parts, " ")
}

// cell escapes text for a markdown table cell.
func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}

// Tokens formats a token count figure (a mean or a percentile of lengths)
// to one decimal, trailing zeros dropped: 96, 112.5; nil is a dash.
func Tokens(v *float64) string {
	if v == nil {
		return dash
	}
	return Number(math.Round(*v*10) / 10)
}

// LengthSpread formats a length population's p50 / p90 / p99 in tokens.
func LengthSpread(l contract.Lengths) string {
	if l.N == 0 {
		return dash
	}
	return Tokens(l.P50) + " / " + Tokens(l.P90) + " / " + Tokens(l.P99)
}
