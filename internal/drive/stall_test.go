package drive

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/workload"
)

// TestStallWatchMeasuresLateWakeUps runs the watch on the fake clock with a
// clock reading that jumps ahead at two wake-ups, as a host stall would
// make it: those two come late by the jump, every other one on time.
func TestStallWatchMeasuresLateWakeUps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var extra atomic.Int64 // nanoseconds the host "lost" so far
		now := func() time.Time { return time.Now().Add(time.Duration(extra.Load())) }
		sw := startStallWatch(5*time.Millisecond, now)
		time.Sleep(100*time.Millisecond + time.Microsecond) // 20 wake-ups
		synctest.Wait()
		extra.Add(int64(67 * time.Millisecond))
		time.Sleep(50 * time.Millisecond) // 10 more, the first 67 ms late
		synctest.Wait()
		extra.Add(int64(3 * time.Millisecond))
		time.Sleep(50 * time.Millisecond) // 10 more, the first 3 ms late
		synctest.Wait()
		got := sw.end()
		want := &contract.Stalls{PeriodS: 0.005, Ticks: 40, MaxS: 0.067, Over: 1}
		// The 99th percentile of 38 zeros, 3 ms and 67 ms (type 7) lies
		// between the two.
		if got == nil || got.PeriodS != want.PeriodS || got.Ticks != want.Ticks || !closeTo(got.MaxS, want.MaxS) || got.Over != want.Over || !(got.P99S > 0.003 && got.P99S < 0.067) {
			t.Errorf("stalls %+v, want %+v with p99 between 3 and 67 ms", got, want)
		}
	})
}

func closeTo(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

func TestSummarizeStalls(t *testing.T) {
	if got := summarizeStalls(StallPeriod, nil); got != nil {
		t.Errorf("no wake-ups: %+v, want nil", got)
	}
	lates := make([]float64, 200)
	lates[7], lates[8], lates[100] = 0.021, 0.021, 0.5
	got := summarizeStalls(StallPeriod, lates)
	// Type 7 at 0.99 of 200 sorted values lies between the 198th and the
	// 199th, both 21 ms.
	if got.Ticks != 200 || got.MaxS != 0.5 || got.Over != 3 || !closeTo(got.P99S, 0.021) {
		t.Errorf("summary %+v", got)
	}
	var sw *stallWatch
	if sw.end() != nil {
		t.Error("a nil watch has a summary")
	}
}

// TestWavesCarryTheirStalls runs a closed and an open wave on the fake
// clock with one 30 ms host stall injected into the watch's clock: each
// wave's summary has it, and wake-ups for the whole wave.
func TestWavesCarryTheirStalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := fakeDriver(300 * time.Millisecond)
		var stallAt atomic.Int64 // a wake-up after this (unix ns) is 30 ms late
		d.stallNow = func() time.Time {
			now := time.Now()
			if at := stallAt.Load(); at != 0 && now.UnixNano() >= at {
				stallAt.Store(0)
				return now.Add(30 * time.Millisecond)
			}
			return now
		}
		check := func(name string, w contract.Wave) {
			t.Helper()
			st := w.ClientStalls
			if st == nil {
				t.Fatalf("%s wave: no client stalls", name)
			}
			// One wake-up per 5 ms of the wave, give or take the ends.
			if ticks := int(w.WallS / 0.005); st.Ticks < ticks-2 || st.Ticks > ticks+1 || !closeTo(st.MaxS, 0.030) || st.Over != 1 {
				t.Errorf("%s wave over %v s: stalls %+v, want about %d wake-ups, one of them 30 ms late", name, w.WallS, st, ticks)
			}
		}
		stallAt.Store(time.Now().Add(100 * time.Millisecond).UnixNano())
		res, err := d.ClosedWave(context.Background(), tgt, WaveSpec{Load: testLoad(), Kind: contract.KindRecorded, Concurrency: 4, Repeat: 1})
		if err != nil {
			t.Fatal(err)
		}
		check("closed", res.Wave)
		stallAt.Store(time.Now().Add(100 * time.Millisecond).UnixNano())
		res, err = d.OpenWave(context.Background(), tgt, OpenSpec{Load: testLoad(), Repeat: 1, RequestRateRPS: 50, Arrival: workload.ArrivalFixed, NumRequests: 10})
		if err != nil {
			t.Fatal(err)
		}
		check("open", res.Wave)
	})
}
