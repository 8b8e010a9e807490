package plan

import (
	"context"
	"maps"
	"time"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/workload"
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
func WarmupConcurrency(wl bundle.Workload) int {
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
// when it is this server's.
func Server(wl bundle.Workload, server string) []Wave {
	var out []Wave
	warm := WarmupConcurrency(wl)
	for r := 1; r <= wl.WarmupWaves; r++ {
		out = append(out, Wave{Kind: contract.KindWarmup, Mode: contract.ModeClosed, Concurrency: warm, Repeat: r})
	}
	cold := wl.WarmupWaves == 0 && wl.WarmupWavesPerLoad == 0
	mode, bounds := contract.ModeClosed, (*Bounds)(nil)
	if s := wl.Sustained; s != nil {
		mode = contract.ModeSustained
		bounds = &Bounds{NumRequests: s.NumRequests, Duration: seconds(s.DurationS), WarmupRequests: s.WarmupRequests}
		cold = cold && s.WarmupRequests == 0
	}
	for _, c := range wl.Concurrencies {
		for r := 1; r <= wl.WarmupWavesPerLoad; r++ {
			out = append(out, Wave{Kind: contract.KindWarmup, Mode: contract.ModeClosed, Concurrency: c, Repeat: r})
		}
		for r := 1; r <= wl.Repeats; r++ {
			out = append(out, Wave{Kind: contract.KindRecorded, Mode: mode, Concurrency: c, Repeat: r, Cold: cold, Sustained: bounds})
			cold = false
		}
	}
	if o := wl.Open; o != nil {
		open := func(rate float64, r int) Wave {
			seed := o.Seed + int64(r-1)
			if o.Arrival == contract.ArrivalTrace {
				seed = 0 // a replay draws nothing
			}
			return Wave{Kind: contract.KindRecorded, Mode: contract.ModeOpen, Repeat: r, Open: &Schedule{
				RequestRateRPS: rate, Arrival: o.Arrival, Burstiness: o.Burstiness, Seed: seed,
				NumRequests: o.NumRequests, Duration: seconds(o.DurationS), MaxConcurrency: o.MaxConcurrency, Ramp: o.Ramp,
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

// Workload is the bundle's record of the rehearsal's workload, with the
// prompts of the resolved source, their own max_tokens and the source's
// record. Its kind is closed or sustained (the mode of the waves at each
// concurrency), open (open-loop waves only), or closed+open or
// sustained+open.
func Workload(cfg *config.Rehearsal, prompts workload.Set) bundle.Workload {
	w := cfg.Workload
	out := bundle.Workload{
		Kind:               contract.ModeClosed,
		Concurrencies:      append([]int{}, w.Concurrencies...),
		Repeats:            w.Repeats,
		Prompts:            prompts.Texts(),
		PromptMaxTokens:    prompts.MaxTokens(),
		PromptMessages:     promptMessages(prompts),
		MaxTokens:          w.MaxTokens,
		Temperature:        *w.Temperature,
		TimeoutS:           w.Timeout.Seconds(),
		WarmupWaves:        w.WarmupWaves,
		WarmupConcurrency:  w.WarmupConcurrency,
		WarmupWavesPerLoad: w.WarmupWavesPerLoad,
		PercentileMethod:   contract.PercentileMethod,
		Endpoint:           w.Endpoint,
		IncludeUsage:       *w.IncludeUsage,
		ExtraBody:          w.ExtraBody,
	}
	if s := w.Sustained; w.Mode == contract.ModeSustained && s != nil {
		out.Kind = contract.ModeSustained
		out.Sustained = &bundle.Sustained{NumRequests: s.NumRequests, DurationS: s.Duration.Seconds(), WarmupRequests: s.WarmupRequests}
	}
	if o := w.OpenLoop; o != nil {
		out.Kind += "+" + contract.ModeOpen
		if len(w.Concurrencies) == 0 {
			out.Kind = contract.ModeOpen
		}
		out.Open = &bundle.OpenLoop{
			RequestRatesRPS: append([]float64(nil), o.RequestRatesRPS...), Arrival: o.Arrival, Burstiness: o.Burstiness,
			Seed: o.Seed, NumRequests: o.NumRequests, DurationS: o.Duration.Seconds(), MaxConcurrency: o.MaxConcurrency,
		}
		if r := o.Ramp; r != nil {
			out.Open.Ramp = &contract.Ramp{Strategy: r.Strategy, StartRPS: r.StartRPS, EndRPS: r.EndRPS}
		}
		if o.Arrival == workload.ArrivalTrace && prompts.Arrivals != nil {
			out.ArrivalsS = make([]float64, len(prompts.Arrivals))
			for i, a := range prompts.Arrivals {
				out.ArrivalsS[i] = a.Seconds()
			}
		}
	}
	if len(prompts.Sessions) > 0 {
		out.Sessions = make([]bundle.Session, len(prompts.Sessions))
		for i, s := range prompts.Sessions {
			out.Sessions[i] = bundle.Session{Turns: append([]int(nil), s.Turns...)}
		}
		if s := w.Sessions; s != nil && s.ThinkTime.Mean > 0 {
			t := s.ThinkTime
			dist := t.Distribution
			if dist == "" {
				dist = workload.ThinkFixed
			}
			out.ThinkTime = &bundle.ThinkTime{MeanS: t.Mean.Seconds(), Distribution: dist, Seed: t.Seed}
		}
	}
	if prompts.IgnoreEOS {
		out.ExtraBody = maps.Clone(out.ExtraBody)
		if out.ExtraBody == nil {
			out.ExtraBody = map[string]any{}
		}
		out.ExtraBody["ignore_eos"] = true
	}
	if r := prompts.Record; r.Name != "" {
		out.PromptSource = &bundle.PromptSource{
			Name: r.Name, Params: r.Params, SHA256: r.SHA256, Count: len(prompts.Prompts), Skipped: r.Skipped,
		}
	}
	if c := cfg.Capacity; c != nil {
		spec := c.Spec("")
		out.Capacity = &spec
	}
	if m := cfg.MechanismCheck; m != nil {
		out.MechanismCheck = &bundle.MechanismSpec{Server: m.Server, Metric: m.Metric, Concurrency: m.Concurrency, PeriodS: m.Period.Seconds()}
		if m.Evidence == config.EvidenceClient {
			out.MechanismCheck.Evidence = bundle.EvidenceClient
			out.MechanismCheck.PeriodS = 0
		}
	}
	return out
}

func promptMessages(s workload.Set) [][]bundle.Message {
	in := s.Messages()
	if in == nil {
		return nil
	}
	out := make([][]bundle.Message, len(in))
	for i, ms := range in {
		if ms == nil {
			continue
		}
		out[i] = make([]bundle.Message, len(ms))
		for j, m := range ms {
			out[i][j] = bundle.Message{Role: m.Role, Content: m.Content}
		}
	}
	return out
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
