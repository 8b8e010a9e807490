package sim

import (
	"fmt"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/search"
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
// come back as notes; what the simulator cannot model (prompts with their own
// max_tokens or whole conversations, multi-turn sessions) is an error.
func SustainedOf(wl bundle.Workload, requests, warmupRequests int) (SustainedWorkload, []string, error) {
	if err := checkModelled(wl); err != nil {
		return SustainedWorkload{}, nil, err
	}
	ignoreEOS, minTokens, notes, err := requestFields(wl.ExtraBody)
	if err != nil {
		return SustainedWorkload{}, nil, err
	}
	w := SustainedWorkload{
		Prompts: wl.Prompts, MaxTokens: wl.MaxTokens, TimeoutS: wl.TimeoutS, IgnoreEOS: ignoreEOS, MinTokens: minTokens,
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

// PredictSustained runs the sustained closed loop of w at the given number
// of clients through the profile's engine on the virtual clock, with the
// same engine stepping as Predict's closed waves (runVirtual): clients 0 to
// clients−1 send requests 0 to clients−1 at time 0 and each client sends
// the run's next request the moment its last one ends (its last token, or
// its timeout), after the profile's request overhead and frontend like any
// other. Its waves are the warm-up (kind warmup, when there is one) and the
// measured wave (kind recorded), both of mode sustained and each timed from
// its release (its first request's send), as package drive records them.
// It is deterministic.
func PredictSustained(p *Profile, w SustainedWorkload, clients int, o PredictOptions) (*Prediction, error) {
	if clients < 1 || clients > 1<<16 {
		return nil, fmt.Errorf("sim: sustained workload clients %d: want 1 to 65536", clients)
	}
	o, plans, cache, err := prepare(p, w, o)
	if err != nil {
		return nil, err
	}
	warm := w.warmup(clients)
	total := warm + w.Requests
	reqs := make([]*virtualRequest, 0, total)
	take := func(client int) *virtualRequest {
		prompt := workload.PromptIndex(len(reqs), len(w.Prompts))
		r := plans[prompt].request(client, prompt)
		reqs = append(reqs, r)
		return r
	}
	first := make([]*virtualRequest, 0, min(clients, total))
	for c := range min(clients, total) {
		first = append(first, take(c))
	}
	next := func(r *virtualRequest, atS float64) *virtualRequest {
		if len(reqs) == total {
			return nil
		}
		if w.DurationS > 0 && len(reqs) > warm && atS >= reqs[warm].sentS+w.DurationS {
			return nil
		}
		return take(r.client)
	}
	if err := runVirtual(p, first, w.TimeoutS, cache, next); err != nil {
		return nil, err
	}

	pr := &Prediction{}
	part := func(kind string, rs []*virtualRequest) {
		if len(rs) == 0 {
			return
		}
		wave := contract.Wave{ID: len(pr.Waves), Server: o.Server, Concurrency: clients, Repeat: 1, Kind: kind, Mode: contract.ModeSustained}
		release := rs[0].sentS
		recs := make([]contract.Record, 0, len(rs))
		for _, r := range rs {
			recs = append(recs, r.record(wave, release))
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

// ProbePrediction is the predicted outcome of one probe of a predicted
// capacity search.
type ProbePrediction struct {
	// Load is the probe's number of clients.
	Load int
	// N is the predicted measured requests, Good those meeting every
	// objective, Attainment Good ÷ N.
	N, Good    int
	Attainment float64
	// Verdict is search.VerdictPass when Attainment ≥ α, else
	// search.VerdictFail: a point estimate.
	Verdict string
	// Binding is the objective the most requests missed ("" when none).
	Binding string
	// TTFTP95S and TPOTP95S are the predicted p95s (nil: none).
	TTFTP95S, TPOTP95S *float64
}

// PredictCapacity predicts the capacity bracket of a server run by the
// profile's engine: the capacity search of package search (doubling from
// one client, then bisecting until search.Converged, no repeats) with each
// probe's outcome taken from PredictSustained at that load, the
// attainment of its measured records against objectives (contract.Attain).
//
// It is a point estimate without intervals: a probe passes when its
// predicted attainment is at least alpha and fails otherwise, however
// close to alpha it is and however few requests it has (the virtual clock
// is deterministic, so there is no sampling noise to bound, but the profile
// is a model and the prediction carries its error, which no interval here
// states). It returns the bracket (MaxPass 0: one client already misses;
// MinFail 0: max passes) and every probe in the order the search asked
// for them. Objectives and w's times are in simulated seconds.
func PredictCapacity(p *Profile, w SustainedWorkload, objectives contract.Objectives, alpha float64, maxLoad int, o PredictOptions) (search.Bracket, []ProbePrediction, error) {
	if len(objectives.Names()) == 0 {
		return search.Bracket{}, nil, fmt.Errorf("sim: capacity prediction: no objectives")
	}
	s, err := search.New(search.Config{Start: 1, Max: maxLoad, Alpha: alpha, MinRequests: 1})
	if err != nil {
		return search.Bracket{}, nil, fmt.Errorf("sim: %w", err)
	}
	slo := contract.SLO{Objectives: objectives, AttainmentTarget: alpha}
	var probes []ProbePrediction
	for {
		probe, ok := s.Next()
		if !ok {
			break
		}
		pr, err := PredictSustained(p, w, probe.Load, o)
		if err != nil {
			return search.Bracket{}, nil, err
		}
		wave := pr.Waves[len(pr.Waves)-1]
		var recs []contract.Record
		for _, r := range pr.Records {
			if r.Wave == wave.ID {
				recs = append(recs, r)
			}
		}
		out := search.Measure(wave.ID, recs, slo, 1)
		// The point estimate: a degenerate interval at the attainment.
		out.CILow, out.CIHigh, out.Verdict = out.Attainment, out.Attainment, search.VerdictFail
		if out.Attainment >= alpha {
			out.Verdict = search.VerdictPass
		}
		if err := s.Observe(probe, out); err != nil {
			return search.Bracket{}, nil, fmt.Errorf("sim: capacity prediction: %w", err)
		}
		probes = append(probes, ProbePrediction{
			Load: probe.Load, N: out.N, Good: out.Good, Attainment: out.Attainment, Verdict: out.Verdict,
			Binding: out.Binding, TTFTP95S: out.TTFTP95S, TPOTP95S: out.TPOTP95S,
		})
	}
	r := s.Result()
	return search.Bracket{MaxPass: r.MaxPass, MinFail: r.MinFail}, probes, nil
}
