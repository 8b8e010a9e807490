package bundle

import (
	"bytes"
	"context"
	"testing"

	"github.com/rehearse/rehearse/internal/contract"
)

// manyRecords is results.json with n records (copies of one), encoded.
func manyRecords(t *testing.T, n int) []byte {
	t.Helper()
	first := 0.1
	w := contract.Wave{ID: 0, Server: "s", Kind: contract.KindRecorded, Mode: contract.ModeOpen, StartedAt: "2026-11-30T12:00:00Z", WallS: 1}
	res := &Results{Schema: Schema, Waves: []contract.Wave{w}}
	for k := range n {
		res.Records = append(res.Records, contract.Record{Kind: contract.KindRecorded, Server: "s", Client: k,
			StartS: 0, FirstContentS: &first, ChunkTimesS: []float64{first}, EndS: 1, Text: " the", OutputTokens: 1, OK: true})
	}
	var data bytes.Buffer
	if err := encodeTo(&data, res); err != nil {
		t.Fatal(err)
	}
	return data.Bytes()
}

// TestPassOverRecordsStops: a pass over the records looks at its context
// every stopEvery records, whatever its reader does (here one that never
// looks at it, handing the file over as fast as asked).
func TestPassOverRecordsStops(t *testing.T) {
	const n = 4 * stopEvery
	data := manyRecords(t, n)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := 0
	_, err := decodeVisit(bytes.NewReader(data), &recordVisitor{ctx: ctx, begin: func(*Results) bool { return true },
		record: func(i int, _ *contract.Record, _ *recordWork) {
			seen++
			if i == 10 {
				cancel()
			}
		}})
	if !IsInterrupted(ctx, err) {
		t.Errorf("canceled at record 10: %v, want the interruption", err)
	}
	if seen > stopEvery {
		t.Errorf("%d of %d records taken after a cancellation at the 11th, want at most %d", seen, n, stopEvery)
	}
}
