package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/plot/plottest"
	"github.com/rehearse/rehearse/internal/search"

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

// TestSLOTableShowsCutProbes: a probe cut by a signal has no verdict; its
// canceled requests make its population look failed, yet the SLO table
// shows it as cut, never as fail.
func TestSLOTableShowsCutProbes(t *testing.T) {
	res := plottest.CapacityResults(plottest.DefaultCapacity())
	last := &res.Waves[len(res.Waves)-1]
	last.Stopped = "canceled: interrupt"
	for i := range res.Records {
		if r := &res.Records[i]; r.Wave == last.ID {
			r.OK, r.ErrorKind, r.Error = false, contract.ErrCanceled, "interrupt"
		}
	}
	res.Recompute()
	load := contract.KeyOf(*last).LoadLabel()
	found := false
	for _, row := range SLOTable(res).Rows {
		if row[0] != last.Server || row[1] != load {
			if row[3] == VerdictCut {
				t.Errorf("row %v is cut, but no wave of it was", row)
			}
			continue
		}
		found = true
		if row[3] != VerdictCut {
			t.Errorf("the cut probe's row %v: verdict %q, want %q", row, row[3], VerdictCut)
		}
	}
	if !found {
		t.Fatalf("no SLO row for %s at %s", last.Server, load)
	}
}

// TestSLOTableShowsScreens: a load only screened by a capacity search is
// shown as screened, never as pass, even where its records' pooled
// interval would pass; a load with a full probe keeps its verdict.
func TestSLOTableShowsScreens(t *testing.T) {
	res := plottest.CapacityResults(plottest.DefaultCapacity())
	var key contract.Key
	found := false
	for _, a := range res.Aggregates {
		if a.SLO != nil && a.SLO.Verdict == search.VerdictPass {
			key, found = a.Key(), true
			break
		}
	}
	if !found {
		t.Fatal("no aggregate passes")
	}
	for i := range res.Waves {
		if contract.KeyOf(res.Waves[i]) == key {
			res.Waves[i].Probe = search.ProbeScreen
		}
	}
	screened := 0
	for _, row := range SLOTable(res).Rows {
		if row[3] == search.VerdictScreened {
			screened++
			if row[0] != key.Server || row[1] != key.LoadLabel() {
				t.Errorf("row %v is screened, but no wave of it is a screen", row)
			}
		}
	}
	if screened != 1 {
		t.Errorf("%d rows screened, want the one of %v", screened, key)
	}
}
