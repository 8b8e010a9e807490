package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
)

// The client-added table pools the records of one load: the median of
// their p50, the p99 (type 7) of their p99 and the largest max; records
// without client_added_s, and those of unrecorded waves, stay out; a
// bundle without any shows no table.
func TestWriteClientAdded(t *testing.T) {
	res := &bundle.Results{Waves: []contract.Wave{
		{ID: 0, Kind: contract.KindWarmup, Server: "a", Concurrency: 4},
		{ID: 1, Kind: contract.KindRecorded, Server: "a", Concurrency: 4},
	}}
	add := func(wave int, a *contract.ClientAdded) {
		res.Records = append(res.Records, contract.Record{Kind: res.Waves[wave].Kind, Server: "a", Concurrency: 4, Wave: wave, ClientAddedS: a})
	}
	var b bytes.Buffer
	add(1, nil)
	writeClientAdded(&b, res)
	if b.Len() != 0 {
		t.Fatalf("a table without stamps:\n%s", b.String())
	}
	add(0, &contract.ClientAdded{N: 9, P50: 5, P99: 5, Max: 5}) // warm-up: left out
	add(1, &contract.ClientAdded{N: 3, P50: 100e-6, P99: 200e-6, Max: 300e-6})
	add(1, &contract.ClientAdded{N: 4, P50: 300e-6, P99: 2e-3, Max: 4e-3})
	add(1, &contract.ClientAdded{N: 5, P50: 200e-6, P99: 400e-6, Max: 500e-6})
	writeClientAdded(&b, res)
	// p99 of {0.2, 0.4, 2} ms by type 7: 0.4 + 0.98 × 1.6 = 1.968 ms.
	want := "| a | 4 clients | 3 | 12 | 200 µs | 1.97 ms | 4.00 ms |"
	if !strings.Contains(b.String(), want) {
		t.Fatalf("want row %q in\n%s", want, b.String())
	}
}
