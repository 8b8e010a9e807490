package report

import (
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/bundle/bundletest"
)

// TestWorkersSection: a merged bundle's README lists its workers with
// their offsets and uncertainties and each wave's release spread; a
// segment's says which segment it is; a bundle of one process has none.
func TestWorkersSection(t *testing.T) {
	res := bundletest.SeedLike()
	if md := string(Markdown(res, nil, nil)); strings.Contains(md, "Load-generator workers") {
		t.Error("a single-process bundle has a workers section")
	}
	res.Provenance.Workers = []bundle.Worker{
		{Index: 0, Count: 2, PlanDigest: "abc", ClockOffsetS: 0.0001, OffsetUncertaintyS: 0.00002, Coordinator: "http://c:7070", Host: "h0"},
		{Index: 1, Count: 2, PlanDigest: "abc", ClockOffsetS: -0.0003, OffsetUncertaintyS: 0.00004, Coordinator: "http://c:7070", Host: "h1"},
	}
	spread, unc := 0.0015, 0.00004
	res.Waves[0].WorkerReleaseSpreadS, res.Waves[0].OffsetUncertaintyS = &spread, &unc
	md := string(Markdown(res, nil, nil))
	for _, want := range []string{"## Load-generator workers", "| 1 | h1 | -0.3 | 0.04 | http://c:7070 |", "| 1.5 | 0.04 |", "digest `abc`"} {
		if !strings.Contains(md, want) {
			t.Errorf("the README does not say %q", want)
		}
	}
	res.Provenance.Workers = nil
	res.Provenance.Worker = &bundle.Worker{Index: 1, Count: 2, PlanDigest: "abc", Coordinator: "http://c:7070"}
	if md := string(Markdown(res, nil, nil)); !strings.Contains(md, "segment 1/2 of a split plan") {
		t.Error("a segment's README does not say which segment it is")
	}
}
