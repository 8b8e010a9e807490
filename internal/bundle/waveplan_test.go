package bundle_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/bundle/bundletest"
	"github.com/rehearse/rehearse/internal/contract"
)

// withWave adds to SeedLike a recorded wave of mode on batching, of
// concurrency c, whose records have the clients given (request indices
// of an open wave), each a short OK request.
func withWave(mode string, c int, clients ...int) *bundle.Results {
	res := bundletest.SeedLike()
	id := len(res.Waves)
	w := contract.Wave{ID: id, Server: "batching", Kind: contract.KindRecorded, Mode: mode, Concurrency: c, Repeat: 1,
		StartedAt: "2026-11-30T14:00:00Z"}
	if mode == contract.ModeOpen {
		w.RequestRateRPS = 2.5
	}
	res.Waves = append(res.Waves, w)
	for k, client := range clients {
		start := 0.4 * float64(k)
		first := start + 0.3
		res.Records = append(res.Records, contract.Record{Kind: contract.KindRecorded, Server: "batching", Wave: id, Client: client,
			Concurrency: c, Repeat: 1, IntendedStartS: start, StartS: start, FirstContentS: &first, ChunkTimesS: []float64{first, start + 1},
			EndS: start + 1, Text: " the the", OutputTokens: 2, OK: true, FinishReason: "stop"})
	}
	return res
}

// TestVerifyChecksWavePlans: each wave's records are what it planned,
// whether verify streams the records or holds them (VerifyBothWays).
func TestVerifyChecksWavePlans(t *testing.T) {
	stop := func(r *bundle.Results) { r.Waves[len(r.Waves)-1].Stopped = "canceled: interrupt" }
	sustained := func(n int) func(r *bundle.Results) {
		return func(r *bundle.Results) { r.Workload.Sustained = &bundle.Sustained{NumRequests: n} }
	}
	// placed gives the last wave's records their places in its send order,
	// and bounds it by time.
	placed := func(places ...int) func(r *bundle.Results) {
		return func(r *bundle.Results) {
			r.Workload.Sustained = &bundle.Sustained{DurationS: 10}
			recs := r.Records[len(r.Records)-len(places):]
			for k := range recs {
				recs[k].Request = &places[k]
			}
		}
	}
	for _, tc := range []struct {
		name string
		res  *bundle.Results
		edit func(*bundle.Results)
		want string // "": verifies
	}{
		{"open wave, requests 0 to 3", withWave(contract.ModeOpen, 0, 2, 0, 3, 1), nil, ""},
		{"open wave, a request twice", withWave(contract.ModeOpen, 0, 0, 1, 1, 2), nil, "records[280].client: request 1 of the wave is recorded twice"},
		{"open wave, a gap", withWave(contract.ModeOpen, 0, 0, 1, 3), nil, "requests 0 to 3 sent, but request 2 has no record (1 missing)"},
		{"open wave stopped, a gap", withWave(contract.ModeOpen, 0, 0, 1, 3), stop, ""},
		{"open wave stopped, a request twice", withWave(contract.ModeOpen, 0, 0, 1, 1), stop, "request 1 of the wave is recorded twice"},
		{"closed wave stopped, a client missing", withWave(contract.ModeClosed, 3, 0, 2), stop, ""},
		{"closed wave, a client past its concurrency", withWave(contract.ModeClosed, 2, 0, 1, 2), nil, "records[280].client: 2 is not one of the wave's 2 clients"},
		{"sustained wave of its count", withWave(contract.ModeSustained, 2, 0, 1, 0, 1), sustained(4), ""},
		{"sustained wave, a record more", withWave(contract.ModeSustained, 2, 0, 1, 0, 1, 1), sustained(4), "5 records, but the wave was to send 4 requests"},
		{"sustained wave bounded by time", withWave(contract.ModeSustained, 2, 0, 1, 1), func(r *bundle.Results) {
			r.Workload.Sustained = &bundle.Sustained{NumRequests: 4, DurationS: 10}
		}, ""},
		{"sustained wave, its requests placed 0 to 3", withWave(contract.ModeSustained, 2, 0, 1, 0, 1), placed(0, 2, 1, 3), ""},
		{"sustained wave, a request twice", withWave(contract.ModeSustained, 2, 0, 1, 0, 1), placed(0, 1, 1, 2), ".request: request 1 of the wave is recorded twice"},
		{"sustained wave, a request dropped", withWave(contract.ModeSustained, 2, 0, 1, 0), placed(0, 1, 3), "requests 0 to 3 sent, but request 2 has no record (1 missing)"},
		{"sustained wave, a client past its concurrency", withWave(contract.ModeSustained, 2, 0, 2), nil, "records[279].client: 2 is not one of the wave's 2 clients"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.edit != nil {
				tc.edit(tc.res)
			}
			bundle.FixWaveTimes(tc.res)
			tc.res.Recompute()
			dir := writeBundle(t, tc.res)
			streamed, ok, _, held := bundle.VerifyBothWays(dir, bundle.Options{})
			if !ok {
				t.Fatal("not streamed")
			}
			if !slices.Equal(streamed.Problems, held.Problems) {
				t.Errorf("streamed %q, held %q", streamed.Problems, held.Problems)
			}
			got := problems(held.Problems)
			switch {
			case tc.want == "" && got != "":
				t.Errorf("want none, got %s", got)
			case tc.want != "" && (!strings.Contains(got, tc.want) || len(held.Problems) != 1):
				t.Errorf("want one problem containing %q, got %s", tc.want, got)
			}
		})
	}
}
