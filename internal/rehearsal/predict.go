package rehearsal

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/search"
	"github.com/rehearse/rehearse/internal/sim/engine"
	"github.com/rehearse/rehearse/internal/sim/predict"
)

// PredictError is a capacity prediction refused before any work: its
// profile cannot be loaded, or cannot run the workload.
type PredictError struct {
	// Server is the server whose bracket was to be predicted, Profile the
	// profile as capacity.predict_from named it.
	Server, Profile string
	Err             error
}

func (e *PredictError) Error() string {
	return fmt.Sprintf("capacity.predict_from.%s: profile %s: %v", e.Server, e.Profile, e.Err)
}

// Predicted is one server's predicted capacity bracket and a note saying
// what predicted it.
type Predicted struct {
	Bracket search.Bracket
	Note    string
}

// PredictCapacities predicts the bracket of every server capacity.
// predict_from names (predict.Capacity over the workload wl each probe
// sends, as results.json records it: the form the predictor reads from a
// bundle), before any request. The profile is a built-in one or a JSON
// file relative to the rehearsal file; max_num_seqs and kv_token_budget
// replace the profile's. A server launched with --time-scale K (a
// simulator) runs K times faster than its profile's simulated seconds, so
// the objectives and the client timeout are turned into simulated time
// first. The error is a *PredictError.
func PredictCapacities(cfg *config.Rehearsal, wl bundle.Workload) (map[string]Predicted, error) {
	c := cfg.Capacity
	if c == nil || len(c.PredictFrom) == 0 || cfg.SLO == nil {
		return nil, nil
	}
	out := map[string]Predicted{}
	for _, s := range cfg.Servers {
		f, ok := c.PredictFrom[s.Name]
		if !ok {
			continue
		}
		p, err := predictServer(cfg, s, f, wl)
		if err != nil {
			return nil, &PredictError{Server: s.Name, Profile: f.Profile, Err: err}
		}
		out[s.Name] = p
	}
	return out, nil
}

func predictServer(cfg *config.Rehearsal, s config.Server, f config.PredictFrom, wl bundle.Workload) (Predicted, error) {
	name := f.Profile
	if !slices.Contains(engine.ProfileNames(), name) && !filepath.IsAbs(name) && cfg.Dir != "" {
		name = filepath.Join(cfg.Dir, name)
	}
	prof, err := engine.ResolveProfile(name)
	if err != nil {
		return Predicted{}, err
	}
	var limits []string
	if f.MaxNumSeqs > 0 {
		prof.MaxNumSeqs = f.MaxNumSeqs
		limits = append(limits, fmt.Sprintf("max_num_seqs %d", f.MaxNumSeqs))
	}
	if f.KVTokenBudget > 0 {
		prof.KVTokenBudget = f.KVTokenBudget
		limits = append(limits, fmt.Sprintf("kv_token_budget %d", f.KVTokenBudget))
	}
	scale := 1.0
	if a, found, err := FindTimeScale(s.Launch); err != nil {
		return Predicted{}, fmt.Errorf("launch: %v", err)
	} else if found {
		scale = a.Value
	}
	spec := cfg.Capacity.Spec(s.Name)
	w, notes, err := predict.SustainedOf(wl, spec.MaxRequests, spec.WarmupRequests)
	if err != nil {
		return Predicted{}, err
	}
	w.TimeoutS *= scale
	b, _, err := predict.Capacity(prof, w, cfg.SLO.Objectives.Scaled(scale), cfg.SLO.Attainment, spec.Max, predict.Options{Server: s.Name})
	if err != nil {
		return Predicted{}, err
	}
	from := "simulator profile " + prof.Name
	if prof.Source != "builtin:"+prof.Name {
		from += " (" + prof.Source + ")"
	}
	if len(limits) > 0 {
		from += " with " + strings.Join(limits, ", ")
	}
	if scale != 1 {
		from += fmt.Sprintf(" at its --time-scale %g", scale)
	}
	note := fmt.Sprintf("capacity of %s: predicted bracket %s from %s, probed first: a point estimate (each load's predicted attainment over %d requests after the probe's warm-up, passing at or above %g), with no interval",
		s.Name, bracketText(b), from, w.Requests, cfg.SLO.Attainment)
	for _, n := range notes {
		note += "; " + n
	}
	return Predicted{Bracket: b, Note: note}, nil
}

// bracketText is a bracket as the notes write it: [max_pass, min_fail],
// "none" for an end that is 0.
func bracketText(b search.Bracket) string {
	end := func(v int) string {
		if v == 0 {
			return "none"
		}
		return fmt.Sprint(v)
	}
	return fmt.Sprintf("[%s, %s]", end(b.MaxPass), end(b.MinFail))
}
