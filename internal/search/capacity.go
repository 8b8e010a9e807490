package search

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/rehearse/rehearse/internal/contract"
)

// Probe kinds, as a probe's wave records them (contract.Wave.Probe).
const (
	ProbeSearch = "search"
	ProbeRetry  = "retry"
	ProbeRepeat = "repeat"
	ProbeScreen = "screen"
)

// Spec is a capacity search as results.json keeps it beside its answer:
// everything Replay needs besides the records.
type Spec struct {
	Start       int `json:"start"`
	Max         int `json:"max_concurrency"`
	MinRequests int `json:"min_requests"`
	// MaxRequests and MaxDurationS cap one probe's measured part (a retry
	// measures for RetryScale times them); 0: no cap of that kind.
	MaxRequests  int     `json:"max_requests"`
	MaxDurationS float64 `json:"max_duration_s,omitempty"`
	// WarmupRequests are sent before each probe's measured part; -1 (or
	// absent in the file): WarmupRounds per client of the probe.
	WarmupRequests int `json:"warmup_requests"`
	Repeats        int `json:"repeats"`
	// Predicted is the bracket the server's fitted profile predicts, when
	// one was given; its ends are probed first.
	Predicted *Bracket `json:"predicted,omitempty"`
	// Screen says the doubling screens its loads (Config.Screen); absent
	// in bundles made before screens, which did not.
	Screen bool `json:"screen,omitempty"`
	// Steer says the search steers by the probes' margins (Config.Steer);
	// absent in bundles made before it, whose searches bisected.
	Steer bool `json:"steer,omitempty"`
}

// Config is the search config of s under target alpha.
func (s Spec) Config(alpha float64) Config {
	return Config{Start: s.Start, Max: s.Max, Alpha: alpha, MinRequests: s.MinRequests, Repeats: s.Repeats, Predicted: s.Predicted, Screen: s.Screen, Steer: s.Steer}
}

// Caps are the caps of the measured part of a probe of kind (a Probe's
// Kind) at load clients: its requests (max_requests, but at least two
// looks, 2·LookUnit) and its duration, RetryScale times the usual for a
// retry, ScreenSize requests for a screen (0: no cap of that kind). The runner bounds the probe's wave by them and Recompute
// checks its stop against them, so both compute them here.
func (s Spec) Caps(kind string, load int) (requests int, duration time.Duration) {
	scale := 1
	if kind == ProbeRetry {
		scale = RetryScale
	}
	requests, duration = scale*s.MaxRequests, time.Duration(float64(scale)*s.MaxDurationS*float64(time.Second))
	if requests > 0 {
		// A cap below two looks would leave a probe at a high load no
		// look at all, or one: never a verdict near α.
		requests = max(requests, scale*2*LookUnit(s.MinRequests, load))
	}
	if kind == ProbeScreen {
		requests = s.ScreenSize(load)
		if s.MaxRequests > 0 {
			requests = min(requests, s.MaxRequests)
		}
	}
	return requests, duration
}

// ScreenFloor is the fewest requests a screen measures. A screen's fail
// needs the Wilson interval's upper end below α: over 16 requests at
// α 0.95 that is 13 good or fewer (81 %), so a load well below α fails
// its screen, while a load at α fails one with the interval's error rate
// (about 2.5 %), as a full probe's first look would.
const ScreenFloor = 16

// ScreenSize is the requests a screen at load clients measures:
// LookRounds rounds of the closed loop, at least ScreenFloor, and no more
// than a full probe's first look (LookUnit), which already judges as much.
// At α 0.95 (min_requests 73) that is 16 requests at 1 to 4 clients where
// a full probe needs 73.
func ScreenSize(minRequests, load int) int {
	return min(LookUnit(minRequests, load), max(ScreenFloor, LookRounds*load))
}

// SteerScreenRounds is the most rounds of the closed loop a screen of a
// steering search (Config.Steer) measures: one from ScreenFloor clients
// on, two below; a load whose screen would need more is not screened (the
// doubling starts at the first load that needs no more: 8 clients from a
// start of 1), since a screen below ScreenFloor requests cannot fail and
// one client's requests cost the time of a whole round each.
const SteerScreenRounds = 2

// ScreenSize is the requests a screen of s at load clients measures:
// ScreenSize's, or under Steer one round of the closed loop and at least
// ScreenFloor. A screen can only fail a load, and its fail needs the
// Wilson interval wholly below α; the round it measures follows a round
// of warm-up, so it is not the clients' first, simultaneous one.
func (s Spec) ScreenSize(load int) int { return screenSize(s.Steer, s.MinRequests, load) }

func screenSize(steer bool, minRequests, load int) int {
	if steer {
		return max(load, ScreenFloor)
	}
	return ScreenSize(minRequests, load)
}

// ScreenVerdict is a screen's verdict over a: a fail when it measured
// its whole size and the Wilson interval lies wholly below alpha, else
// VerdictScreened: a screen never passes a load (SPEC §8), and one cut
// short by a duration cap cannot fail it either.
func ScreenVerdict(a contract.Attainment, alpha float64, size int) string {
	if a.N >= size && a.N > 0 && a.CIHigh < alpha {
		return VerdictFail
	}
	return VerdictScreened
}

// WarmupRounds is the default warm-up of a probe at C clients, in
// requests per client: the clients start together, so their first requests
// end together too, and a second round lets their phases spread out before
// the measured part begins.
const WarmupRounds = 2

// Warmup is the warm-up requests of a probe at load c; first says it is
// the search's first probe. Under Steer, a probe after the first finds
// the server warm from the one before, and its warm-up (by default) is
// one round: it only lets the new load's clients, started together, end
// their first requests outside the measured part.
func (s Spec) Warmup(c int, first bool) int {
	switch {
	case s.WarmupRequests >= 0:
		return s.WarmupRequests
	case s.Steer && !first:
		return c
	}
	return WarmupRounds * c
}

// Kind is the probe kind a wave of p records.
func (p Probe) Kind() string {
	switch {
	case p.Screen:
		return ProbeScreen
	case p.Retry:
		return ProbeRetry
	case p.Repeat > 0:
		return ProbeRepeat
	}
	return ProbeSearch
}

// Measure is the outcome of p's measured records in a search of spec:
// MeasureScreen's for a screen, Measure's for any other probe.
func (p Probe) Measure(waveID int, records []contract.Record, slo contract.SLO, spec Spec) Outcome {
	if p.Screen {
		return MeasureScreen(waveID, records, slo, spec.ScreenSize(p.Load))
	}
	return Measure(waveID, records, slo, spec.MinRequests)
}

// Measure is the outcome of one probe's measured records (the records of
// its recorded wave): over its verdict population (Population), their
// attainment against slo's objectives, its verdict at slo's target with
// minRequests and the p95 TTFT and TPOT of the successful ones; over every
// measured record (all sent at the probe's load), the request rate and
// good-token rate over the wave's measured window, and its steady window
// (contract.SteadyProbeOf, the load and repeat read from the records).
func Measure(waveID int, records []contract.Record, slo contract.SLO, minRequests int) Outcome {
	pop, after := Population(records, slo, minRequests)
	a := contract.Attain(pop, slo.Objectives)
	o := outcome(waveID, records, pop, a, a.Verdict(slo.AttainmentTarget, minRequests), slo)
	o.AfterVerdict = len(after)
	if len(records) > 0 {
		w := contract.Wave{ID: waveID, Concurrency: records[0].Concurrency, Repeat: records[0].Repeat}
		st := contract.SteadyProbeOf(w, records, slo, minRequests, o.Verdict)
		o.Steady = &st
	}
	return o
}

// MeasureScreen is the outcome of a screen's measured records: over all
// of them (its size sent), their attainment and its ScreenVerdict, with
// Measure's latencies and rates. A screen has no steady window: it
// measures a few rounds only.
func MeasureScreen(waveID int, records []contract.Record, slo contract.SLO, size int) Outcome {
	a := contract.Attain(records, slo.Objectives)
	return outcome(waveID, records, records, a, ScreenVerdict(a, slo.AttainmentTarget, size), slo)
}

// outcome is the Outcome of a probe's measured records whose verdict
// population pop has attainment a and verdict.
func outcome(waveID int, records, pop []contract.Record, a contract.Attainment, verdict string, slo contract.SLO) Outcome {
	o := Outcome{
		WaveIDs: []int{waveID}, N: a.N, Good: a.Good, Attainment: a.Attainment, CILow: a.CILow, CIHigh: a.CIHigh,
		Verdict: verdict, Failures: a.Failed, Binding: a.Binding(),
	}
	var l contract.Latencies
	for _, r := range pop {
		l.Add(r)
	}
	if m, ok := contract.Margin(pop, slo.Objectives, slo.AttainmentTarget); ok {
		o.Margin = &m
	}
	o.TTFTP95S = contract.Percentile(sorted(l.TTFT), 0.95)
	o.TPOTP95S = contract.Percentile(sorted(l.TPOT), 0.95)
	goodTokens := 0
	for _, r := range records {
		if contract.Judge(r, slo.Objectives).Good {
			goodTokens += r.OutputTokens
		}
	}
	if w := contract.WaveWindowS(records); w > 0 {
		o.AchievedRPS = float64(len(records)) / w
		o.GoodputTokS = float64(goodTokens) / w
	}
	return o
}

// Population splits a probe's measured records into its verdict
// population and the rest (SPEC §8). Records that carry their place in the
// send order (Record.Request) are taken in that order: the population is
// the first k for the first look point k (Look) whose verdict is resolved,
// or all of them when none is (a cap ended the probe first); after are the
// requests still in flight at that look, measured but outside the verdict.
// Which records form the population depends on their outcomes in send
// order only, never on how long any took. Records without a place (a
// bundle made before the rule) are all the population.
func Population(records []contract.Record, slo contract.SLO, minRequests int) (pop, after []contract.Record) {
	recs, ok := sendOrder(records)
	if !ok {
		return records, nil
	}
	if k, ok := firstResolved(recs, slo, minRequests); ok {
		return recs[:k], recs[k:]
	}
	return recs, nil
}

// sendOrder returns records sorted by their place in the send order,
// false when one has none.
func sendOrder(records []contract.Record) ([]contract.Record, bool) {
	for _, r := range records {
		if r.Request == nil {
			return nil, false
		}
	}
	recs := append([]contract.Record(nil), records...)
	sort.SliceStable(recs, func(a, b int) bool { return *recs[a].Request < *recs[b].Request })
	return recs, true
}

// firstResolved is the first look point k ≤ len(recs) (LookUnit · 2^j, the
// load read from the records, all of one wave) whose first k records'
// verdict is resolved, false when none is.
func firstResolved(recs []contract.Record, slo contract.SLO, minRequests int) (int, bool) {
	if minRequests < 1 || len(recs) == 0 {
		return 0, false
	}
	for k := LookUnit(minRequests, recs[0].Concurrency); k <= len(recs); k *= 2 {
		if resolved(recs[:k], slo, minRequests) {
			return k, true
		}
	}
	return 0, false
}

func sorted(xs []float64) []float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s
}

// Capacity is one server's capacity search in results.json (SPEC §8).
type Capacity struct {
	Server           string              `json:"server"`
	Objectives       contract.Objectives `json:"objectives"`
	AttainmentTarget float64             `json:"attainment_target"`
	Control          string              `json:"control"`
	Search           Spec                `json:"search"`
	// MaxPass and MinFail are null when no probe passed or none failed.
	MaxPass           *int     `json:"max_pass"`
	MinFail           *int     `json:"min_fail"`
	MinFailUnresolved bool     `json:"min_fail_unresolved,omitempty"`
	AchievedRPS       *float64 `json:"achieved_rps"`
	GoodputTokS       *float64 `json:"goodput_tok_s"`
	BindingObjective  *string  `json:"binding_objective"`
	StopReason        string   `json:"stop_reason"`
	// Predicted is the predicted bracket kept beside the measured one.
	Predicted    *Bracket       `json:"predicted"`
	NonMonotonic []NonMonotonic `json:"non_monotonic,omitempty"`
	Probes       []ProbeRecord  `json:"probes"`
}

// ProbeRecord is one probe of a Capacity.
type ProbeRecord struct {
	Load    int    `json:"load"`
	Kind    string `json:"kind"`
	Repeat  int    `json:"repeat"`
	WaveIDs []int  `json:"wave_ids"`
	// N is the requests of the verdict's population: the first N sent
	// (SPEC §8); AfterVerdict the probe's other measured requests, in
	// flight when the look over those N resolved (recorded, outside the
	// verdict; its rates count them).
	N            int      `json:"n"`
	AfterVerdict int      `json:"after_verdict,omitempty"`
	Good         int      `json:"good"`
	Attainment   float64  `json:"attainment"`
	CILow        float64  `json:"ci_low"`
	CIHigh       float64  `json:"ci_high"`
	Verdict      string   `json:"verdict"`
	TTFTP95S     *float64 `json:"ttft_p95"`
	TPOTP95S     *float64 `json:"tpot_p95"`
	Failures     int      `json:"failures"`
	// AchievedRPS and GoodputTokS are over the probe's measured window.
	AchievedRPS float64 `json:"achieved_rps"`
	GoodputTokS float64 `json:"goodput_tok_s"`
	Binding     string  `json:"binding_objective,omitempty"`
	// Margin is the probe's contract.Margin over its verdict population,
	// what a steering search (Spec.Steer) interpolates; absent when more
	// than 1 − α of it failed (an infinite margin), and in a search that
	// does not steer.
	Margin *float64 `json:"margin,omitempty"`
	// Steady is the probe's steady window and the attainment over it; it
	// never decides the verdict, and it flags one it would change. Absent
	// in bundles written before it.
	Steady *contract.SteadyProbe `json:"steady,omitempty"`
}

// ControlConcurrency is the control variable of every search here.
const ControlConcurrency = "concurrency"

// NewCapacity is results.json's entry for server's search of spec under
// slo, standing at r.
func NewCapacity(server string, spec Spec, slo contract.SLO, r Result) Capacity {
	c := Capacity{
		Server: server, Objectives: slo.Objectives, AttainmentTarget: slo.AttainmentTarget,
		Control: ControlConcurrency, Search: spec, MinFailUnresolved: r.MinFailUnresolved,
		StopReason: r.StopReason, Predicted: r.Predicted, NonMonotonic: r.NonMonotonic, Probes: []ProbeRecord{},
	}
	if r.MaxPass > 0 {
		v, rps, tok := r.MaxPass, r.AchievedRPS, r.GoodputTokS
		c.MaxPass, c.AchievedRPS, c.GoodputTokS = &v, &rps, &tok
	}
	if r.MinFail > 0 {
		v := r.MinFail
		c.MinFail = &v
	}
	if r.BindingObjective != "" {
		b := r.BindingObjective
		c.BindingObjective = &b
	}
	for _, p := range r.Probes {
		o := p.Outcome
		pr := ProbeRecord{
			Load: p.Load, Kind: p.Kind(), Repeat: p.Repeat, WaveIDs: o.WaveIDs, N: o.N, AfterVerdict: o.AfterVerdict, Good: o.Good,
			Attainment: o.Attainment, CILow: o.CILow, CIHigh: o.CIHigh, Verdict: o.Verdict,
			TTFTP95S: o.TTFTP95S, TPOTP95S: o.TPOTP95S, Failures: o.Failures,
			AchievedRPS: o.AchievedRPS, GoodputTokS: o.GoodputTokS, Binding: o.Binding, Steady: o.Steady,
		}
		if spec.Steer {
			pr.Margin = finite(o.Margin)
		}
		c.Probes = append(c.Probes, pr)
	}
	return c
}

// Recompute is server's capacity entry recomputed from the recorded waves
// and records alone: its probe waves (Probe set, not cut), in the order they
// ran, measured again, each one's stop replayed where it records why it
// ended (checkStop), and replayed through the search of spec. A server
// that failed during its last probe is known only from the stored entry:
// failedLast carries it.
func Recompute(server string, spec Spec, slo contract.SLO, waves []contract.Wave, records []contract.Record, failedLast bool) (Capacity, error) {
	byWave := map[int][]contract.Record{}
	for _, r := range records {
		if r.Kind == contract.KindRecorded {
			byWave[r.Wave] = append(byWave[r.Wave], r)
		}
	}
	var probes []Probe
	repeats := map[int]int{} // repeat probes so far per load
	for _, w := range waves {
		if !isProbeWave(server, w) {
			continue
		}
		p := Probe{Load: w.Concurrency, Retry: w.Probe == ProbeRetry, Screen: w.Probe == ProbeScreen}
		if w.Probe == ProbeRepeat {
			// The search re-runs its final points in rounds: the k-th
			// repeat probe at a load is its repeat k.
			repeats[w.Concurrency]++
			p.Repeat = repeats[w.Concurrency]
		}
		p.Outcome = p.Measure(w.ID, byWave[w.ID], slo, spec)
		if err := checkStop(spec, slo, w, byWave[w.ID]); err != nil {
			return Capacity{}, fmt.Errorf("capacity of %s: the probe of wave %d (%v): %w", server, w.ID, p, err)
		}
		probes = append(probes, p)
	}
	if failedLast && len(probes) > 0 {
		probes[len(probes)-1].Outcome.ServerFailed = true
	}
	r, err := Replay(spec.Config(slo.AttainmentTarget), probes)
	if err != nil {
		return Capacity{}, fmt.Errorf("capacity of %s: %w", server, err)
	}
	return NewCapacity(server, spec, slo, r), nil
}

// finite is m when it is a finite number, else nil.
func finite(m *float64) *float64 {
	if m == nil || math.IsInf(*m, 0) || math.IsNaN(*m) {
		return nil
	}
	v := *m
	return &v
}
