package predict

import (
	"fmt"

	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/search"
	"github.com/rehearse/rehearse/internal/sim/engine"
)

// Probe is the predicted outcome of one probe of a predicted capacity
// search.
type Probe struct {
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

// Capacity predicts the capacity bracket of a server run by the
// profile's engine: the capacity search of package search (doubling from
// one client, then bisecting until search.Converged, no repeats) with each
// probe's outcome taken from Sustained at that load, the
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
func Capacity(p *engine.Profile, w SustainedWorkload, objectives contract.Objectives, alpha float64, maxLoad int, o Options) (search.Bracket, []Probe, error) {
	if len(objectives.Names()) == 0 {
		return search.Bracket{}, nil, fmt.Errorf("sim: capacity prediction: no objectives")
	}
	s, err := search.New(search.Config{Start: 1, Max: maxLoad, Alpha: alpha, MinRequests: 1})
	if err != nil {
		return search.Bracket{}, nil, fmt.Errorf("sim: %w", err)
	}
	slo := contract.SLO{Objectives: objectives, AttainmentTarget: alpha}
	var probes []Probe
	for {
		probe, ok := s.Next()
		if !ok {
			break
		}
		pr, err := Sustained(p, w, probe.Load, o)
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
		probes = append(probes, Probe{
			Load: probe.Load, N: out.N, Good: out.Good, Attainment: out.Attainment, Verdict: out.Verdict,
			Binding: out.Binding, TTFTP95S: out.TTFTP95S, TPOTP95S: out.TPOTP95S,
		})
	}
	r := s.Result()
	return search.Bracket{MaxPass: r.MaxPass, MinFail: r.MinFail}, probes, nil
}
