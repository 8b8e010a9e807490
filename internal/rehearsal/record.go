package rehearsal

import (
	"slices"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/plan"
	"github.com/rehearse/rehearse/internal/stream"
	"github.com/rehearse/rehearse/internal/workload"
)

// recordedWorkload is the planned workload as results.json records it
// (bundle.Workload): durations in seconds, the load's prompts, their own
// max_tokens, conversations, traced arrivals and sessions beside the
// workload's, the source's record, and the percentile method the
// aggregates use. It is the one way from a plan to its record; the runner
// makes it once, for the bundle's header. cfg adds the vllm bench serve
// command line the rehearsal came from, where it did.
func recordedWorkload(cfg *config.Rehearsal, wl plan.Workload) bundle.Workload {
	l := wl.Load
	out := bundle.Workload{
		Kind:               wl.Kind(),
		Concurrencies:      append([]int{}, wl.Concurrencies...),
		Repeats:            wl.Repeats,
		Prompts:            l.Prompts,
		PromptMaxTokens:    l.PromptMaxTokens,
		PromptMessages:     recordedMessages(l.Messages),
		MaxTokens:          l.MaxTokens,
		Temperature:        l.Temperature,
		TimeoutS:           l.Timeout.Seconds(),
		WarmupWaves:        wl.WarmupWaves,
		WarmupConcurrency:  wl.WarmupConcurrency,
		WarmupWavesPerLoad: wl.WarmupWavesPerLoad,
		PercentileMethod:   contract.PercentileMethod,
		Endpoint:           wl.Endpoint,
		IncludeUsage:       wl.IncludeUsage,
		ExtraBody:          wl.ExtraBody,
		Sessions:           recordedSessions(l.Sessions),
		PromptSource:       recordedSource(wl.Source, len(l.Prompts)),
		Capacity:           wl.Capacity,
		BodyStyle:          l.Style,
		RequestIDPrefix:    l.RequestIDPrefix,
		NumWarmups:         wl.NumWarmups,
		VLLM:               cfg.VLLM,
	}
	if m := cfg.Workload.Models; m != nil && l.Models != nil {
		out.Models = &bundle.Models{Names: slices.Clone(m.Names), Assignment: m.Assignment, Seed: m.Seed}
		out.PromptModels = l.Models
	}
	if sp := wl.SideProbes; sp != nil {
		out.SideProbes = &bundle.SideProbes{RateRPS: sp.RateRPS, Prompt: sp.Prompt, MaxTokens: sp.MaxTokens}
	}
	if s := wl.Sustained; s != nil {
		out.Sustained = &bundle.Sustained{NumRequests: s.NumRequests, DurationS: s.Duration.Seconds(), WarmupRequests: s.WarmupRequests}
	}
	if o := wl.Open; o != nil {
		out.Open = &bundle.OpenLoop{
			RequestRatesRPS: append([]float64(nil), o.RequestRatesRPS...), Arrival: o.Arrival, Burstiness: o.Burstiness, Seed: o.Seed,
			NumRequests: o.NumRequests, DurationS: o.Duration.Seconds(), MaxConcurrency: o.MaxConcurrency, Ramp: o.Ramp,
			Pacing: o.Pacing,
		}
	}
	if l.Arrivals != nil {
		out.ArrivalsS = make([]float64, len(l.Arrivals))
		for i, a := range l.Arrivals {
			out.ArrivalsS[i] = a.Seconds()
		}
	}
	if t := l.Think; len(l.Sessions) > 0 && t.Mean > 0 {
		out.ThinkTime = &bundle.ThinkTime{MeanS: t.Mean.Seconds(), Distribution: t.Distribution, Seed: t.Seed}
	}
	if m := wl.MechanismCheck; m != nil {
		out.MechanismCheck = &bundle.MechanismSpec{Server: m.Server, Metric: m.Metric, Concurrency: m.Concurrency, PeriodS: m.Period.Seconds()}
		if m.Client {
			out.MechanismCheck.Evidence = bundle.EvidenceClient
			out.MechanismCheck.PeriodS = 0
		}
	}
	return out
}

func recordedMessages(in [][]stream.Message) [][]bundle.Message {
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

func recordedSessions(in []workload.Session) []bundle.Session {
	if len(in) == 0 {
		return nil
	}
	out := make([]bundle.Session, len(in))
	for i, s := range in {
		out[i] = bundle.Session{Turns: slices.Clone(s.Turns)}
	}
	return out
}

// recordedSource is the prompt source's record, of n prompts; nil where
// the source is not named.
func recordedSource(r workload.SourceRecord, n int) *bundle.PromptSource {
	if r.Name == "" {
		return nil
	}
	return &bundle.PromptSource{Name: r.Name, Params: r.Params, SHA256: r.SHA256, Count: n, Skipped: r.Skipped}
}
