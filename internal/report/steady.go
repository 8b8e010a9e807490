package report

import (
	"bytes"
	"fmt"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/search"
)

// SteadyLine is a sustained aggregate's steady state in one line, beside
// the whole run's figures in parentheses: "steady window 12.1 s of 15.0 s
// (81%), 240 requests: goodput 1234.5 tok/s (whole run 1100.2), TTFT p50
// 0.120 s / p95 0.300 s (0.100 s / 0.280 s), …"; "" when it has none.
func SteadyLine(a contract.Aggregate) string {
	s := a.Steady
	if s == nil {
		return ""
	}
	if s.DurationS == 0 {
		return fmt.Sprintf("no steady window: never %d requests in flight", s.InFlightMin)
	}
	line := fmt.Sprintf("steady window %.1f s of %.1f s (%.0f%%), %d requests: goodput %s tok/s (whole run %s), TTFT p50 %s / p95 %s (%s / %s), TPOT p50 %s / p95 %s (%s / %s), E2E p50 %s / p95 %s (%s / %s)",
		s.DurationS, s.MeasuredS, 100*s.Share, s.N, median(s.Goodput), median(a.Goodput),
		Seconds(s.TTFT.P50), Seconds(s.TTFT.P95), Seconds(a.TTFT.P50), Seconds(a.TTFT.P95),
		Millis(s.TPOT.P50), Millis(s.TPOT.P95), Millis(a.TPOT.P50), Millis(a.TPOT.P95),
		Seconds(s.E2E.P50), Seconds(s.E2E.P95), Seconds(a.E2E.P50), Seconds(a.E2E.P95))
	if st, whole := s.SLO, a.SLO; st != nil && whole != nil {
		line += fmt.Sprintf("; attainment %s, %s (%s, %s)", Attainment(&st.SLOStanding),
			st.Verdict, Attainment(standing(whole)), whole.Verdict)
	}
	return line
}

func median(s contract.Spread) string {
	if s.Median == nil {
		return dash
	}
	return fmt.Sprintf("%.1f", *s.Median)
}

// steadyWarnings are a sustained aggregate's steady-state warnings, each
// marked as such: its short or missing windows, and a verdict its windows
// alone would change.
func steadyWarnings(a contract.Aggregate) []string {
	s := a.Steady
	if s == nil {
		return nil
	}
	var out []string
	for _, w := range s.Warnings {
		out = append(out, "steady state: "+w)
	}
	if s.SLO != nil && s.SLO.Warning != "" {
		out = append(out, "steady state: "+s.SLO.Warning)
	}
	return out
}

// writeSteady gives each sustained load's steady state beside its whole
// measured run.
func writeSteady(b *bytes.Buffer, res *bundle.Results) {
	var lines []string
	for _, a := range res.Aggregates {
		if l := SteadyLine(a); l != "" {
			lines = append(lines, fmt.Sprintf("- `%s` at %s: %s.", a.Server, a.LoadLabel(), l))
		}
	}
	if len(lines) == 0 {
		return
	}
	b.WriteString("## Steady state\n\n")
	fmt.Fprintf(b, "A sustained loop ramps up (the warm-up's last requests still ending) and drains (clients done, none sent). Its steady window runs from the first instant at least %.0f%% of its clients have a request in flight to the last instant fewer do (a dip in between stays inside); the figures over it are those of the requests sent inside it, beside the whole measured run's in parentheses. ", 100*contract.SteadyInFlightShare)
	fmt.Fprintf(b, "A window under %.0f%% of the measured run or with fewer than %d requests is flagged below.\n\n", 100*contract.SteadyShortShare, contract.SteadyMinRequests)
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
	b.WriteString("\n")
}

// SteadyProbeTable is each probe's steady window and the verdict over it,
// beside the probe's own (over every measured request, the one the search
// uses); a verdict the window alone would change is flagged.
func SteadyProbeTable(c search.Capacity) Section {
	sec := Section{Columns: []Column{
		{Head: "Probe", Short: "#"}, {Head: "Clients", Short: "clients"}, {Head: "Steady window", Short: "window"},
		{Head: "Good / requests", Short: "good/n"}, {Head: "Attainment [95% CI]", Short: "attainment [95% CI]"},
		{Head: "Steady verdict", Short: "steady"}, {Head: "Probe verdict", Short: "verdict"},
	}}
	for i, p := range c.Probes {
		s := p.Steady
		if s == nil {
			continue
		}
		window := dash
		if s.StartS != nil {
			window = fmt.Sprintf("%.1f s of %.1f s (%.0f%%)", s.DurationS, s.MeasuredS, 100*s.DurationS/max(s.MeasuredS, 1e-12))
		}
		verdict := s.Verdict
		if s.ChangesVerdict {
			verdict += " ⚠ changes the verdict"
		}
		attainment := dash
		if s.N > 0 {
			attainment = fmt.Sprintf("%.1f%% [%.1f–%.1f%%]", 100*s.Attainment, 100*s.CILow, 100*s.CIHigh)
		}
		sec.Rows = append(sec.Rows, []string{fmt.Sprint(i + 1), fmt.Sprint(p.Load), window, fmt.Sprintf("%d/%d", s.Good, s.N),
			attainment, verdict, p.Verdict})
	}
	return sec
}

// writeSteadyProbes writes a search's steady-window table and names each
// probe whose verdict its steady window alone would change.
func writeSteadyProbes(b *bytes.Buffer, c search.Capacity) {
	sec := SteadyProbeTable(c)
	if len(sec.Rows) == 0 {
		return
	}
	b.WriteString("\nSteady windows (the requests sent while at least 95% of the clients were in flight); the verdict stays on every measured request:\n\n")
	b.Write(sec.Markdown())
	for i, p := range c.Probes {
		if p.Steady != nil && p.Steady.ChangesVerdict {
			fmt.Fprintf(b, "\n**Steady window changes the verdict:** probe %d at %s: %s.\n", i+1, contract.ClientsLabel(p.Load), lastWarning(p.Steady.Warnings))
		}
	}
}

func lastWarning(ws []string) string {
	if len(ws) == 0 {
		return ""
	}
	return ws[len(ws)-1]
}
