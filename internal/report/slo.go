package report

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/search"
)

// Attainment formats an aggregate's SLO attainment with its 95 % Wilson
// interval: 95.0% [88.8–97.8%]; a dash where there was no request.
func Attainment(s *contract.SLOStanding) string {
	if s == nil || s.Attainment == nil || s.CILow == nil || s.CIHigh == nil {
		return dash
	}
	return fmt.Sprintf("%.1f%% [%.1f–%.1f%%]", 100**s.Attainment, 100**s.CILow, 100**s.CIHigh)
}

// standing is an aggregate's standing, nil where it has none.
func standing(s *contract.SLOAggregate) *contract.SLOStanding {
	if s == nil {
		return nil
	}
	return &s.SLOStanding
}

// RequestRate formats a spread of request rates: 2.50 [2.41–2.66].
func RequestRate(s contract.Spread) string {
	if s.Median == nil || s.Min == nil || s.Max == nil {
		return dash
	}
	return fmt.Sprintf("%.2f [%.2f–%.2f]", *s.Median, *s.Min, *s.Max)
}

// Objectives says the objectives in words: "TTFT ≤ 500 ms, TPOT ≤ 50 ms".
func Objectives(o contract.Objectives) string {
	var parts []string
	for _, n := range o.Names() {
		v, _ := o.Limit(n)
		limit := contract.FormatMS(v)
		if l, ok := strings.CutSuffix(limit, "ms"); ok {
			limit = l + " ms"
		} else {
			limit = strings.TrimSuffix(limit, "s") + " s"
		}
		parts = append(parts, strings.ToUpper(n)+" ≤ "+limit)
	}
	return strings.Join(parts, ", ")
}

// VerdictCut is the verdict shown for a population a cut wave belongs to.
const VerdictCut = "cut"

// SLOTable is the SLO attainment of every aggregate, a row per server and
// load: attainment with its interval, the verdict against the target, good
// of attempted, request and token goodput (median [min–max] of the
// repeats) and the objective missed most often. A population with a wave
// cut short (a probe stopped by a signal, a server's death) has no
// verdict: it is shown as cut, its canceled requests never as a fail. It
// has no rows when the results carry no objectives. A population of
// capacity screens only is shown as screened unless it fails: a screen
// can only fail a load (SPEC §8), so its records never show one passing.
func SLOTable(res *bundle.Results) Section {
	if res.SLO == nil {
		return Section{}
	}
	sec := Section{Columns: []Column{
		{Head: "Server", Short: "server"}, {Head: "Load", Short: "load"},
		{Head: "Attainment [95% CI]", Short: "attainment [95% CI]"},
		{Head: fmt.Sprintf("Verdict (≥ %s)", Number(100*res.SLO.AttainmentTarget)+"%"), Short: "verdict"},
		{Head: "Good / attempted", Short: "good"},
		{Head: "Request goodput, median [min–max] req/s", Short: "good req/s"},
		{Head: "Token goodput, median [min–max] tok/s", Short: "good tok/s"},
		{Head: "Most missed", Short: "most missed"},
	}}
	cut, screens := map[contract.Key]bool{}, map[contract.Key]bool{}
	for _, w := range res.Waves {
		if w.Kind != contract.KindRecorded {
			continue
		}
		k := contract.KeyOf(w)
		if w.Stopped != "" {
			cut[k] = true
		}
		only, seen := screens[k]
		screens[k] = (only || !seen) && w.Probe == search.ProbeScreen
	}
	for _, a := range res.Aggregates {
		s := a.SLO
		if s == nil {
			continue
		}
		verdict := s.Verdict
		switch {
		case cut[a.Key()]:
			verdict = VerdictCut
		case screens[a.Key()] && verdict != search.VerdictFail:
			verdict = search.VerdictScreened
		}
		sec.Rows = append(sec.Rows, []string{a.Server, a.LoadLabel(), Attainment(standing(s)), verdict,
			fmt.Sprintf("%d/%d", s.Good, s.N), RequestRate(s.RequestGoodput), Goodput(s.TokenGoodput), missed(s)})
	}
	return sec
}

// missed names the binding objective with how many successful requests
// missed it, and the failures: "ttft 21, 3 failed".
func missed(s *contract.SLOAggregate) string {
	var parts []string
	if s.BindingObjective != nil {
		parts = append(parts, fmt.Sprintf("%s %d", *s.BindingObjective, s.Missed[*s.BindingObjective]))
	}
	if s.Failed > 0 {
		parts = append(parts, fmt.Sprintf("%d failed", s.Failed))
	}
	if len(parts) == 0 {
		return dash
	}
	return strings.Join(parts, ", ")
}

func writeSLO(b *bytes.Buffer, res *bundle.Results) {
	sec := SLOTable(res)
	if len(sec.Rows) == 0 {
		return
	}
	s := res.SLO
	b.WriteString("## SLO attainment\n\n")
	fmt.Fprintf(b, "Objectives `%s` (%s), target: at least %s of requests good. ", s.Expr, Objectives(s.Objectives), Number(100*s.AttainmentTarget)+"%")
	b.WriteString("A request is good when it succeeded and met every objective; a failure is a miss. ")
	b.WriteString("Attainment is good ÷ attempted, pooled over the repeats, with its 95 % Wilson score interval; ")
	b.WriteString("the verdict is pass when the whole interval is at or above the target, fail when it is wholly below, unresolved otherwise. ")
	b.WriteString("Request goodput is good requests ÷ each repeat's goodput window, token goodput their output tokens ÷ the same. ")
	b.WriteString("A TPOT objective is met by a request of one output token (it has no TPOT), an ITL objective by one of fewer than two chunks; a successful request with no content misses TTFT. ")
	b.WriteString("Most missed is the objective the most successful requests missed, with their count.")
	if sim := res.Provenance.Simulation; sim != nil && sim.TimeScale > 0 && sim.TimeScale != 1 {
		scaled := contract.Objectives{}
		for _, n := range s.Objectives.Names() {
			v, _ := s.Objectives.Limit(n)
			_ = scaled.Set(n, v*sim.TimeScale)
		}
		fmt.Fprintf(b, " The objectives are on the wall clock, as every time of this bundle: at time scale %s they are %s of simulated time.", Number(sim.TimeScale), Objectives(scaled))
	}
	b.WriteString("\n\n")
	b.Write(sec.Markdown())
	b.WriteString("\n")
}
