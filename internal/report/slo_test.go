package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/bundle/bundletest"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/golden"
)

// The SLO section and the summary's SLO columns, on the seed-like results
// judged against objectives the serial server misses under load.
func TestSLOGolden(t *testing.T) {
	res := bundletest.SeedLike()
	o, err := contract.ParseObjectives("ttft<=500ms,tpot<=50ms")
	if err != nil {
		t.Fatal(err)
	}
	res.SLO = contract.NewSLO(o, 0.9)
	res.Recompute()
	var b bytes.Buffer
	writeSLO(&b, res)
	b.WriteString("\n--- summary ---\n")
	if err := SummaryTable(res).Text(&b); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "seedlike.slo.txt", b.Bytes())
	md := string(Markdown(res, nil, nil))
	if !strings.Contains(md, "## SLO attainment") || strings.Index(md, "## SLO attainment") < strings.Index(md, "## Results") {
		t.Error("README.md lacks the SLO section after the results")
	}
}

func TestSLOOfSimulatedServersInSimulatedTime(t *testing.T) {
	res := bundletest.SeedLike()
	res.Provenance.Simulation = &bundle.Simulation{TimeScale: 50}
	o, _ := contract.ParseObjectives("ttft<=10ms,tpot<=1ms")
	res.SLO = contract.NewSLO(o, 0.9)
	res.Recompute()
	var b bytes.Buffer
	writeSLO(&b, res)
	if want := "at time scale 50 they are TTFT ≤ 500 ms, TPOT ≤ 50 ms of simulated time."; !strings.Contains(b.String(), want) {
		t.Errorf("SLO section lacks %q:\n%s", want, b.String())
	}
}

func TestSLOAbsentWithoutObjectives(t *testing.T) {
	res := bundletest.SeedLike()
	if md := string(Markdown(res, nil, nil)); strings.Contains(md, "SLO") {
		t.Error("a report without objectives mentions the SLO")
	}
	if cols := SummaryTable(res).Columns; len(cols) != 8 {
		t.Errorf("summary has %d columns without objectives, want 8", len(cols))
	}
}

func TestObjectivesInWords(t *testing.T) {
	o, _ := contract.ParseObjectives("ttft<=0.5s,e2el<=2s,itl<=12.5ms")
	if got := Objectives(o); got != "TTFT ≤ 500 ms, ITL ≤ 12.5 ms, E2EL ≤ 2 s" {
		t.Errorf("Objectives = %q", got)
	}
}
