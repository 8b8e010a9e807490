package drive

import (
	"context"
	"fmt"

	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/plan"
)

// Wave runs one planned wave (package plan orders them) with the given
// load: a closed-loop wave at its concurrency, a sustained closed loop at
// its concurrency and bounds, or an open-loop wave on its schedule; and,
// beside a recorded wave that plans them, its side probes
// (WaveResult.SideProbes).
func (d *Driver) Wave(ctx context.Context, t Target, load plan.Load, w plan.Wave) (WaveResult, error) {
	if w.Kind == contract.KindWarmup {
		// vLLM's warm-ups carry no request id, and ask for the server's
		// model, not a prompt's LoRA adapter.
		load.RequestIDPrefix, load.Models = "", nil
	}
	if w.SideProbes == nil || w.Kind != contract.KindRecorded {
		return d.wave(ctx, t, load, w)
	}
	side, err := d.armSideProbes(ctx, t, load, *w.SideProbes)
	if err != nil {
		return WaveResult{}, err
	}
	res, err := d.wave(ctx, t, load, w)
	sres, serr := side.finish()
	res.SideProbes = sres
	if err == nil {
		err = serr
	}
	return res, err
}

// wave runs one planned wave by its mode.
func (d *Driver) wave(ctx context.Context, t Target, load plan.Load, w plan.Wave) (WaveResult, error) {
	switch w.Mode {
	case contract.ModeClosed:
		return d.ClosedWave(ctx, t, WaveSpec{Load: load, Kind: w.Kind, Concurrency: w.Concurrency, Repeat: w.Repeat, Cold: w.Cold, Share: ShareOf(w)})
	case contract.ModeOpen:
		if w.Open == nil {
			return WaveResult{}, fmt.Errorf("%s: an open-loop wave without a schedule", t.Name)
		}
		s := w.Open
		return d.OpenWave(ctx, t, OpenSpec{
			Load: load, Kind: w.Kind, Repeat: w.Repeat, RequestRateRPS: s.RequestRateRPS,
			Arrival: s.Arrival, Burstiness: s.Burstiness, Seed: s.Seed,
			NumRequests: s.NumRequests, Duration: s.Duration, MaxConcurrency: s.MaxConcurrency, Ramp: s.Ramp,
			Pacing: s.Pacing, Share: ShareOf(w),
		})
	case contract.ModeSustained:
		if w.Sustained == nil {
			return WaveResult{}, fmt.Errorf("%s: a sustained wave without its bounds", t.Name)
		}
		s := w.Sustained
		return d.SustainedWave(ctx, t, SustainedSpec{
			Load: load, Kind: w.Kind, Concurrency: w.Concurrency, Repeat: w.Repeat, Cold: w.Cold,
			NumRequests: s.NumRequests, Duration: s.Duration, WarmupRequests: s.WarmupRequests,
			Until: s.Until, UntilEvery: s.UntilEvery, Probe: s.Probe,
			Share: ShareOf(w),
		})
	}
	return WaveResult{}, fmt.Errorf("%s: wave mode %q: want closed, sustained or open", t.Name, w.Mode)
}
