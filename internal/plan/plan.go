package plan

import (
	"context"
	"time"

	"github.com/rehearse/rehearse/internal/contract"
)

// Wave is one planned wave of a server.
type Wave struct {
	// Kind is contract.KindWarmup, KindRecorded or KindMechanismCheck.
	Kind string
	// Mode is contract.ModeClosed, ModeSustained or ModeOpen.
	Mode string
	// Concurrency is the clients of a closed-loop wave.
	Concurrency int
	// Repeat counts from 1 within the wave's kind and load.
	Repeat int
	// Cold flags the first recorded wave of a series without warm-up.
	Cold bool
	// Open is the arrival schedule of an open-loop wave (nil when closed).
	Open *Schedule
	// Sustained bounds a sustained closed-loop wave (nil otherwise).
	Sustained *Bounds
	// SideProbes, on a recorded wave, are sent beside it (nil: none).
	SideProbes *SideProbes

	// Segment, when not the whole plan, runs only this worker's share of
	// the wave (see Share); the runner sets it on a split plan.
	Segment Segment
	// ReleaseAt, when set, is the instant the wave is released (on this
	// process's clock), agreed among the workers of a split plan;
	// ReleaseStamp is that instant as the coordinator wrote it (RFC 3339,
	// its clock). The runner sets them; zero releases the wave as soon as
	// it is ready.
	ReleaseAt    time.Time
	ReleaseStamp string
	// Agree, when set, is asked for ReleaseAt and ReleaseStamp once the
	// wave is armed (its requests prepared, its connections dialed, a
	// closed wave's first requests buffered on them): a split plan's
	// workers agree on the release only when every one of them is ready
	// to fire. The runner sets it; an error means the workers could not
	// agree, and the wave is not released.
	Agree func(ctx context.Context) (Release, error)
}

// Release is a wave's release as a split plan's workers agreed on it: the
// instant on this process's clock (At) and as the coordinator wrote it
// (Stamp), and, when Measured, this worker's clock offset against the
// coordinator (its clock minus this one's) and its uncertainty, measured
// afresh at the wave's barrier.
type Release struct {
	At                  time.Time
	Stamp               string
	Measured            bool
	Offset, Uncertainty time.Duration
}

// Bounds are the bounds of one sustained closed-loop wave: NumRequests
// measured requests, Duration of the measured part, or both (whichever ends
// first), after WarmupRequests requests of warm-up. Until, when set, may end
// the measured part sooner: it is asked, each time the first UntilEvery · j
// measured requests sent have all ended (0: every one), whether those
// records, in send order, suffice (a capacity probe's stop rule,
// search.StopRule); the other bounds are then its cap. Nil keeps the wave
// to its bounds.
type Bounds struct {
	NumRequests    int
	Duration       time.Duration
	WarmupRequests int
	Until          func(prefix []contract.Record) bool
	UntilEvery     int
	// Probe is the capacity probe kind the wave records (contract.Wave.Probe).
	Probe string
}

// Schedule is the arrival schedule of one open-loop wave: requests at
// RequestRateRPS (or on Ramp) on the Arrival process, drawn with Seed, or,
// Arrival trace, at the workload's traced arrivals; bounded by NumRequests,
// Duration, or both.
type Schedule struct {
	RequestRateRPS float64
	Arrival        string
	Burstiness     float64
	Seed           int64
	NumRequests    int
	Duration       time.Duration
	// MaxConcurrency caps the requests in flight (0: none).
	MaxConcurrency int
	// Ramp, when set, moves the rate from its start to its end rate over
	// the wave (RequestRateRPS is then 0).
	Ramp *contract.Ramp
	// Pacing is "" for rehearse's schedules, workload.PacingVLLM for
	// vllm bench serve's.
	Pacing string
}

// SideProbes are small requests sent one at a time beside a recorded wave,
// from its release until its requests have ended, outside its concurrency
// cap (vLLM's --probe-request-rate): each sends Prompt, one user message
// (the completions API's prompt), with MaxTokens to the server's model,
// and once it ended the next goes 1/RateRPS later. Their records are a
// wave of kind side_probe beside the recorded one.
type SideProbes struct {
	RateRPS   float64
	Prompt    string
	MaxTokens int
}

// Interval is the pause between a side probe's end and the next's send.
func (s SideProbes) Interval() time.Duration {
	return time.Duration(float64(time.Second) / s.RateRPS)
}

// Label names the wave's load as contract does everywhere: "1 client",
// "8 clients" or "2.5 req/s".
func (w Wave) Label() string {
	k := contract.Key{Mode: w.Mode, Concurrency: w.Concurrency}
	if w.Open != nil {
		k.RequestRateRPS = w.Open.RequestRateRPS
		k.Shape = contract.OpenShape(w.Open.Ramp, w.Open.Arrival)
	}
	return k.LoadLabel()
}

// WarmupConcurrency is the clients of each warm-up wave of wl: its
// warmup_concurrency, else its first concurrency, else 1.
func WarmupConcurrency(wl Workload) int {
	switch {
	case wl.WarmupConcurrency > 0:
		return wl.WarmupConcurrency
	case len(wl.Concurrencies) > 0:
		return wl.Concurrencies[0]
	}
	return 1
}

// Server returns the waves of the named server, in the order they run:
// wl.WarmupWaves warm-up waves, then for each concurrency
// wl.WarmupWavesPerLoad closed-loop warm-up waves at it and wl.Repeats
// recorded closed-loop waves (the first flagged cold when there is no
// warm-up, SPEC §1) or, when wl.Sustained is set, wl.Repeats sustained
// closed-loop waves with its bounds (the first cold when there are neither
// warm-up waves nor warm-up requests), then wl.Repeats open-loop waves at each request rate
// (repeat r drawn with seed open_loop.seed + r − 1, so repeats are
// independent draws and each is reproducible) — or wl.Repeats waves of its
// ramp, or wl.Repeats replays of its trace — then the mechanism check
// when it is this server's. Every recorded wave carries wl.SideProbes.
func Server(wl Workload, server string) []Wave {
	var out []Wave
	warm := WarmupConcurrency(wl)
	for r := 1; r <= wl.WarmupWaves; r++ {
		out = append(out, Wave{Kind: contract.KindWarmup, Mode: contract.ModeClosed, Concurrency: warm, Repeat: r})
	}
	if w, ok := numWarmups(wl); ok {
		out = append(out, w)
	}
	cold := wl.WarmupWaves == 0 && wl.WarmupWavesPerLoad == 0 && wl.NumWarmups == 0
	mode, bounds := contract.ModeClosed, (*Bounds)(nil)
	if s := wl.Sustained; s != nil {
		mode = contract.ModeSustained
		bounds = &Bounds{NumRequests: s.NumRequests, Duration: s.Duration, WarmupRequests: s.WarmupRequests}
		cold = cold && s.WarmupRequests == 0
	}
	for _, c := range wl.Concurrencies {
		for r := 1; r <= wl.WarmupWavesPerLoad; r++ {
			out = append(out, Wave{Kind: contract.KindWarmup, Mode: contract.ModeClosed, Concurrency: c, Repeat: r})
		}
		for r := 1; r <= wl.Repeats; r++ {
			out = append(out, Wave{Kind: contract.KindRecorded, Mode: mode, Concurrency: c, Repeat: r, Cold: cold, Sustained: bounds, SideProbes: wl.SideProbes})
			cold = false
		}
	}
	if o := wl.Open; o != nil {
		open := func(rate float64, r int) Wave {
			seed := o.Seed + int64(r-1)
			if o.Arrival == contract.ArrivalTrace {
				seed = 0 // a replay draws nothing
			}
			return Wave{Kind: contract.KindRecorded, Mode: contract.ModeOpen, Repeat: r, SideProbes: wl.SideProbes, Open: &Schedule{
				RequestRateRPS: rate, Arrival: o.Arrival, Burstiness: o.Burstiness, Seed: seed,
				NumRequests: o.NumRequests, Duration: o.Duration, MaxConcurrency: o.MaxConcurrency, Ramp: o.Ramp,
				Pacing: o.Pacing,
			}}
		}
		for _, rate := range o.RequestRatesRPS {
			for r := 1; r <= wl.Repeats; r++ {
				out = append(out, open(rate, r))
			}
		}
		if o.Ramp != nil || o.Arrival == contract.ArrivalTrace {
			for r := 1; r <= wl.Repeats; r++ {
				out = append(out, open(0, r))
			}
		}
	}
	if m := wl.MechanismCheck; m != nil && m.Server == server {
		out = append(out, Wave{Kind: contract.KindMechanismCheck, Mode: contract.ModeClosed, Concurrency: m.Concurrency, Repeat: 1})
	}
	return out
}

// numWarmups is the warm-up wave of wl.NumWarmups requests (vLLM's
// --num-warmups), sent at once or, with a cap (WarmupConcurrency) below
// their number, at most the cap in flight: a closed wave of them all, or a
// sustained wave of the cap's clients bounded by their number.
func numWarmups(wl Workload) (Wave, bool) {
	n := wl.NumWarmups
	if n < 1 {
		return Wave{}, false
	}
	c := wl.WarmupConcurrency
	if c < 1 || c >= n {
		return Wave{Kind: contract.KindWarmup, Mode: contract.ModeClosed, Concurrency: n, Repeat: 1}, true
	}
	return Wave{Kind: contract.KindWarmup, Mode: contract.ModeSustained, Concurrency: c, Repeat: 1, Sustained: &Bounds{NumRequests: n}}, true
}
