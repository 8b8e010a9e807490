package rehearsal

import (
	"context"
	"fmt"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/drive"
)

// Target is the server a wave drives.
type Target = drive.Target

// WaveResult is a finished wave.
type WaveResult = drive.WaveResult

// WaveSpec is one wave of the plan: closed-loop at Concurrency clients, or
// open-loop (Open) at RateRPS.
type WaveSpec struct {
	Kind        string
	Concurrency int
	Repeat      int
	Cold        bool
	Open        bool
	RateRPS     float64
}

func (s WaveSpec) describe() string {
	if s.Open {
		return fmt.Sprintf("%g req/s", s.RateRPS)
	}
	if s.Concurrency == 1 {
		return "1 client"
	}
	return fmt.Sprintf("%d clients", s.Concurrency)
}

// WaveDriver runs one wave and journals it; package drive is the real one.
type WaveDriver interface {
	Wave(ctx context.Context, t Target, spec WaveSpec) (WaveResult, error)
	// OutputTokensSource is "tokenizer" or "usage".
	OutputTokensSource() string
}

// driveDriver runs waves with package drive.
type driveDriver struct {
	d    *drive.Driver
	load drive.Load
	open *bundle.OpenLoop
}

func newDriveDriver(j *bundle.Journal, counter Counter, w bundle.Workload) *driveDriver {
	var c drive.Counter
	if counter != nil {
		c = counter
	}
	return &driveDriver{
		d:    drive.New(drive.Options{Journal: j, Counter: c}),
		load: drive.LoadOf(w),
		open: w.Open,
	}
}

func (dd *driveDriver) OutputTokensSource() string { return dd.d.OutputTokensSource() }

func (dd *driveDriver) Wave(ctx context.Context, t Target, s WaveSpec) (WaveResult, error) {
	if s.Open {
		return dd.openWave(ctx, t, s)
	}
	return dd.d.ClosedWave(ctx, t, drive.WaveSpec{Load: dd.load, Kind: s.Kind, Concurrency: s.Concurrency, Repeat: s.Repeat, Cold: s.Cold})
}

func (dd *driveDriver) openWave(ctx context.Context, t Target, s WaveSpec) (WaveResult, error) {
	o := dd.open
	if o == nil {
		return WaveResult{}, fmt.Errorf("%s: an open-loop wave without an open_loop workload", t.Name)
	}
	return dd.d.OpenWave(ctx, t, drive.OpenSpec{
		Load: dd.load, Kind: s.Kind, Repeat: s.Repeat, RequestRateRPS: s.RateRPS,
		Arrival: o.Arrival, Burstiness: o.Burstiness, Seed: o.Seed + int64(s.Repeat-1),
		NumRequests: o.NumRequests, Duration: secondsDuration(o.DurationS), MaxConcurrency: o.MaxConcurrency,
	})
}
