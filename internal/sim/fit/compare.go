package fit

import (
	"fmt"
	"slices"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/sim/engine"
	"github.com/rehearse/rehearse/internal/sim/predict"
)

// Comparison sets a fitted profile's predictions beside the measured
// aggregates of the server it was fitted to, for every concurrency of the
// bundle.
type Comparison struct {
	Server string
	Rows   []ComparisonRow
	// Notes are what the prediction did not model (request fields).
	Notes []string
}

// ComparisonRow is one concurrency: fitted or held out, measured against
// predicted by the same contract.
type ComparisonRow struct {
	Concurrency         int
	Fitted              bool
	Measured, Predicted contract.Aggregate
}

// RelErr is (predicted − measured) ÷ measured, or nil when either is
// missing or the measured value is 0.
func RelErr(predicted, measured *float64) *float64 {
	if predicted == nil || measured == nil || *measured == 0 {
		return nil
	}
	v := (*predicted - *measured) / *measured
	return &v
}

// Compare predicts the bundle's closed-loop workload with the fit's profile
// and pairs each concurrency's aggregate with the measured one, recomputed
// from the bundle's records counted in generated tokens (GeneratedCounts),
// as the prediction counts them.
func Compare(res *bundle.Results, f *Result, server string, fitAt []int, tk engine.Counter) (*Comparison, error) {
	wl, notes, err := predict.ClosedOf(res)
	if err != nil {
		return nil, err
	}
	pr, err := predict.Closed(f.Profile, wl, predict.Options{Server: server, Tokenizer: tk})
	if err != nil {
		return nil, err
	}
	measured := map[int]contract.Aggregate{}
	for _, a := range contract.Aggregates(res.Waves, GeneratedCounts(res.Records), res.ServerNames(), "") {
		if a.Server == server && a.Mode == contract.ModeClosed {
			measured[a.Concurrency] = a
		}
	}
	cmp := &Comparison{Server: server, Notes: notes}
	for _, a := range pr.Aggregates {
		m, ok := measured[a.Concurrency]
		if !ok {
			continue
		}
		cmp.Rows = append(cmp.Rows, ComparisonRow{Concurrency: a.Concurrency, Fitted: slices.Contains(fitAt, a.Concurrency), Measured: m, Predicted: a})
	}
	if len(cmp.Rows) == 0 {
		return nil, fmt.Errorf("sim: the bundle has no recorded closed-loop wave of server %s", server)
	}
	return cmp, nil
}

// GeneratedCounts returns a copy of records whose output_tokens are the
// tokens the server reported generating (usage_completion_tokens) where a
// record carries them and has no reasoning or tool-call channel: the count
// the engine model (predictor and live simulator alike) speaks. A bundle of
// random-weight text re-tokenizes to about 6 % more tokens than were
// generated; counted this way, its goodput and TPOT are the engine's.
func GeneratedCounts(records []contract.Record) []contract.Record {
	out := slices.Clone(records)
	for i := range out {
		r := &out[i]
		if r.UsageCompletionTokens != nil && r.ReasoningTokens == nil && r.ToolCallText == "" {
			r.OutputTokens = *r.UsageCompletionTokens
		}
	}
	return out
}
