package report

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/plot"
	"github.com/rehearse/rehearse/internal/search"
)

// CapacitySentence is a search's answer in one sentence (SPEC §8): "batching
// sustains 18 concurrent clients (≈ 52.0 req/s, 6100 tok/s) with ≥ 95% of
// requests meeting TTFT ≤ 500 ms, TPOT ≤ 50 ms; fails at 19 (binding: ttft)."
func CapacitySentence(c search.Capacity) string {
	s := capacitySentence(c)
	if len(c.NonMonotonic) > 0 {
		nm := c.NonMonotonic[0]
		s += fmt.Sprintf(" Not monotonic: a probe passed at %s where one failed at %d, so the boundary is noisy there (see the probes).", contract.ClientsLabel(nm.PassLoad), nm.FailLoad)
	}
	return s
}

func capacitySentence(c search.Capacity) string {
	goal := fmt.Sprintf("≥ %s of requests meeting %s", pct(c.AttainmentTarget), Objectives(c.Objectives))
	sustains := func() string {
		s := fmt.Sprintf("%s sustains %s", c.Server, concurrent(*c.MaxPass))
		if c.AchievedRPS != nil && c.GoodputTokS != nil {
			s += fmt.Sprintf(" (≈ %.1f req/s, %.0f good tok/s)", *c.AchievedRPS, *c.GoodputTokS)
		}
		return s + " with " + goal
	}
	binding := ""
	if c.BindingObjective != nil {
		binding = " (binding: " + *c.BindingObjective + ")"
	}
	switch {
	case c.StopReason == search.StopUnmetAtMinimum:
		return fmt.Sprintf("%s does not meet %s even at 1 client%s.", c.Server, goal, binding)
	case c.StopReason == search.StopMaxConcurrency && c.MaxPass != nil:
		return sustains() + fmt.Sprintf(" at every load probed, up to the maximum of %d: its capacity is at least that.", c.Search.Max)
	case c.StopReason == search.StopConverged && c.MaxPass != nil && c.MinFail != nil:
		return sustains() + fmt.Sprintf("; fails at %d%s.", *c.MinFail, binding)
	case c.StopReason == search.StopCapReached && c.MaxPass != nil && c.MinFail != nil:
		return sustains() + fmt.Sprintf("; at %d the probe stayed unresolved at its cap, so the capacity is at least %d and below %d.", *c.MinFail, *c.MaxPass, *c.MinFail)
	}
	bracket := "no probe passed"
	if c.MaxPass != nil {
		bracket = "the largest load that passed is " + concurrent(*c.MaxPass)
	}
	if c.MinFail != nil {
		bracket += fmt.Sprintf(", the smallest that did not %d", *c.MinFail)
	}
	return fmt.Sprintf("%s: the search for %s stopped (%s) after %d probes; %s.", c.Server, goal, strings.ReplaceAll(c.StopReason, "_", " "), len(c.Probes), bracket)
}

func concurrent(n int) string {
	if n == 1 {
		return "1 client"
	}
	return fmt.Sprintf("%d concurrent clients", n)
}

func pct(f float64) string { return Number(100*f) + "%" }

// CapacityTable is a search's probes in the order they ran: load, kind,
// requests, good, attainment with its interval, verdict, p95 TTFT and TPOT,
// failures, achieved request rate and good-token rate.
func CapacityTable(c search.Capacity) Section {
	sec := Section{Columns: []Column{
		{Head: "Probe", Short: "#"}, {Head: "Clients", Short: "clients"}, {Head: "Kind", Short: "kind"},
		{Head: "Good / requests", Short: "good/n"}, {Head: "Attainment [95% CI]", Short: "attainment [95% CI]"},
		{Head: "Verdict", Short: "verdict"}, {Head: "p95 TTFT", Short: "p95 TTFT"}, {Head: "p95 TPOT", Short: "p95 TPOT"},
		{Head: "Failures", Short: "failures"}, {Head: "Achieved req/s", Short: "req/s"}, {Head: "Good tok/s", Short: "good tok/s"},
	}}
	for i, p := range c.Probes {
		kind := p.Kind
		if p.Kind == search.ProbeRepeat {
			kind = fmt.Sprintf("repeat %d", p.Repeat)
		}
		sec.Rows = append(sec.Rows, []string{
			fmt.Sprint(i + 1), fmt.Sprint(p.Load), kind, fmt.Sprintf("%d/%d", p.Good, p.N),
			fmt.Sprintf("%.1f%% [%.1f–%.1f%%]", 100*p.Attainment, 100*p.CILow, 100*p.CIHigh),
			p.Verdict, Seconds(p.TTFTP95S), Seconds(p.TPOTP95S),
			fmt.Sprintf("%d/%d (%s)", p.Failures, p.N, Percent(p.Failures, p.N)),
			fmt.Sprintf("%.2f", p.AchievedRPS), fmt.Sprintf("%.1f", p.GoodputTokS),
		})
	}
	return sec
}

// splitCapacityFigures separates the capacity figures, which README.md
// shows in its capacity section, from the others.
func splitCapacityFigures(figs []FigureRef) (rest, capacity []FigureRef) {
	for _, f := range figs {
		if plot.IsCapacityFigure(f.File) {
			capacity = append(capacity, f)
		} else {
			rest = append(rest, f)
		}
	}
	return rest, capacity
}

// writeCapacity leads README.md with each search's answer, then its probes
// and the capacity figures.
func writeCapacity(b *bytes.Buffer, res *bundle.Results, figs []FigureRef) {
	if len(res.Capacity) == 0 {
		return
	}
	w := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	w("## Capacity under the SLO\n\n")
	for _, c := range res.Capacity {
		w("**%s**", CapacitySentence(c))
		if cs := CapacityCostSentence(res, c.Server); cs != "" {
			w(" %s", cs)
		}
		w("\n\n")
	}
	w("Each probe is a sustained closed loop at a fixed number of clients: %s, then measured until at least %d requests and a 95%% Wilson interval of attainment wholly on one side of the target (pass or fail); a probe that reaches its cap of %s is unresolved, never a pass. ",
		warmupWords(res.Capacity[0].Search), res.Capacity[0].Search.MinRequests, capWords(res.Capacity[0].Search))
	w("The search doubles from %d until a probe fails, bisects until min_fail − max_pass ≤ max(1, 5%% of max_pass), then re-runs the final points %d time(s). `rehearse verify` replays it from the probes' records.\n\n",
		res.Capacity[0].Search.Start, res.Capacity[0].Search.Repeats)
	if res.Capacity[0].Search.Screen {
		w("While no load has failed, each load of the doubling where %d rounds of the closed loop (at least %d requests) are fewer than a probe's first look is a screen of that many requests, which can fail a load but never pass it (verdict screened). The largest screened load below the first fail is then probed in full, and bisection goes on with full probes; a load below a pass that was only screened is taken to pass (monotonicity, checked on the measured verdicts).\n\n",
			search.LookRounds, search.ScreenFloor)
	}
	for _, c := range res.Capacity {
		w("### %s: probes\n\n", c.Server)
		if c.Predicted != nil {
			w("Predicted bracket, probed first: passes at %d, fails at %d.\n\n", c.Predicted.MaxPass, c.Predicted.MinFail)
		}
		b.Write(CapacityTable(c).Markdown())
		writeSteadyProbes(b, c)
		for _, nm := range c.NonMonotonic {
			w("\n**Non-monotonic:** a probe passed at %s although one failed at %d.\n", contract.ClientsLabel(nm.PassLoad), nm.FailLoad)
		}
		w("\n")
	}
	for _, f := range figs {
		w("![%s](%s)\n\n", escapeAlt(f.Title), f.File)
		if f.Caption != "" {
			w("%s\n\n", f.Caption)
		}
	}
}

func warmupWords(s search.Spec) string {
	if s.WarmupRequests < 0 {
		return "warmed up with two requests per client (their phases spread out before the measured part)"
	}
	return fmt.Sprintf("warmed up with %d requests", s.WarmupRequests)
}

func capWords(s search.Spec) string {
	out := fmt.Sprintf("%d requests", s.MaxRequests)
	if s.MaxDurationS > 0 {
		out += fmt.Sprintf(" or %s s", Number(s.MaxDurationS))
	}
	return out + ", twice that on the one retry of an unresolved point"
}

// ProbeLine is one line of a search's progress after its last probe: the
// probe's load and kind, its requests and good ones, its attainment
// against α and its verdict, and the bracket so far.
func ProbeLine(c search.Capacity) string {
	if len(c.Probes) == 0 {
		return fmt.Sprintf("%s: no probe yet", c.Server)
	}
	p := c.Probes[len(c.Probes)-1]
	kind := p.Kind
	if p.Kind == search.ProbeRepeat {
		kind = fmt.Sprintf("repeat %d", p.Repeat)
	}
	bound := func(v *int) string {
		if v == nil {
			return dash
		}
		return fmt.Sprint(*v)
	}
	return fmt.Sprintf("%s: probe %d at %s (%s): %d/%d good, attainment %.1f%% [%.1f–%.1f%%] against %s: %s; bracket so far [%s, %s]",
		c.Server, len(c.Probes), contract.ClientsLabel(p.Load), kind, p.Good, p.N,
		100*p.Attainment, 100*p.CILow, 100*p.CIHigh, pct(c.AttainmentTarget), p.Verdict, bound(c.MaxPass), bound(c.MinFail))
}
