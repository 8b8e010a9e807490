package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/golden"
	"github.com/rehearse/rehearse/internal/plot/plottest"
)

// TestSteadyGolden: README.md gives each sustained load's steady window
// beside the whole run, and each search's probes their steady windows, a
// probe whose verdict its window alone would change flagged in its table
// and in a line under it; short and missing windows are among the
// warnings. The flag is set by hand here (the report renders what
// contract computed; contract's tests compute it).
func TestSteadyGolden(t *testing.T) {
	res := plottest.CapacityResults(plottest.DefaultCapacity())
	p := &res.Capacity[0].Probes[1]
	if p.Steady == nil || p.Verdict != contract.VerdictPass {
		t.Fatalf("probe 2: %+v: want a pass with steady figures", p)
	}
	a := contract.AttainmentOf(60, p.Steady.N)
	p.Steady.Good, p.Steady.Attainment, p.Steady.CILow, p.Steady.CIHigh = a.Good, a.Attainment, a.CILow, a.CIHigh
	p.Steady.Verdict, p.Steady.ChangesVerdict = contract.VerdictFail, true
	p.Steady.Warnings = append(p.Steady.Warnings, contract.SteadyVerdictWarning(a, contract.VerdictFail, p.Verdict))
	var b bytes.Buffer
	for _, c := range res.Capacity {
		b.WriteString("### " + c.Server + "\n")
		writeSteadyProbes(&b, c)
		b.WriteString("\n")
	}
	writeSteady(&b, res)
	for _, w := range Warnings(res) {
		if strings.Contains(w, "steady state:") {
			b.WriteString("- " + w + "\n")
		}
	}
	golden.Check(t, "capacity.steady.md", b.Bytes())
	md := string(Markdown(res, nil, nil))
	for _, want := range []string{"## Steady state", "**Steady window changes the verdict:** probe 2", "fail ⚠ changes the verdict"} {
		if !strings.Contains(md, want) {
			t.Errorf("README lacks %q", want)
		}
	}
}
