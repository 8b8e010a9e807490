package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/bundle/bundletest"
	"github.com/rehearse/rehearse/internal/contract"
)

// A sustained aggregate gets its own section of the results table, its
// rows labeled "16 clients, sustained", and a row of bench's summary.
func TestResultsTableHasASustainedSection(t *testing.T) {
	res := bundletest.SeedLike()
	id := len(res.Waves)
	res.Waves = append(res.Waves, contract.Wave{ID: id, Server: "batching", Concurrency: 16, Repeat: 1,
		Kind: contract.KindRecorded, Mode: contract.ModeSustained, StartedAt: "2026-11-30T14:00:00Z"})
	first := 0.2
	res.Records = append(res.Records, contract.Record{Kind: contract.KindRecorded, Server: "batching", Concurrency: 16, Repeat: 1, Wave: id,
		StartS: 0.1, FirstContentS: &first, ChunkTimesS: []float64{first, 1.1}, EndS: 1.1, Text: " the the", OutputTokens: 2, OK: true})
	bundle.FixWaveTimes(res)
	res.Recompute()
	tab := ResultsTable(res)
	if len(tab.Sustained.Rows) != 1 || tab.Sustained.Rows[0][0] != "16 clients, sustained" || tab.Sustained.Rows[0][1] != "2.0 [2.0–2.0]" {
		t.Fatalf("sustained section %+v", tab.Sustained)
	}
	var b bytes.Buffer
	tab.Text(&b)
	if !strings.Contains(b.String(), "16 clients, sustained") {
		t.Errorf("text table:\n%s", b.String())
	}
	b.Reset()
	SummaryTable(res).Text(&b)
	if !strings.Contains(b.String(), "16 clients, sustained") {
		t.Errorf("summary:\n%s", b.String())
	}
	res.Workload.Sustained = &bundle.Sustained{NumRequests: 64, WarmupRequests: 16}
	md := string(Markdown(res, nil, nil))
	for _, want := range []string{"Sustained closed loop, a row per concurrency", "64 measured requests, after 16 warm-up requests"} {
		if !strings.Contains(md, want) {
			t.Errorf("README lacks %q", want)
		}
	}
}
