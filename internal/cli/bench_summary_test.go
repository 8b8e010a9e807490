package cli

import (
	"bytes"
	"testing"

	"github.com/rehearse/rehearse/internal/golden"
	"github.com/rehearse/rehearse/internal/rehearsal"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
)

// TestBenchSummaryGolden renders the summary table of a fixed set of
// waves and records: two closed-loop concurrencies, one with failures of two
// kinds, and one open-loop rate.
func TestBenchSummaryGolden(t *testing.T) {
	fc := func(v float64) *float64 { return &v }
	rec := func(w contract.Wave, client int, ok bool, kind string, start, first, end float64, tokens int) contract.Record {
		r := contract.Record{Kind: w.Kind, Server: w.Server, Concurrency: w.Concurrency, Repeat: w.Repeat, Wave: w.ID,
			Client: client, StartS: start, IntendedStartS: 0, FirstContentS: fc(first), EndS: end, OK: ok, ErrorKind: kind,
			OutputTokens: tokens, ChunkTimesS: []float64{first, end}}
		if w.Mode == contract.ModeOpen {
			r.IntendedStartS = start - 0.002*float64(client)
		}
		return r
	}
	w1 := contract.Wave{ID: 1, Server: "vllm", Concurrency: 1, Repeat: 1, Kind: contract.KindRecorded, Mode: contract.ModeClosed, Cold: true}
	w2 := contract.Wave{ID: 2, Server: "vllm", Concurrency: 1, Repeat: 2, Kind: contract.KindRecorded, Mode: contract.ModeClosed}
	w3 := contract.Wave{ID: 3, Server: "vllm", Concurrency: 3, Repeat: 1, Kind: contract.KindRecorded, Mode: contract.ModeClosed}
	w4 := contract.Wave{ID: 4, Server: "vllm", Repeat: 1, Kind: contract.KindRecorded, Mode: contract.ModeOpen, RequestRateRPS: 2.5, Arrival: "poisson"}
	res := &bundle.Results{
		Servers: []bundle.Server{{Name: "vllm"}},
		Waves:   []contract.Wave{w1, w2, w3, w4},
		Records: []contract.Record{
			rec(w1, 0, true, "", 0, 0.2, 2.2, 128),
			rec(w2, 0, true, "", 0, 0.1, 2.1, 128),
			rec(w3, 0, true, "", 0, 0.1, 2.0, 128),
			rec(w3, 1, false, contract.ErrTimeout, 0, 0.5, 3.0, 40),
			rec(w3, 2, false, contract.ErrHTTPStatus, 0, 0, 0.01, 0),
			rec(w4, 0, true, "", 0.0, 0.05, 1.0, 64),
			rec(w4, 1, true, "", 0.41, 0.45, 1.5, 64),
			rec(w4, 2, true, "", 0.83, 0.9, 2.0, 64),
		},
	}
	res.Records[4].FirstContentS = nil
	res.Recompute()
	var out bytes.Buffer
	rehearsal.PrintBench(&out, res)
	golden.Check(t, "bench-summary.golden", out.Bytes())
}
