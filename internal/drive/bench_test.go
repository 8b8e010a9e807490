package drive

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/workload"
)

// BenchmarkClosedWaveRelease measures the start barrier: the release
// spread (last start_s − first) of closed waves of 256 clients against a
// local server that streams 8 chunks 5 ms apart.
func BenchmarkClosedWaveRelease(b *testing.B) {
	srv, _ := fakeServer(b, 8, 5*time.Millisecond)
	d := New(Options{})
	var spreads []float64
	for b.Loop() {
		res, err := d.ClosedWave(context.Background(), Target{Name: "s", BaseURL: srv.URL},
			WaveSpec{Load: testLoad(), Kind: contract.KindRecorded, Concurrency: 256, Repeat: 1})
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range res.Records {
			if !r.OK {
				b.Fatalf("%s: %s", r.ErrorKind, r.Error)
			}
		}
		spreads = append(spreads, res.Wave.ReleaseSpreadS)
	}
	slices.Sort(spreads)
	b.ReportMetric(spreads[len(spreads)/2]*1e3, "spread-median-ms")
	b.ReportMetric(spreads[len(spreads)-1]*1e3, "spread-max-ms")
}

// BenchmarkOpenWaveLateness measures the dispatcher on the real clock:
// start_s − intended_start_s of a Poisson wave at 200 req/s for 2 s against
// a local server that streams 8 chunks 5 ms apart.
func BenchmarkOpenWaveLateness(b *testing.B) {
	srv, _ := fakeServer(b, 8, 5*time.Millisecond)
	d := New(Options{})
	var late []float64
	for b.Loop() {
		res, err := d.OpenWave(context.Background(), Target{Name: "s", BaseURL: srv.URL}, OpenSpec{
			Load: testLoad(), Repeat: 1, RequestRateRPS: 200, Arrival: workload.ArrivalPoisson, Seed: 1, Duration: 2 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range res.Records {
			late = append(late, r.StartS-r.IntendedStartS)
		}
	}
	slices.Sort(late)
	q := func(p float64) float64 { return late[int(p*float64(len(late)-1))] * 1e3 }
	b.ReportMetric(q(0.5), "late-p50-ms")
	b.ReportMetric(q(0.99), "late-p99-ms")
	b.ReportMetric(q(1), "late-max-ms")
}
