package predict

import (
	"fmt"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/search"
	"github.com/rehearse/rehearse/internal/sim/engine"
	"github.com/rehearse/rehearse/internal/workload"
)

// SustainedWorkload is the sustained closed loop a capacity probe runs
// (drive.SustainedWave): clients each sending their next request as soon
// as their last one ended, first WarmupRequests requests of warm-up, then
// Requests measured ones; request i sends the prompt at
// workload.PromptIndex(i, len(Prompts)).
type SustainedWorkload struct {
	Prompts   []string
	MaxTokens int
	TimeoutS  float64
	// IgnoreEOS and MinTokens are the request fields of the same names.
	IgnoreEOS bool
	MinTokens int
	// PromptMaxTokens is each prompt's own max_tokens (ClosedWorkload's).
	PromptMaxTokens []int
	// Requests is the measured requests (≥ 1).
	Requests int
	// DurationS, when above 0, also bounds the measured part: no measured
	// request is sent at or after its release (the first measured send)
	// + DurationS; those in flight finish (drive.SustainedSpec.Duration).
	DurationS float64
	// WarmupRequests are sent first and kept out of the measured wave; a
	// negative number means a capacity probe's default
	// (search.Spec.Warmup: search.WarmupRounds per client).
	WarmupRequests int
}

// SustainedOf is the sustained workload of a capacity probe of a
// rehearsal's workload (as results.json keeps it): its prompts, request
// fields and client timeout, with requests measured and warmupRequests sent
// first. Request fields of extra_body other than ignore_eos and min_tokens
// come back as notes; what the simulator cannot model (whole
// conversations, multi-turn sessions) is an error (FieldsOf).
func SustainedOf(wl bundle.Workload, requests, warmupRequests int) (SustainedWorkload, []string, error) {
	f, notes, err := FieldsOf(wl)
	if err != nil {
		return SustainedWorkload{}, nil, err
	}
	w := SustainedWorkload{
		Prompts: wl.Prompts, MaxTokens: wl.MaxTokens, TimeoutS: wl.TimeoutS, IgnoreEOS: f.IgnoreEOS, MinTokens: f.MinTokens,
		Requests: requests, WarmupRequests: warmupRequests, PromptMaxTokens: wl.PromptMaxTokens,
	}
	return w, notes, w.validate()
}

func (w SustainedWorkload) validate() error {
	cw := ClosedWorkload{Concurrencies: []int{1}, Repeats: 1, Prompts: w.Prompts, MaxTokens: w.MaxTokens, TimeoutS: w.TimeoutS, IgnoreEOS: w.IgnoreEOS, MinTokens: w.MinTokens, PromptMaxTokens: w.PromptMaxTokens}
	if err := cw.validate(); err != nil {
		return err
	}
	if w.Requests < 1 {
		return fmt.Errorf("sim: sustained workload requests = %d, want >= 1", w.Requests)
	}
	if w.DurationS < 0 || !finite(w.DurationS) {
		return fmt.Errorf("sim: sustained workload duration_s = %g, want >= 0", w.DurationS)
	}
	return nil
}

func (w SustainedWorkload) requests() requestSpec {
	return requestSpec{w.Prompts, w.MaxTokens, w.PromptMaxTokens, w.MinTokens, w.IgnoreEOS}
}

func (w SustainedWorkload) warmup(clients int) int {
	return search.Spec{WarmupRequests: w.WarmupRequests}.Warmup(clients, true)
}

// Sustained runs the sustained closed loop of w at the given number
// of clients through the profile's engine on the virtual clock, with the
// same engine stepping as Closed's waves (engine.Run): clients 0 to
// clients−1 send requests 0 to clients−1 at time 0 and each client sends
// the run's next request the moment its last one ends (its last token, or
// its timeout), after the profile's request overhead and frontend like any
// other. Its waves are the warm-up (kind warmup, when there is one) and the
// measured wave (kind recorded), both of mode sustained and each timed from
// its release (its first request's send), as package drive records them.
// It is deterministic.
func Sustained(p *engine.Profile, w SustainedWorkload, clients int, o Options) (*Result, error) {
	if clients < 1 || clients > 1<<16 {
		return nil, fmt.Errorf("sim: sustained workload clients %d: want 1 to 65536", clients)
	}
	o, plans, cache, err := prepare(p, w, o)
	if err != nil {
		return nil, err
	}
	warm := w.warmup(clients)
	total := warm + w.Requests
	reqs := make([]*engine.Request, 0, total)
	take := func(client int) *engine.Request {
		prompt := workload.PromptIndex(len(reqs), len(w.Prompts))
		r := plans[prompt].request(client, prompt)
		reqs = append(reqs, r)
		return r
	}
	first := make([]*engine.Request, 0, min(clients, total))
	for c := range min(clients, total) {
		first = append(first, take(c))
	}
	next := func(r *engine.Request, atS float64) *engine.Request {
		if len(reqs) == total {
			return nil
		}
		if w.DurationS > 0 && len(reqs) > warm && atS >= reqs[warm].SentS+w.DurationS {
			return nil
		}
		return take(r.Client)
	}
	if err := engine.Run(p, first, w.TimeoutS, cache, next); err != nil {
		return nil, err
	}

	pr := &Result{}
	part := func(kind string, rs []*engine.Request) {
		if len(rs) == 0 {
			return
		}
		wave := contract.Wave{ID: len(pr.Waves), Server: o.Server, Concurrency: clients, Repeat: 1, Kind: kind, Mode: contract.ModeSustained}
		release := rs[0].SentS
		recs := make([]contract.Record, 0, len(rs))
		for _, r := range rs {
			recs = append(recs, record(r, wave, release))
		}
		wave.WallS = contract.WaveWallS(recs)
		pr.Waves = append(pr.Waves, wave)
		pr.Records = append(pr.Records, recs...)
	}
	part(contract.KindWarmup, reqs[:warm])
	if len(reqs) > warm {
		part(contract.KindRecorded, reqs[warm:])
	}
	pr.Aggregates = contract.Aggregates(pr.Waves, pr.Records, []string{o.Server}, "")
	return pr, nil
}
