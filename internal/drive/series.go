package drive

import (
	"context"
	"fmt"
	"time"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
)

// LoadOf returns the per-request load of a workload.
func LoadOf(wl bundle.Workload) Load {
	return Load{
		Prompts:     wl.Prompts,
		MaxTokens:   wl.MaxTokens,
		Temperature: wl.Temperature,
		Timeout:     time.Duration(wl.TimeoutS * float64(time.Second)),
	}
}

// Series runs the whole series of one server: wl.WarmupWaves warm-up waves
// (Options.WarmupConcurrency clients, default the first concurrency), then
// for each concurrency wl.Repeats recorded closed-loop waves, then, when
// wl.Open is set, wl.Repeats open-loop waves at each request rate (repeat r
// uses seed wl.Open.Seed + r − 1, so repeats are independent draws and each
// is reproducible). Without warm-up the first recorded wave of the series
// is flagged cold (SPEC §1). Repeats are numbered from 1. The first error
// (a canceled context, a journal that cannot be written) ends the series.
func (d *Driver) Series(ctx context.Context, t Target, wl bundle.Workload) error {
	load := LoadOf(wl)
	if err := load.validate(); err != nil {
		return fmt.Errorf("%s: workload: %w", t.Name, err)
	}
	if wl.Repeats <= 0 {
		return fmt.Errorf("%s: workload: repeats %d: want at least 1", t.Name, wl.Repeats)
	}
	if len(wl.Concurrencies) == 0 && (wl.Open == nil || len(wl.Open.RequestRatesRPS) == 0) {
		return fmt.Errorf("%s: workload: no concurrencies and no open-loop request rates: nothing to send", t.Name)
	}
	if wl.WarmupWaves > 0 {
		c := d.opts.WarmupConcurrency
		if c == 0 {
			c = 1
			if len(wl.Concurrencies) > 0 {
				c = wl.Concurrencies[0]
			}
		}
		for r := 1; r <= wl.WarmupWaves; r++ {
			spec := WaveSpec{Load: load, Kind: contract.KindWarmup, Concurrency: c, Repeat: r}
			if _, err := d.ClosedWave(ctx, t, spec); err != nil {
				return err
			}
		}
	}
	cold := wl.WarmupWaves == 0
	for _, c := range wl.Concurrencies {
		for r := 1; r <= wl.Repeats; r++ {
			spec := WaveSpec{Load: load, Kind: contract.KindRecorded, Concurrency: c, Repeat: r, Cold: cold}
			cold = false
			if _, err := d.ClosedWave(ctx, t, spec); err != nil {
				return err
			}
		}
	}
	if wl.Open == nil {
		return nil
	}
	o := wl.Open
	for _, rate := range o.RequestRatesRPS {
		for r := 1; r <= wl.Repeats; r++ {
			spec := OpenSpec{
				Load: load, Kind: contract.KindRecorded, Repeat: r,
				RequestRateRPS: rate, Arrival: o.Arrival, Burstiness: o.Burstiness, Seed: o.Seed + int64(r-1),
				NumRequests: o.NumRequests, Duration: time.Duration(o.DurationS * float64(time.Second)),
				MaxConcurrency: o.MaxConcurrency,
			}
			if _, err := d.OpenWave(ctx, t, spec); err != nil {
				return err
			}
		}
	}
	return nil
}
