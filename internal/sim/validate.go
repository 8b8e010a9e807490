package sim

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
)

// Load is one load of a bundle that a validation fits on or holds out: a
// closed-loop concurrency, an open-loop rate, or a whole mode (Mode alone:
// every load of that mode).
type Load struct {
	Mode        string
	Concurrency int
	RateRPS     float64
}

// Whole reports whether l names every load of its mode.
func (l Load) Whole() bool { return l.Concurrency == 0 && l.RateRPS == 0 }

func (l Load) String() string {
	switch {
	case l.Whole():
		return l.Mode
	case l.Mode == contract.ModeOpen:
		return strconv.FormatFloat(l.RateRPS, 'g', -1, 64) + "rps"
	}
	return strconv.Itoa(l.Concurrency)
}

// ParseLoads reads a LOADS argument: comma-separated concurrencies ("1,64"),
// open-loop rates ("2rps,5rps") or whole modes ("closed", "sustained",
// "open"), mixed as one likes. The error names the bad item.
func ParseLoads(s string) ([]Load, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("no loads: want concurrencies such as 1,64, rates such as 2rps,5rps, or a mode: closed, sustained, open")
	}
	var out []Load
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		var l Load
		switch item {
		case contract.ModeClosed, contract.ModeSustained, contract.ModeOpen:
			l = Load{Mode: item}
		default:
			if r, ok := strings.CutSuffix(item, "rps"); ok {
				v, err := strconv.ParseFloat(r, 64)
				if err != nil || !(v > 0) || !finite(v) {
					return nil, fmt.Errorf("load %q: a rate is a number above 0 followed by rps, such as 2rps", item)
				}
				l = Load{Mode: contract.ModeOpen, RateRPS: v}
				break
			}
			n, err := strconv.Atoi(item)
			if err != nil || n < 1 || n > 1<<16 {
				return nil, fmt.Errorf("load %q: want a concurrency (1 to 65536), a rate such as 2rps, or a mode: closed, sustained, open", item)
			}
			l = Load{Mode: contract.ModeClosed, Concurrency: n}
		}
		if slices.Contains(out, l) {
			return nil, fmt.Errorf("load %q is named twice", item)
		}
		out = append(out, l)
	}
	return out, nil
}

// ValidateOptions says what a validation fits and holds out.
type ValidateOptions struct {
	// Server is the bundle's server to fit; Engine the simulated engine.
	Server, Engine string
	// FitOn are the loads the fit reads; HoldOut those predicted and
	// judged. They must not overlap.
	FitOn, HoldOut []Load
	// MaxModelLen of the fitted profile (0: the fit's default).
	MaxModelLen int
	// Tokenizer counts prompts (nil: the pinned default).
	Tokenizer Counter
}

// Validation is a profile fitted on some loads of a bundle and judged on the
// others: the predictor's error on every held-out load and metric, and (once
// AddLive has them) a live simulator run's.
type Validation struct {
	Server string
	Fit    *Fit
	// FitOn and HoldOut are the closed-loop concurrencies, ascending.
	FitOn, HoldOut []int
	// Workload is the bundle's closed-loop workload at the held-out
	// concurrencies: what the predictor ran and a live run sends.
	Workload ClosedWorkload
	// Rows are the error table, predictor rows first.
	Rows []ErrorRow
	// Notes are what the prediction did not model (request fields).
	Notes []string
	// measured are the bundle's aggregates at the held-out loads, counted
	// in generated tokens.
	measured []contract.Aggregate
}

// Error-table sources.
const (
	SourcePredictor = "predictor"
	SourceLive      = "live"
)

// Validation judging.
const (
	// ValidateGoal is the relative error the goal metrics (goodput, E2E,
	// TPOT) should stay within on held-out loads.
	ValidateGoal = 0.10
	// SmallTTFTS is the measured TTFT under which a TTFT is judged by its
	// absolute error: tens of milliseconds are request handling and host
	// noise, where a relative error says little; above it queueing
	// dominates and the relative error is the judge.
	SmallTTFTS = 0.050
)

// ErrorRow is one metric at one held-out load: predicted (by the predictor
// or a live simulator run) against measured (the bundle), by the same
// contract. Error is (predicted − measured) ÷ measured, a fraction.
type ErrorRow struct {
	Source    string   `json:"source"`
	Server    string   `json:"server"`
	Load      string   `json:"load"`
	Metric    string   `json:"metric"`
	Predicted *float64 `json:"predicted"`
	Measured  *float64 `json:"measured"`
	Error     *float64 `json:"error"`
	// AbsError is predicted − measured in the metric's unit.
	AbsError *float64 `json:"abs_error"`
	// JudgedBy is "relative", or "absolute" for a TTFT under SmallTTFTS.
	JudgedBy string `json:"judged_by"`
	// WithinGoal is |error| ≤ ValidateGoal for the goal metrics (goodput,
	// E2E, TPOT); absent for the others.
	WithinGoal *bool `json:"within_goal,omitempty"`
}

// validateMetric is one metric of the error table.
type validateMetric struct {
	name string
	goal bool
	ttft bool
	of   func(a contract.Aggregate) *float64
}

// ValidateMetrics names the error table's metrics, in order.
var ValidateMetrics = func() []string {
	var out []string
	for _, m := range validateMetrics {
		out = append(out, m.name)
	}
	return out
}()

var validateMetrics = []validateMetric{
	{"goodput_tok_s", true, false, func(a contract.Aggregate) *float64 { return a.Goodput.Median }},
	{"request_throughput_rps", false, false, func(a contract.Aggregate) *float64 { return a.RequestThroughput.Median }},
	{"e2e_p50_s", true, false, func(a contract.Aggregate) *float64 { return a.E2E.P50 }},
	{"tpot_p50_s", true, false, func(a contract.Aggregate) *float64 { return a.TPOT.P50 }},
	{"itl_p50_s", false, false, func(a contract.Aggregate) *float64 { return a.ITL.P50 }},
	{"itl_p95_s", false, false, func(a contract.Aggregate) *float64 { return a.ITL.P95 }},
	{"ttft_p50_s", false, true, func(a contract.Aggregate) *float64 { return a.TTFT.P50 }},
	{"ttft_p95_s", false, true, func(a contract.Aggregate) *float64 { return a.TTFT.P95 }},
}

// Validate fits a profile of o.Engine to server o.Server of the bundle on
// the loads o.FitOn, predicts the loads o.HoldOut with it, and tabulates
// the predictor's error on each held-out load and metric against the
// bundle's records. Both sides count generated tokens (GeneratedCounts).
//
// The fit and the predictor read closed-loop waves; other loads are
// refused with an error that says so.
func Validate(res *bundle.Results, o ValidateOptions) (*Validation, error) {
	have := closedConcurrencies(res, o.Server)
	fitOn, err := resolveLoads("--fit-on", o.FitOn, have)
	if err != nil {
		return nil, err
	}
	holdOut, err := resolveLoads("--hold-out", o.HoldOut, have)
	if err != nil {
		return nil, err
	}
	for _, c := range holdOut {
		if slices.Contains(fitOn, c) {
			return nil, fmt.Errorf("sim validate: %s is both fitted on and held out; a held-out load must be one the fit did not read", clients(c))
		}
	}
	fit, err := FitProfile(res, FitOptions{Server: o.Server, Engine: o.Engine, FitConcurrencies: fitOn, MaxModelLen: o.MaxModelLen, Tokenizer: o.Tokenizer})
	if err != nil {
		return nil, err
	}
	wl, notes, err := WorkloadOf(res)
	if err != nil {
		return nil, err
	}
	wl.Concurrencies = holdOut
	pr, err := Predict(fit.Profile, wl, PredictOptions{Server: o.Server, Tokenizer: o.Tokenizer})
	if err != nil {
		return nil, err
	}
	v := &Validation{Server: o.Server, Fit: fit, FitOn: fitOn, HoldOut: holdOut, Workload: wl, Notes: notes}
	for _, a := range contract.Aggregates(res.Waves, GeneratedCounts(res.Records), res.ServerNames(), "") {
		if a.Server == o.Server && a.Mode == contract.ModeClosed && slices.Contains(holdOut, a.Concurrency) {
			v.measured = append(v.measured, a)
		}
	}
	v.Rows = errorRows(SourcePredictor, o.Server, pr.Aggregates, v.measured)
	return v, nil
}

// AddLive appends the rows of a live simulator run of v.Workload: its
// records (from its own bundle) aggregated by the contract, counted in
// generated tokens as the predictor's, against the same measured figures.
// server names the live run's server in those records; timeScale is the
// live simulator's --time-scale, whose wall-clock figures are read back in
// simulated time (SlowedDown).
func (v *Validation) AddLive(waves []contract.Wave, records []contract.Record, server string, timeScale float64) error {
	if !(timeScale > 0) || !finite(timeScale) {
		return fmt.Errorf("sim validate: live time scale %g: want > 0", timeScale)
	}
	waves, records = SlowedDown(waves, records, timeScale)
	var live []contract.Aggregate
	for _, a := range contract.Aggregates(waves, GeneratedCounts(records), []string{server}, "") {
		if a.Server == server && a.Mode == contract.ModeClosed && slices.Contains(v.HoldOut, a.Concurrency) {
			a.Server = v.Server
			live = append(live, a)
		}
	}
	if len(live) == 0 {
		return fmt.Errorf("sim validate: the live run has no recorded closed-loop wave of server %s at the held-out loads", server)
	}
	v.Rows = append(v.Rows, errorRows(SourceLive, v.Server, live, v.measured)...)
	return nil
}

// SlowedDown returns copies of closed-loop waves and records whose times
// (start, end, first content, first token, every chunk, the wave's wall
// time and release spread) are k times longer: a run of simulated servers
// at time scale k read back in simulated time, the profile's.
func SlowedDown(waves []contract.Wave, records []contract.Record, k float64) ([]contract.Wave, []contract.Record) {
	ws := slices.Clone(waves)
	for i := range ws {
		ws[i].WallS *= k
		ws[i].ReleaseSpreadS *= k
	}
	rs := slices.Clone(records)
	for i := range rs {
		r := &rs[i]
		r.IntendedStartS *= k
		r.StartS *= k
		r.EndS *= k
		if r.FirstContentS != nil {
			v := *r.FirstContentS * k
			r.FirstContentS = &v
		}
		if r.FirstTokenS != nil {
			v := *r.FirstTokenS * k
			r.FirstTokenS = &v
		}
		ct := make([]float64, len(r.ChunkTimesS))
		for j, t := range r.ChunkTimesS {
			ct[j] = t * k
		}
		r.ChunkTimesS = ct
	}
	return ws, rs
}

// errorRows pairs each predicted aggregate with the measured one at its
// concurrency, one row per metric.
func errorRows(source, server string, predicted, measured []contract.Aggregate) []ErrorRow {
	var rows []ErrorRow
	for _, p := range predicted {
		i := slices.IndexFunc(measured, func(m contract.Aggregate) bool { return m.Concurrency == p.Concurrency })
		if i < 0 {
			continue
		}
		m := measured[i]
		for _, mt := range validateMetrics {
			row := ErrorRow{Source: source, Server: server, Load: clients(p.Concurrency), Metric: mt.name,
				Predicted: mt.of(p), Measured: mt.of(m), JudgedBy: "relative"}
			row.Error = RelErr(row.Predicted, row.Measured)
			if row.Predicted != nil && row.Measured != nil {
				d := *row.Predicted - *row.Measured
				row.AbsError = &d
			}
			if mt.ttft && row.Measured != nil && *row.Measured < SmallTTFTS {
				row.JudgedBy = "absolute"
			}
			if mt.goal && row.Error != nil {
				ok := math.Abs(*row.Error) <= ValidateGoal
				row.WithinGoal = &ok
			}
			rows = append(rows, row)
		}
	}
	return rows
}

// closedConcurrencies are the concurrencies of the server's recorded
// closed-loop waves, ascending.
func closedConcurrencies(res *bundle.Results, server string) []int {
	var out []int
	for _, w := range res.Waves {
		if w.Kind == contract.KindRecorded && w.Server == server && contract.KeyOf(w).Mode == contract.ModeClosed {
			out = append(out, w.Concurrency)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// resolveLoads turns loads into closed-loop concurrencies the bundle has.
func resolveLoads(flag string, loads []Load, have []int) ([]int, error) {
	if len(loads) == 0 {
		return nil, fmt.Errorf("sim validate: %s names no load", flag)
	}
	var out []int
	for _, l := range loads {
		switch {
		case l.Mode != contract.ModeClosed:
			return nil, fmt.Errorf("sim validate: %s %s: %s loads cannot be fitted or predicted yet; the fit and the predictor read closed-loop waves: name concurrencies such as 1,64, or closed", flag, l, l.Mode)
		case l.Whole():
			if len(have) == 0 {
				return nil, fmt.Errorf("sim validate: %s closed: the server has no recorded closed-loop wave", flag)
			}
			out = append(out, have...)
		case !slices.Contains(have, l.Concurrency):
			return nil, fmt.Errorf("sim validate: %s %d: the bundle has no recorded closed-loop wave at %s (have: %s)", flag, l.Concurrency, clients(l.Concurrency), joinInts(have))
		default:
			out = append(out, l.Concurrency)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
