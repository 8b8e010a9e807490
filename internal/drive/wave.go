package drive

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/plan"
	"github.com/rehearse/rehearse/internal/stream"
	"github.com/rehearse/rehearse/internal/workload"
)

// LoadOf returns the per-request load of a workload.
func LoadOf(wl bundle.Workload) Load {
	return Load{
		Prompts:         wl.Prompts,
		MaxTokens:       wl.MaxTokens,
		Temperature:     wl.Temperature,
		Timeout:         time.Duration(wl.TimeoutS * float64(time.Second)),
		PromptMaxTokens: wl.PromptMaxTokens,
		Messages:        loadMessages(wl.PromptMessages),
		Arrivals:        loadArrivals(wl.ArrivalsS),
		Sessions:        loadSessions(wl.Sessions),
		Think:           loadThink(wl.ThinkTime),
		Style:           wl.BodyStyle,
		RequestIDPrefix: wl.RequestIDPrefix,
	}
}

func loadArrivals(in []float64) []time.Duration {
	if in == nil {
		return nil
	}
	out := make([]time.Duration, len(in))
	for i, s := range in {
		out[i] = time.Duration(math.Round(s * float64(time.Second)))
	}
	return out
}

func loadSessions(in []bundle.Session) []workload.Session {
	if in == nil {
		return nil
	}
	out := make([]workload.Session, len(in))
	for i, s := range in {
		out[i] = workload.Session{Turns: s.Turns}
	}
	return out
}

func loadThink(t *bundle.ThinkTime) workload.ThinkTime {
	if t == nil {
		return workload.ThinkTime{}
	}
	return workload.ThinkTime{Mean: time.Duration(t.MeanS * float64(time.Second)), Distribution: t.Distribution, Seed: t.Seed}
}

func loadMessages(in [][]bundle.Message) [][]stream.Message {
	if in == nil {
		return nil
	}
	out := make([][]stream.Message, len(in))
	for i, ms := range in {
		if ms == nil {
			continue
		}
		out[i] = make([]stream.Message, len(ms))
		for j, m := range ms {
			out[i][j] = stream.Message{Role: m.Role, Content: m.Content}
		}
	}
	return out
}

// Wave runs one planned wave (package plan orders them) with the given
// load: a closed-loop wave at its concurrency, a sustained closed loop at
// its concurrency and bounds, or an open-loop wave on its schedule.
func (d *Driver) Wave(ctx context.Context, t Target, load Load, w plan.Wave) (WaveResult, error) {
	if w.Kind == contract.KindWarmup {
		load.RequestIDPrefix = "" // vLLM's warm-ups carry no request id
	}
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
