package fit

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/sim/engine"
	"github.com/rehearse/rehearse/internal/sim/predict"
)

// Load is one load of a bundle that a validation fits on or holds out: a
// closed-loop concurrency, an open-loop rate, an open-loop shape (every
// ramp, or every trace replay), or a whole mode (Mode alone: every load of
// that mode).
type Load struct {
	Mode        string
	Concurrency int
	RateRPS     float64
	// Shape is LoadRamp or LoadTrace for the open loop's ramps or trace
	// replays; "" otherwise.
	Shape string
}

// Open-loop shapes a LOADS argument names.
const (
	LoadRamp  = "ramp"
	LoadTrace = "trace"
)

// Whole reports whether l names every load of its mode.
func (l Load) Whole() bool { return l.Concurrency == 0 && l.RateRPS == 0 && l.Shape == "" }

func (l Load) String() string {
	switch {
	case l.Shape != "":
		return l.Shape
	case l.Whole():
		return l.Mode
	case l.Mode == contract.ModeOpen:
		return strconv.FormatFloat(l.RateRPS, 'g', -1, 64) + "rps"
	}
	return strconv.Itoa(l.Concurrency)
}

// ParseLoads reads a LOADS argument: comma-separated concurrencies ("1,64"),
// open-loop rates ("2rps,5rps"), open-loop shapes ("ramp": every ramp-up
// wave; "trace": every trace replay) or whole modes ("closed",
// "sustained", "open"), mixed as one likes. The error names the bad item.
func ParseLoads(s string) ([]Load, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("no loads: want concurrencies such as 1,64, rates such as 2rps,5rps, ramp, trace, or a mode: closed, sustained, open")
	}
	var out []Load
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		var l Load
		switch item {
		case contract.ModeClosed, contract.ModeSustained, contract.ModeOpen:
			l = Load{Mode: item}
		case LoadRamp, LoadTrace:
			l = Load{Mode: contract.ModeOpen, Shape: item}
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
				return nil, fmt.Errorf("load %q: want a concurrency (1 to 65536), a rate such as 2rps, ramp, trace, or a mode: closed, sustained, open", item)
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
	// FitOn are the loads the fit reads, of any mode; HoldOut those
	// predicted and judged. They must not overlap.
	FitOn, HoldOut []Load
	// HeldOut is the bundle whose loads are held out (nil: the fitted
	// one): a rehearsal runs its concurrencies as closed waves or as
	// sustained loops, so a sustained load is held out of another bundle
	// of the same servers than the closed waves fitted on, or the other
	// way round.
	HeldOut *bundle.Results
	// Jitter fits the profile's step jitter (Options.Jitter).
	Jitter bool
	// MaxModelLen of the fitted profile (0: the fit's default).
	MaxModelLen int
	// Tokenizer counts prompts (nil: the pinned default).
	Tokenizer engine.Counter
}

// Validation is a profile fitted on some loads of a bundle and judged on the
// others: the predictor's error on every held-out load and metric, and (once
// AddLive has them) a live simulator run's.
type Validation struct {
	Server string
	Fit    *Result
	// FitKeys are the fitted loads; FitOn their closed-loop concurrencies,
	// ascending.
	FitKeys []contract.Key
	FitOn   []int
	// Held are the held-out loads; HoldOut their closed-loop
	// concurrencies, HoldOutSustained their sustained ones and HoldOutRates
	// their constant open-loop rates, ascending; HoldOutRamps and
	// HoldOutTrace their ramps and trace replay.
	Held             []contract.Key
	HoldOut          []int
	HoldOutSustained []int
	HoldOutRates     []float64
	HoldOutRamps     []contract.Ramp
	HoldOutTrace     bool
	// Workload is the bundle's closed-loop workload at the held-out
	// concurrencies: what the predictor ran and a live run sends.
	Workload predict.ClosedWorkload
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
	k := a.Key()
	k.Server = v.Server
	return slices.Contains(v.Held, k)
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
// the loads o.FitOn (of any mode: Profile), predicts the loads o.HoldOut
// with it (of o.HeldOut when set), and tabulates the predictor's error on
// each held-out load and metric against the bundle's records. Both sides
// count generated tokens (GeneratedCounts). A closed wave is predicted by
// predict.Closed, a sustained load by predict.Sustained (the bundle's
// clients, measured and warm-up requests and duration), an open-loop wave
// by predict.Open (each recorded wave's own rate or ramp, arrival process,
// burstiness and seed, the bundle's bounds, and for a trace replay its
// traced arrivals); every prompt is sent with its own max_tokens; the
// contract aggregates each as it aggregates the bundle, goodput over each
// mode's window.
func Validate(res *bundle.Results, o ValidateOptions) (*Validation, error) {
	hold := o.HeldOut
	if hold == nil {
		hold = res
	}
	fitKeys, err := selectLoads("--fit-on", o.FitOn, res, o.Server)
	if err != nil {
		return nil, err
	}
	held, err := selectLoads("--hold-out", o.HoldOut, hold, o.Server)
	if err != nil {
		return nil, err
	}
	if hold == res {
		for _, k := range held {
			if slices.Contains(fitKeys, k) {
				return nil, fmt.Errorf("sim validate: %s is both fitted on and held out; a held-out load must be one the fit did not read", k.LoadLabel())
			}
		}
	}
	v := &Validation{Server: o.Server, FitKeys: fitKeys, Held: held}
	for _, k := range fitKeys {
		if k.Mode == contract.ModeClosed {
			v.FitOn = append(v.FitOn, k.Concurrency)
		}
	}
	v.sortHeld(hold)
	fit, err := Profile(res, Options{Server: o.Server, Engine: o.Engine, FitLoads: fitKeys, Jitter: o.Jitter, MaxModelLen: o.MaxModelLen, Tokenizer: o.Tokenizer})
	if err != nil {
		return nil, err
	}
	v.Fit = fit
	predicted, err := v.predictHeld(hold, predict.Options{Server: o.Server, Tokenizer: o.Tokenizer})
	if err != nil {
		return nil, err
	}
	for _, a := range contract.Aggregates(hold.Waves, GeneratedCounts(hold.Records), hold.ServerNames(), "") {
		if a.Server == o.Server && v.heldOut(a) {
			v.measured = append(v.measured, a)
		}
	}
	v.Rows = errorRows(SourcePredictor, o.Server, predicted, v.measured)
	return v, nil
}

// sortHeld files each held-out load of v by its mode and shape: closed
// concurrencies, sustained ones, constant rates, ramps (of hold's waves)
// and the trace replay.
func (v *Validation) sortHeld(hold *bundle.Results) {
	for _, k := range v.Held {
		switch {
		case k.Mode == contract.ModeClosed:
			v.HoldOut = append(v.HoldOut, k.Concurrency)
		case k.Mode == contract.ModeSustained:
			v.HoldOutSustained = append(v.HoldOutSustained, k.Concurrency)
		case k.Shape == contract.TraceLabel:
			v.HoldOutTrace = true
		case k.Shape != "":
			if r := rampOf(hold, v.Server, k); r != nil && !slices.Contains(v.HoldOutRamps, *r) {
				v.HoldOutRamps = append(v.HoldOutRamps, *r)
			}
		default:
			v.HoldOutRates = append(v.HoldOutRates, k.RequestRateRPS)
		}
	}
}

// predictHeld predicts v's held-out loads of hold with the fitted profile:
// the closed waves, the sustained loops, then the open-loop waves.
func (v *Validation) predictHeld(hold *bundle.Results, popts predict.Options) ([]contract.Aggregate, error) {
	var predicted []contract.Aggregate
	if len(v.HoldOut) > 0 {
		wl, notes, err := predict.ClosedOf(hold)
		if err != nil {
			return nil, err
		}
		wl.Concurrencies = v.HoldOut
		pr, err := predict.Closed(v.Fit.Profile, wl, popts)
		if err != nil {
			return nil, err
		}
		v.Workload, v.Notes = wl, notes
		predicted = append(predicted, pr.Aggregates...)
	}
	if len(v.HoldOutSustained) > 0 {
		aggs, err := v.predictSustained(hold, popts)
		if err != nil {
			return nil, err
		}
		predicted = append(predicted, aggs...)
	}
	var openHeld []contract.Key
	for _, k := range v.Held {
		if k.Mode == contract.ModeOpen {
			openHeld = append(openHeld, k)
		}
	}
	if len(openHeld) > 0 {
		aggs, err := v.predictOpen(hold, openHeld, popts)
		if err != nil {
			return nil, err
		}
		predicted = append(predicted, aggs...)
	}
	return predicted, nil
}

// predictSustained predicts the held-out sustained loops: the bundle's
// clients, measured and warm-up requests and duration.
func (v *Validation) predictSustained(hold *bundle.Results, popts predict.Options) ([]contract.Aggregate, error) {
	s := hold.Workload.Sustained
	n := s.NumRequests
	if n == 0 {
		// Bounded by duration only: more requests than the duration
		// lets the clients send, so the duration ends the part.
		n = predict.MaxOpenRequests
	}
	sw, notes, err := predict.SustainedOf(hold.Workload, n, s.WarmupRequests)
	if err != nil {
		return nil, err
	}
	sw.DurationS = s.DurationS
	v.Notes = appendNew(v.Notes, notes)
	var out []contract.Aggregate
	for _, c := range v.HoldOutSustained {
		pr, err := predict.Sustained(v.Fit.Profile, sw, c, popts)
		if err != nil {
			return nil, err
		}
		out = append(out, pr.Aggregates...)
	}
	return out, nil
}

// predictOpen predicts the held-out open-loop waves of hold (of keys
// openHeld), each recorded wave's own rate or ramp, arrival process,
// burstiness and seed, the bundle's bounds, and for a trace replay its
// traced arrivals, aggregated together.
func (v *Validation) predictOpen(hold *bundle.Results, openHeld []contract.Key, popts predict.Options) ([]contract.Aggregate, error) {
	op := hold.Workload.Open
	sw, notes, err := predict.SustainedOf(hold.Workload, 1, 0)
	if err != nil {
		return nil, err
	}
	v.Notes = appendNew(v.Notes, notes)
	var waves []contract.Wave
	var recs []contract.Record
	for _, hw := range hold.Waves {
		if hw.Kind != contract.KindRecorded || hw.Server != v.Server || !slices.Contains(openHeld, contract.KeyOf(hw)) {
			continue
		}
		ow := predict.OpenWorkload{Prompts: sw.Prompts, MaxTokens: sw.MaxTokens, TimeoutS: sw.TimeoutS, IgnoreEOS: sw.IgnoreEOS, MinTokens: sw.MinTokens, PromptMaxTokens: sw.PromptMaxTokens,
			RateRPS: hw.RequestRateRPS, Arrival: hw.Arrival, Burstiness: hw.Burstiness, Seed: hw.Seed, Ramp: hw.Ramp, NumRequests: op.NumRequests, DurationS: op.DurationS,
			Pacing: op.Pacing}
		if hw.Arrival == contract.ArrivalTrace {
			ow.ArrivalsS = hold.Workload.ArrivalsS
		}
		pr, err := predict.Open(v.Fit.Profile, ow, popts)
		if err != nil {
			return nil, err
		}
		id := len(waves)
		for _, w := range pr.Waves {
			w.ID, w.Repeat = id, hw.Repeat
			waves = append(waves, w)
		}
		for _, rec := range pr.Records {
			rec.Wave, rec.Repeat = id, hw.Repeat
			recs = append(recs, rec)
		}
	}
	return contract.Aggregates(waves, recs, []string{v.Server}, ""), nil
}

// rampOf is the ramp of the server's recorded open-loop waves of key k.
func rampOf(res *bundle.Results, server string, k contract.Key) *contract.Ramp {
	for _, w := range res.Waves {
		if w.Kind == contract.KindRecorded && w.Server == server && contract.KeyOf(w) == k && w.Ramp != nil {
			return w.Ramp
		}
	}
	return nil
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
// rates (ramps' too) are k times lower: a run of simulated servers at time scale k read
// back in simulated time, the profile's.
func SlowedDown(waves []contract.Wave, records []contract.Record, k float64) ([]contract.Wave, []contract.Record) {
	ws := slices.Clone(waves)
	for i := range ws {
		ws[i].WallS *= k
		ws[i].ReleaseSpreadS *= k
		ws[i].RequestRateRPS /= k
		if r := ws[i].Ramp; r != nil {
			ws[i].Ramp = &contract.Ramp{Strategy: r.Strategy, StartRPS: r.StartRPS / k, EndRPS: r.EndRPS / k}
		}
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

// bundleLoads are the loads of the server's recorded waves, in
// compareKeys order.
func bundleLoads(res *bundle.Results, server string) []contract.Key {
	var out []contract.Key
	for _, w := range res.Waves {
		if w.Kind == contract.KindRecorded && w.Server == server {
			out = append(out, contract.KeyOf(w))
		}
	}
	slices.SortFunc(out, compareKeys)
	return slices.Compact(out)
}

// selectLoads turns the loads of a flag into the bundle's loads they name:
// a concurrency its closed wave, a rate its constant-rate open-loop waves,
// ramp and trace its ramp-up waves and trace replays, a mode every load of
// it. An open-loop load capped by max_concurrency is refused (arrivals
// waiting for a slot are not predicted).
func selectLoads(flag string, loads []Load, res *bundle.Results, server string) ([]contract.Key, error) {
	if len(loads) == 0 {
		return nil, fmt.Errorf("sim validate: %s names no load", flag)
	}
	have := bundleLoads(res, server)
	var out []contract.Key
	for _, l := range loads {
		var got []contract.Key
		for _, k := range have {
			if k.Mode != l.Mode {
				continue
			}
			switch {
			case l.Concurrency > 0 && k.Concurrency != l.Concurrency:
			case l.RateRPS > 0 && (k.Shape != "" || k.RequestRateRPS != l.RateRPS):
			case l.Shape == LoadTrace && k.Shape != contract.TraceLabel:
			case l.Shape == LoadRamp && (k.Shape == "" || k.Shape == contract.TraceLabel):
			default:
				got = append(got, k)
			}
		}
		if len(got) == 0 {
			return nil, fmt.Errorf("sim validate: %s %s: server %s of the bundle has no recorded %s (have: %s)", flag, l, server, missingWhat(l), loadLabels(have))
		}
		out = append(out, got...)
	}
	slices.SortFunc(out, compareKeys)
	out = slices.Compact(out)
	for _, k := range out {
		if k.Mode == contract.ModeOpen && res.Workload.Open != nil && res.Workload.Open.MaxConcurrency > 0 {
			return nil, fmt.Errorf("sim validate: %s: the bundle's open_loop.max_concurrency %d is not predicted (arrivals waiting for a slot); use open-loop waves without a cap", flag, res.Workload.Open.MaxConcurrency)
		}
		if k.Mode == contract.ModeSustained && res.Workload.Sustained == nil {
			return nil, fmt.Errorf("sim validate: %s sustained: the bundle records no workload.sustained", flag)
		}
	}
	return out, nil
}

// missingWhat names the waves a load asks for.
func missingWhat(l Load) string {
	switch {
	case l.Mode == contract.ModeClosed && l.Concurrency > 0:
		return "closed-loop wave at " + clients(l.Concurrency)
	case l.Mode == contract.ModeClosed:
		return "closed-loop wave"
	case l.Mode == contract.ModeSustained:
		return "sustained wave (a rehearsal of workload.mode sustained has them)"
	case l.RateRPS > 0:
		return fmt.Sprintf("open-loop wave at %g req/s", l.RateRPS)
	case l.Shape == LoadRamp:
		return "open-loop ramp-up wave"
	case l.Shape == LoadTrace:
		return "trace replay"
	}
	return "open-loop wave"
}

// loadLabels lists loads as the LOADS grammar names them.
func loadLabels(keys []contract.Key) string {
	var out []string
	for _, k := range keys {
		var s string
		switch {
		case k.Mode == contract.ModeClosed:
			s = strconv.Itoa(k.Concurrency)
		case k.Mode == contract.ModeSustained:
			s = "sustained (" + clients(k.Concurrency) + ")"
		case k.Shape == contract.TraceLabel:
			s = LoadTrace
		case k.Shape != "":
			s = LoadRamp + " (" + k.Shape + ")"
		default:
			s = strconv.FormatFloat(k.RequestRateRPS, 'g', -1, 64) + "rps"
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}
