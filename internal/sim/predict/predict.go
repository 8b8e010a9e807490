package predict

import (
	"fmt"
	"math"
	"slices"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/sim/engine"
	"github.com/rehearse/rehearse/internal/workload"
)

// ClosedWorkload is the closed-loop workload a prediction runs: waves of N
// clients released together, one request each, prompts assigned round-robin.
type ClosedWorkload struct {
	Concurrencies []int
	Repeats       int
	Prompts       []string
	MaxTokens     int
	TimeoutS      float64
	// IgnoreEOS and MinTokens are the request fields of the same names.
	IgnoreEOS bool
	MinTokens int
	// PromptMaxTokens is each prompt's own max_tokens, aligned with
	// Prompts (0 or absent: MaxTokens), as workload.prompt_max_tokens: a
	// length distribution's output lengths.
	PromptMaxTokens []int
}

// ClosedOf reads the closed-loop workload of a bundle (of kind closed, or
// closed+open: its closed waves; its open-loop waves are not read here).
// Request fields of workload.extra_body other than ignore_eos and
// min_tokens do not change what the simulated engine does; they come back
// as notes (FieldsOf).
func ClosedOf(res *bundle.Results) (ClosedWorkload, []string, error) {
	wl := res.Workload
	if wl.Kind != "" && wl.Kind != contract.ModeClosed && wl.Kind != contract.ModeClosed+"+"+contract.ModeOpen {
		return ClosedWorkload{}, nil, fmt.Errorf("sim: bundle workload.kind = %q: only closed-loop waves can be fitted and predicted", wl.Kind)
	}
	w := ClosedWorkload{
		Concurrencies: slices.Clone(wl.Concurrencies),
		Repeats:       wl.Repeats,
		Prompts:       wl.Prompts,
		MaxTokens:     wl.MaxTokens,
		TimeoutS:      wl.TimeoutS,
	}
	w.PromptMaxTokens = wl.PromptMaxTokens
	f, notes, err := FieldsOf(wl)
	if err != nil {
		return ClosedWorkload{}, nil, err
	}
	w.IgnoreEOS, w.MinTokens = f.IgnoreEOS, f.MinTokens
	return w, notes, w.validate()
}

func (w ClosedWorkload) validate() error {
	switch {
	case len(w.Concurrencies) == 0:
		return fmt.Errorf("sim: workload has no concurrencies")
	case w.Repeats < 1:
		return fmt.Errorf("sim: workload repeats = %d, want >= 1", w.Repeats)
	case len(w.Prompts) == 0:
		return fmt.Errorf("sim: workload has no prompts")
	case w.MaxTokens < 1:
		return fmt.Errorf("sim: workload max_tokens = %d, want >= 1", w.MaxTokens)
	case !(w.TimeoutS > 0) || !finite(w.TimeoutS):
		return fmt.Errorf("sim: workload timeout_s = %g, want > 0", w.TimeoutS)
	case w.MinTokens > w.MaxTokens:
		return fmt.Errorf("sim: workload min_tokens = %d is above max_tokens %d", w.MinTokens, w.MaxTokens)
	case len(w.PromptMaxTokens) > 0 && len(w.PromptMaxTokens) != len(w.Prompts):
		return fmt.Errorf("sim: workload has %d prompt max_tokens for %d prompts", len(w.PromptMaxTokens), len(w.Prompts))
	}
	for i, n := range w.PromptMaxTokens {
		if n < 0 {
			return fmt.Errorf("sim: workload prompt %d: max_tokens %d, want >= 0", i, n)
		}
	}
	for _, c := range w.Concurrencies {
		if c < 1 || c > 1<<16 {
			return fmt.Errorf("sim: workload concurrency %d: want 1 to 65536", c)
		}
	}
	return nil
}

// Options configures a prediction.
type Options struct {
	// Server names the simulated server in the predicted records.
	Server string
	// Seed drives the output lengths of prompts the profile does not pin.
	Seed int64
	// Tokenizer counts prompt tokens through the profile's chat template;
	// nil means the pinned default tokenizer.
	Tokenizer engine.Counter
}

// A prediction counts output tokens as generated tokens, exactly as the
// served simulator does: its text re-tokenizes to the tokens its engine
// emitted, so a client counts output_tokens = usage_completion_tokens. The
// predictor and the live simulator are one engine model, and neither
// applies a bundle's re-tokenization ratio (random-weight text re-tokenizes
// to about 1.06 tokens per generated one): that ratio is an artifact of the
// measured model's text, not of the engine, and a real model's text
// round-trips. A comparison with a bundle counts the bundle's records in
// generated tokens instead (fit.GeneratedCounts), so predicted, live and
// measured figures all speak the engine's tokens.

// Result is what the simulated engine does under a workload: its waves and
// records, in the contract's terms, and the contract's aggregates of them.
type Result struct {
	Waves      []contract.Wave
	Records    []contract.Record
	Aggregates []contract.Aggregate
}

// Closed runs every wave of the workload (each concurrency, each repeat)
// through the profile's engine on a virtual clock and aggregates the
// records with the contract, so that predicted and measured figures are
// defined identically. The engine is the served simulator's own scheduling
// code, stepped without a wall clock (engine.Run); the virtual timeline is
// the one the served simulator follows on a fake clock, and a test holds
// them equal. It is deterministic: the same profile and workload give the
// same records.
func Closed(p *engine.Profile, w ClosedWorkload, o Options) (*Result, error) {
	o, plans, cache, err := prepare(p, w, o)
	if err != nil {
		return nil, err
	}

	pr := &Result{}
	concurrencies := slices.Clone(w.Concurrencies)
	slices.Sort(concurrencies)
	concurrencies = slices.Compact(concurrencies)
	for _, n := range concurrencies {
		for rep := 1; rep <= w.Repeats; rep++ {
			reqs := make([]*engine.Request, n)
			for c := range n {
				prompt := workload.PromptIndex(c, len(w.Prompts))
				reqs[c] = plans[prompt].request(c, prompt)
			}
			if err := engine.Run(p, reqs, w.TimeoutS, cache, nil); err != nil {
				return nil, err
			}
			wave := contract.Wave{ID: len(pr.Waves), Server: o.Server, Concurrency: n, Repeat: rep, Kind: contract.KindRecorded, Mode: contract.ModeClosed}
			recs := make([]contract.Record, 0, n)
			for _, r := range reqs {
				recs = append(recs, record(r, wave, 0))
			}
			wave.WallS = contract.WaveWallS(recs)
			pr.Waves = append(pr.Waves, wave)
			pr.Records = append(pr.Records, recs...)
		}
	}
	pr.Aggregates = contract.Aggregates(pr.Waves, pr.Records, []string{o.Server}, "")
	return pr, nil
}

// finite reports whether v is a usable number.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
