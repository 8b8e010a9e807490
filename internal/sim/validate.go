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
	// FitOn are the loads the fit reads (closed-loop waves); HoldOut those
	// predicted and judged (closed, sustained or open-loop). They must not
	// overlap.
	FitOn, HoldOut []Load
	// HeldOut is the bundle whose loads are held out (nil: the fitted
	// one): a rehearsal runs its concurrencies as closed waves or as
	// sustained loops, so a sustained load is held out of another bundle
	// of the same servers and prompts than the closed waves fitted on.
	HeldOut *bundle.Results
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
	// HoldOutSustained are the held-out sustained concurrencies and
	// HoldOutRates the held-out open-loop rates, ascending.
	HoldOutSustained []int
	HoldOutRates     []float64
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

// heldOut reports whether an aggregate is of one of v's held-out loads.
func (v *Validation) heldOut(a contract.Aggregate) bool {
	switch a.Mode {
	case contract.ModeClosed:
		return slices.Contains(v.HoldOut, a.Concurrency)
	case contract.ModeSustained:
		return slices.Contains(v.HoldOutSustained, a.Concurrency)
	case contract.ModeOpen:
		return a.Key().Shape == "" && slices.Contains(v.HoldOutRates, a.RequestRateRPS)
	}
	return false
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
// the closed-loop loads o.FitOn, predicts the loads o.HoldOut with it (of
// o.HeldOut when set), and tabulates the predictor's error on each
// held-out load and metric against the bundle's records. Both sides count
// generated tokens (GeneratedCounts). A closed wave is predicted by
// Predict, a sustained load by PredictSustained (the bundle's clients,
// measured and warm-up requests and duration), an open-loop rate by
// PredictOpen (the bundle's arrival process and bounds, one wave per
// repeat with the repeat's seed); the contract aggregates each as it
// aggregates the bundle, goodput over each mode's window.
func Validate(res *bundle.Results, o ValidateOptions) (*Validation, error) {
	hold := o.HeldOut
	if hold == nil {
		hold = res
	}
	for _, l := range o.FitOn {
		if l.Mode != contract.ModeClosed {
			return nil, fmt.Errorf("sim validate: --fit-on %s: the fit reads closed-loop waves: name concurrencies such as 1,64, or closed", l)
		}
	}
	fitOn, err := resolveLoads("--fit-on", o.FitOn, closedConcurrencies(res, o.Server))
	if err != nil {
		return nil, err
	}
	if len(o.HoldOut) == 0 {
		return nil, fmt.Errorf("sim validate: --hold-out names no load")
	}
	var closedLoads, sustainedLoads, openLoads []Load
	for _, l := range o.HoldOut {
		switch l.Mode {
		case contract.ModeClosed:
			closedLoads = append(closedLoads, l)
		case contract.ModeSustained:
			sustainedLoads = append(sustainedLoads, l)
		default:
			openLoads = append(openLoads, l)
		}
	}
	v := &Validation{Server: o.Server}
	if len(closedLoads) > 0 {
		if v.HoldOut, err = resolveLoads("--hold-out", closedLoads, closedConcurrencies(hold, o.Server)); err != nil {
			return nil, err
		}
	}
	if len(sustainedLoads) > 0 {
		if v.HoldOutSustained, err = resolveSustained(sustainedLoads, hold, o.Server); err != nil {
			return nil, err
		}
	}
	if len(openLoads) > 0 {
		if v.HoldOutRates, err = resolveRates(openLoads, hold, o.Server); err != nil {
			return nil, err
		}
	}
	if hold == res {
		for _, c := range v.HoldOut {
			if slices.Contains(fitOn, c) {
				return nil, fmt.Errorf("sim validate: %s is both fitted on and held out; a held-out load must be one the fit did not read", clients(c))
			}
		}
	}
	fit, err := FitProfile(res, FitOptions{Server: o.Server, Engine: o.Engine, FitConcurrencies: fitOn, MaxModelLen: o.MaxModelLen, Tokenizer: o.Tokenizer})
	if err != nil {
		return nil, err
	}
	v.Fit, v.FitOn = fit, fitOn
	popts := PredictOptions{Server: o.Server, Tokenizer: o.Tokenizer}
	var predicted []contract.Aggregate
	if len(v.HoldOut) > 0 {
		wl, notes, err := WorkloadOf(hold)
		if err != nil {
			return nil, err
		}
		wl.Concurrencies = v.HoldOut
		pr, err := Predict(fit.Profile, wl, popts)
		if err != nil {
			return nil, err
		}
		v.Workload, v.Notes = wl, notes
		predicted = append(predicted, pr.Aggregates...)
	}
	if len(v.HoldOutSustained) > 0 {
		s := hold.Workload.Sustained
		n := s.NumRequests
		if n == 0 {
			// Bounded by duration only: more requests than the duration
			// lets the clients send, so the duration ends the part.
			n = maxOpenRequests
		}
		sw, notes, err := SustainedOf(hold.Workload, n, s.WarmupRequests)
		if err != nil {
			return nil, err
		}
		sw.DurationS = s.DurationS
		v.Notes = appendNew(v.Notes, notes)
		for _, c := range v.HoldOutSustained {
			pr, err := PredictSustained(fit.Profile, sw, c, popts)
			if err != nil {
				return nil, err
			}
			predicted = append(predicted, pr.Aggregates...)
		}
	}
	if len(v.HoldOutRates) > 0 {
		op := hold.Workload.Open
		sw, notes, err := SustainedOf(hold.Workload, 1, 0)
		if err != nil {
			return nil, err
		}
		v.Notes = appendNew(v.Notes, notes)
		var waves []contract.Wave
		var recs []contract.Record
		for _, rate := range v.HoldOutRates {
			for r := 1; r <= max(hold.Workload.Repeats, 1); r++ {
				ow := OpenWorkload{Prompts: sw.Prompts, MaxTokens: sw.MaxTokens, TimeoutS: sw.TimeoutS, IgnoreEOS: sw.IgnoreEOS, MinTokens: sw.MinTokens,
					RateRPS: rate, Arrival: op.Arrival, Burstiness: op.Burstiness, Seed: op.Seed + int64(r-1), NumRequests: op.NumRequests, DurationS: op.DurationS}
				pr, err := PredictOpen(fit.Profile, ow, popts)
				if err != nil {
					return nil, err
				}
				id := len(waves)
				for _, w := range pr.Waves {
					w.ID, w.Repeat = id, r
					waves = append(waves, w)
				}
				for _, rec := range pr.Records {
					rec.Wave, rec.Repeat = id, r
					recs = append(recs, rec)
				}
			}
		}
		predicted = append(predicted, contract.Aggregates(waves, recs, []string{o.Server}, "")...)
	}
	for _, a := range contract.Aggregates(hold.Waves, GeneratedCounts(hold.Records), hold.ServerNames(), "") {
		if a.Server == o.Server && v.heldOut(a) {
			v.measured = append(v.measured, a)
		}
	}
	v.Rows = errorRows(SourcePredictor, o.Server, predicted, v.measured)
	return v, nil
}

// appendNew appends the notes not yet in have.
func appendNew(have, notes []string) []string {
	for _, n := range notes {
		if !slices.Contains(have, n) {
			have = append(have, n)
		}
	}
	return have
}

// AddLive appends the rows of a live simulator run of v's held-out loads:
// its records (from its own bundle) aggregated by the contract, counted in
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
		if a.Server == server && v.heldOut(a) {
			a.Server = v.Server
			live = append(live, a)
		}
	}
	if len(live) == 0 {
		return fmt.Errorf("sim validate: the live run has no recorded wave of server %s at the held-out loads", server)
	}
	v.Rows = append(v.Rows, errorRows(SourceLive, v.Server, live, v.measured)...)
	return nil
}

// SlowedDown returns copies of waves and records whose times (intended
// start, start, end, first content, first token, every chunk, the wave's
// wall time and release spread) are k times longer and whose open-loop
// rates are k times lower: a run of simulated servers at time scale k read
// back in simulated time, the profile's.
func SlowedDown(waves []contract.Wave, records []contract.Record, k float64) ([]contract.Wave, []contract.Record) {
	ws := slices.Clone(waves)
	for i := range ws {
		ws[i].WallS *= k
		ws[i].ReleaseSpreadS *= k
		ws[i].RequestRateRPS /= k
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
		i := slices.IndexFunc(measured, func(m contract.Aggregate) bool { return m.Key() == p.Key() })
		if i < 0 {
			continue
		}
		m := measured[i]
		for _, mt := range validateMetrics {
			row := ErrorRow{Source: source, Server: server, Load: p.Key().LoadLabel(), Metric: mt.name,
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

// resolveSustained turns sustained loads into the concurrencies of the
// server's recorded sustained waves.
func resolveSustained(loads []Load, res *bundle.Results, server string) ([]int, error) {
	var have []int
	for _, w := range res.Waves {
		if w.Kind == contract.KindRecorded && w.Server == server && w.Mode == contract.ModeSustained {
			have = append(have, w.Concurrency)
		}
	}
	slices.Sort(have)
	have = slices.Compact(have)
	if len(have) == 0 || res.Workload.Sustained == nil {
		return nil, fmt.Errorf("sim validate: --hold-out sustained: the bundle has no recorded sustained wave of server %s (a rehearsal of workload.mode sustained has them)", server)
	}
	return slices.Clone(have), nil
}

// resolveRates turns open-loop loads into rates of the server's recorded
// open-loop waves (fixed, poisson or gamma arrivals, no cap on
// concurrency; ramps and trace replays are not predicted).
func resolveRates(loads []Load, res *bundle.Results, server string) ([]float64, error) {
	var have []float64
	for _, w := range res.Waves {
		if w.Kind == contract.KindRecorded && w.Server == server && w.Mode == contract.ModeOpen && w.Ramp == nil && w.RequestRateRPS > 0 {
			have = append(have, w.RequestRateRPS)
		}
	}
	slices.Sort(have)
	have = slices.Compact(have)
	op := res.Workload.Open
	switch {
	case len(have) == 0 || op == nil:
		return nil, fmt.Errorf("sim validate: --hold-out open: the bundle has no recorded open-loop wave at a request rate of server %s", server)
	case op.MaxConcurrency > 0:
		return nil, fmt.Errorf("sim validate: --hold-out open: the bundle's open_loop.max_concurrency %d is not predicted (arrivals waiting for a slot); hold out open-loop waves without a cap", op.MaxConcurrency)
	}
	var out []float64
	for _, l := range loads {
		switch {
		case l.Whole():
			out = append(out, have...)
		case !slices.Contains(have, l.RateRPS):
			var names []string
			for _, r := range have {
				names = append(names, strconv.FormatFloat(r, 'g', -1, 64)+"rps")
			}
			return nil, fmt.Errorf("sim validate: --hold-out %s: the bundle has no recorded open-loop wave at %g req/s (have: %s)", l, l.RateRPS, strings.Join(names, ", "))
		default:
			out = append(out, l.RateRPS)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
