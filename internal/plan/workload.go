package plan

import (
	"maps"
	"slices"
	"time"

	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/search"
	"github.com/rehearse/rehearse/internal/stream"
	"github.com/rehearse/rehearse/internal/workload"
)

// Workload is a rehearsal's planned workload: the loads each server's
// waves run (Server orders them) and what each of their requests sends
// (Load). WorkloadOf makes it from the rehearsal and its resolved prompts;
// the runner computes it once, hands it to package drive, and records it
// in results.json (bundle.Workload, made from it by one function there).
type Workload struct {
	Concurrencies []int
	Repeats       int
	// WarmupWaves are unrecorded closed-loop waves before all others, of
	// WarmupConcurrency clients (0: the first concurrency).
	WarmupWaves       int
	WarmupConcurrency int
	// WarmupWavesPerLoad are unrecorded closed-loop waves at each
	// concurrency just before its recorded ones (0: none).
	WarmupWavesPerLoad int
	// NumWarmups is the requests of one warm-up wave before the recorded
	// ones (vLLM's --num-warmups; 0: none), under WarmupConcurrency as a
	// cap where that is set.
	NumWarmups int
	// Sustained, when set, makes the waves at each concurrency sustained
	// closed loops with these bounds (its Until unset) instead of
	// closed-loop waves.
	Sustained *Bounds
	// Open, when set, adds open-loop waves after those.
	Open *OpenLoop
	// MechanismCheck, when set, is the mechanism check of its server.
	MechanismCheck *MechanismCheck
	// Capacity is the capacity search each server gets after its planned
	// waves (nil: none).
	Capacity *search.Spec

	// Endpoint, IncludeUsage and ExtraBody are what every request carries
	// beside its load: the API path (config.Workload.Endpoint),
	// stream_options.include_usage, and the body's extra fields (the
	// workload's extra_body and what the prompt source adds: ignore_eos).
	Endpoint     string
	IncludeUsage bool
	ExtraBody    map[string]any
	// Load is what each request sends.
	Load Load
	// SideProbes, when set, are sent beside every recorded wave Server
	// plans (Wave.SideProbes).
	SideProbes *SideProbes
	// Source says where the prompts came from (its Name "": not said).
	Source workload.SourceRecord
}

// OpenLoop is the arrival schedule of a workload's open-loop waves: a wave
// per request rate and repeat (repeat r drawn with Seed + r − 1), or, with
// Ramp, a ramp per repeat, or, Arrival trace, a replay per repeat; each
// bounded by NumRequests, Duration, or both.
type OpenLoop struct {
	RequestRatesRPS []float64
	Arrival         string
	Burstiness      float64
	Seed            int64
	NumRequests     int
	Duration        time.Duration
	// MaxConcurrency caps the requests in flight (0: none).
	MaxConcurrency int
	// Ramp, when set, moves the rate from its start to its end rate over
	// each wave (RequestRatesRPS is then empty).
	Ramp *contract.Ramp
	// Pacing is "" for rehearse's schedules, workload.PacingVLLM for vllm
	// bench serve's.
	Pacing string
}

// MechanismCheck is the unrecorded wave of Concurrency clients on Server
// during which its Metric is polled every Period.
type MechanismCheck struct {
	Server, Metric string
	Concurrency    int
	Period         time.Duration
	// Client says the check reads no server metric and rests on the
	// client's own records of its wave (config.EvidenceClient).
	Client bool
}

// Kind is the workload's kind as results.json records it: closed or
// sustained (the mode of the waves at each concurrency), open (open-loop
// waves only), or closed+open or sustained+open.
func (w Workload) Kind() string {
	kind := contract.ModeClosed
	if w.Sustained != nil {
		kind = contract.ModeSustained
	}
	if w.Open != nil {
		kind += "+" + contract.ModeOpen
		if len(w.Concurrencies) == 0 {
			kind = contract.ModeOpen
		}
	}
	return kind
}

// WorkloadOf is the planned workload of a rehearsal with the prompts of its
// resolved source: their texts, conversations, own max_tokens, traced
// arrivals and sessions, and the source's record.
func WorkloadOf(cfg *config.Rehearsal, prompts workload.Set) Workload {
	w := cfg.Workload
	out := Workload{
		Concurrencies:      append([]int{}, w.Concurrencies...),
		Repeats:            w.Repeats,
		WarmupWaves:        w.WarmupWaves,
		WarmupConcurrency:  w.WarmupConcurrency,
		WarmupWavesPerLoad: w.WarmupWavesPerLoad,
		NumWarmups:         w.NumWarmups,
		Endpoint:           w.Endpoint,
		IncludeUsage:       *w.IncludeUsage,
		ExtraBody:          extraBody(w.ExtraBody, prompts.IgnoreEOS),
		Load:               loadOf(w, prompts),
		Source:             prompts.Record,
	}
	if s := w.Sustained; w.Mode == contract.ModeSustained && s != nil {
		out.Sustained = &Bounds{NumRequests: s.NumRequests, Duration: s.Duration.D(), WarmupRequests: s.WarmupRequests}
	}
	if o := w.OpenLoop; o != nil {
		out.Open = &OpenLoop{
			RequestRatesRPS: append([]float64(nil), o.RequestRatesRPS...), Arrival: o.Arrival, Burstiness: o.Burstiness,
			Seed: o.Seed, NumRequests: o.NumRequests, Duration: o.Duration.D(), MaxConcurrency: o.MaxConcurrency,
			Pacing: o.Pacing,
		}
		if r := o.Ramp; r != nil {
			out.Open.Ramp = &contract.Ramp{Strategy: r.Strategy, StartRPS: r.StartRPS, EndRPS: r.EndRPS}
		}
	}
	if sp := w.SideProbes; sp != nil {
		out.SideProbes = &SideProbes{RateRPS: sp.RateRPS, Prompt: sp.Prompt, MaxTokens: sp.MaxTokens}
	}
	if c := cfg.Capacity; c != nil {
		spec := c.Spec("")
		out.Capacity = &spec
	}
	if m := cfg.MechanismCheck; m != nil {
		out.MechanismCheck = &MechanismCheck{Server: m.Server, Metric: m.Metric, Concurrency: m.Concurrency, Period: m.Period.D(),
			Client: m.Evidence == config.EvidenceClient}
	}
	return out
}

// loadOf is what each request of workload w sends with the given prompts.
// Traced arrivals are kept only where the open-loop waves replay them.
func loadOf(w config.Workload, prompts workload.Set) Load {
	l := Load{
		Prompts:         prompts.Texts(),
		MaxTokens:       w.MaxTokens,
		Temperature:     *w.Temperature,
		Timeout:         w.Timeout.D(),
		PromptMaxTokens: prompts.MaxTokens(),
		Messages:        messages(prompts),
		Style:           w.BodyStyle,
		RequestIDPrefix: w.RequestIDPrefix,
	}
	if m := w.Models; m != nil {
		// Validation refused names that cannot be assigned.
		l.Models, _ = workload.AssignModels(m.Names, m.Assignment, m.Seed, len(l.Prompts))
	}
	if o := w.OpenLoop; o != nil && o.Arrival == workload.ArrivalTrace && prompts.Arrivals != nil {
		l.Arrivals = slices.Clone(prompts.Arrivals)
	}
	if len(prompts.Sessions) > 0 {
		l.Sessions = make([]workload.Session, len(prompts.Sessions))
		for i, s := range prompts.Sessions {
			l.Sessions[i] = workload.Session{Turns: slices.Clone(s.Turns)}
		}
		if s := w.Sessions; s != nil && s.ThinkTime.Mean > 0 {
			t := s.ThinkTime
			l.Think = workload.ThinkTime{Mean: t.Mean.D(), Distribution: t.Distribution, Seed: t.Seed}
			if l.Think.Distribution == "" {
				l.Think.Distribution = workload.ThinkFixed
			}
		}
	}
	return l
}

// extraBody is the body's extra fields: the workload's, with ignore_eos
// where the prompt source asks for it (a copy then, the config's left as
// it is).
func extraBody(extra map[string]any, ignoreEOS bool) map[string]any {
	if !ignoreEOS {
		return extra
	}
	out := maps.Clone(extra)
	if out == nil {
		out = map[string]any{}
	}
	out["ignore_eos"] = true
	return out
}

// messages is each prompt's conversation as the request sends it, nil
// where no prompt has one.
func messages(s workload.Set) [][]stream.Message {
	in := s.Messages()
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
