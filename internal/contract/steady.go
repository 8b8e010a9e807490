package contract

import (
	"fmt"
	"math"
	"sort"
)

// SteadyInFlightShare is the share of a sustained wave's concurrency that
// must be in flight for the wave to be in its steady state (vllm-bench's
// rule): at C clients, SteadyThreshold(C) requests.
const SteadyInFlightShare = 0.95

// SteadyShortShare and SteadyMinRequests flag a short steady window: one
// that covers less than this share of the measured window, or holds fewer
// requests than this (a p95 over fewer is close to the maximum, and an
// attainment over fewer has a wide interval).
const (
	SteadyShortShare  = 0.5
	SteadyMinRequests = 50
)

// SteadyThreshold is the in-flight count of the steady state at c clients:
// ⌈SteadyInFlightShare × c⌉, at least 1 (below 20 clients, every client).
func SteadyThreshold(c int) int {
	return max(1, int(math.Ceil(SteadyInFlightShare*float64(c)-1e-9)))
}

// Span is one request's time in flight, [start_s, end_s).
type Span struct{ StartS, EndS float64 }

// SteadySpan is a wave's steady window: from the first instant at least
// the threshold of requests is in flight to the last instant the count
// falls below it.
type SteadySpan struct {
	StartS float64
	EndS   float64
	// BelowS is the time inside the window with fewer than the threshold
	// in flight: its dips.
	BelowS float64
}

// Inside reports whether a request sent at startS belongs to the window:
// it was sent within [start, end). A request counts by its send, not by
// its end, so that the requests of the window are those sent under the
// steady load and their count ÷ the window's duration estimates the rate
// without bias: as many requests are in flight at the window's end (sent
// inside, counted) as at its start (sent before, not counted). Requests
// ended within the window would miss those at its end, about C of them,
// and favour short requests over long ones.
func (w SteadySpan) Inside(startS float64) bool { return startS >= w.StartS && startS < w.EndS }

// DurationS is the window's length.
func (w SteadySpan) DurationS() float64 { return w.EndS - w.StartS }

// FindSteadyWindow is the steady window of one sustained wave's records,
// given as spans, at concurrency clients (SPEC §3): in flight at t is the
// number of spans with start_s ≤ t < end_s; the window runs from the first
// instant that count reaches SteadyThreshold(concurrency) to the last
// instant it falls below it. It is one span: a dip in the middle (a client
// between its last request's end and its next send, or a stall) stays in
// the window and is measured by BelowS, so a single short dip cannot cut a
// run in two and throw away its larger part. The ramp-up (the warm-up's
// last requests still ending, so fewer measured ones in flight) and the
// drain (clients done, none sent) fall outside. False when the count
// never reaches the threshold. Spans with a non-finite time, or an end
// before their start, are left out.
func FindSteadyWindow(spans []Span, concurrency int) (SteadySpan, bool) {
	type event struct {
		t     float64
		delta int
	}
	events := make([]event, 0, 2*len(spans))
	for _, s := range spans {
		if math.IsNaN(s.StartS) || math.IsInf(s.StartS, 0) || math.IsNaN(s.EndS) || math.IsInf(s.EndS, 0) || s.EndS < s.StartS {
			continue
		}
		events = append(events, event{s.StartS, 1}, event{s.EndS, -1})
	}
	sort.Slice(events, func(i, j int) bool { return events[i].t < events[j].t })
	m := SteadyThreshold(concurrency)
	var w SteadySpan
	found, ended := false, false
	n, below, last := 0, 0.0, 0.0
	for i := 0; i < len(events); {
		t := events[i].t
		if found && n < m {
			below += t - last
		}
		before := n
		for ; i < len(events) && events[i].t == t; i++ {
			n += events[i].delta
		}
		switch {
		case !found && n >= m:
			w.StartS, found = t, true
		case found && before >= m && n < m:
			w.EndS, w.BelowS, ended = t, below, true
		}
		last = t
	}
	return w, found && ended
}

// SteadyWindow is one recorded wave's steady window in an aggregate's
// steady figures; StartS and EndS are null where the wave never had the
// threshold in flight.
type SteadyWindow struct {
	Wave      int      `json:"wave"`
	Repeat    int      `json:"repeat"`
	StartS    *float64 `json:"start_s"`
	EndS      *float64 `json:"end_s"`
	DurationS float64  `json:"duration_s"`
	// MeasuredS is the wave's goodput window, the span it is part of.
	MeasuredS float64 `json:"measured_s"`
	BelowS    float64 `json:"below_s"`
	// N is the requests sent inside the window.
	N int `json:"n"`
}

// Span returns the window, false where the wave had none.
func (w SteadyWindow) Span() (SteadySpan, bool) {
	if w.StartS == nil || w.EndS == nil {
		return SteadySpan{}, false
	}
	return SteadySpan{StartS: *w.StartS, EndS: *w.EndS, BelowS: w.BelowS}, true
}

// Steady is a sustained aggregate's figures over the steady windows of its
// waves (its `steady` field), beside the figures over every measured
// request: the requests sent inside each wave's window (SteadySpan.Inside),
// pooled over repeats as the aggregate pools them; goodput and request
// throughput per repeat over the window's duration.
type Steady struct {
	// InFlightMin is SteadyThreshold of the concurrency.
	InFlightMin int            `json:"in_flight_min"`
	Windows     []SteadyWindow `json:"windows"`
	// DurationS and MeasuredS sum the windows and the measured windows;
	// Share is DurationS ÷ MeasuredS (0 when nothing was measured).
	DurationS float64 `json:"duration_s"`
	MeasuredS float64 `json:"measured_s"`
	Share     float64 `json:"share"`
	// N is the requests sent inside the windows, Failures those that
	// failed.
	N                 int         `json:"n"`
	Failures          int         `json:"failures"`
	Goodput           Spread      `json:"goodput_tok_s"`
	RequestThroughput Spread      `json:"request_throughput_rps"`
	TTFT              Percentiles `json:"ttft_s"`
	TPOT              Percentiles `json:"tpot_s"`
	E2E               Percentiles `json:"e2e_s"`
	// SLO is the attainment over the windows' requests, absent when the
	// rehearsal has no objectives (SLOJudge.Apply).
	SLO *SteadySLO `json:"slo,omitempty"`
	// Warnings say when the windows are short (SteadyShortShare,
	// SteadyMinRequests) or missing.
	Warnings []string `json:"warnings"`
}

// SteadySLO is the attainment of the requests of the steady windows
// against the rehearsal's objectives.
type SteadySLO struct {
	// SLOStanding's goodputs are per repeat over the window's duration.
	SLOStanding
	// ChangesVerdict is SteadyChangesVerdict of this verdict and the one
	// over every measured request; Warning says so in words.
	ChangesVerdict bool   `json:"changes_verdict"`
	Warning        string `json:"warning,omitempty"`
}

// SteadyChangesVerdict reports whether a verdict over the steady window
// alone would change the verdict over every measured request: it is
// resolved (pass or fail) and not the same. A window too small to resolve
// changes nothing: it lacks evidence, it does not contradict.
func SteadyChangesVerdict(steady, whole string) bool {
	return steady != VerdictUnresolved && steady != whole
}

// SteadyVerdictWarning is the warning of a steady window whose verdict
// changes the whole run's (SteadyChangesVerdict), "" otherwise.
func SteadyVerdictWarning(a Attainment, steady, whole string) string {
	if !SteadyChangesVerdict(steady, whole) {
		return ""
	}
	return fmt.Sprintf("the steady window alone would %s (%d/%d good, %.1f%% [%.1f–%.1f%%]); the verdict over every measured request is %s",
		steady, a.Good, a.N, 100*a.Attainment, 100*a.CILow, 100*a.CIHigh, whole)
}

// steadyShortWarning says when a wave's window is short, "" when not.
func steadyShortWarning(w SteadyWindow) string {
	switch {
	case w.MeasuredS > 0 && w.DurationS < SteadyShortShare*w.MeasuredS:
		return fmt.Sprintf("steady window %.1f s of %.1f s measured (%.0f%%, under %.0f%%): the figures over every measured request lean on the ramp-up and drain",
			w.DurationS, w.MeasuredS, 100*w.DurationS/w.MeasuredS, 100*SteadyShortShare)
	case w.N < SteadyMinRequests:
		return fmt.Sprintf("steady window holds %d requests (under %d): its tail figures are close to its maximum", w.N, SteadyMinRequests)
	}
	return ""
}

// steadyRow is what the steady figures keep of one record of a sustained
// wave: its span, and its share of each figure.
type steadyRow struct {
	span             Span
	ok               bool
	tokens           int
	ttft, tpot, e2e  float64
	hasTTFT, hasTPOT bool
}

func newSteadyRow(r *Record) steadyRow {
	row := steadyRow{span: Span{r.StartS, r.EndS}, ok: r.OK}
	if !r.OK {
		return row
	}
	row.tokens, row.e2e = r.OutputTokens, r.EndS-r.StartS
	row.ttft, row.hasTTFT = r.TTFT()
	row.tpot, row.hasTPOT = r.TPOT()
	return row
}

// steadyWindowOf finds the steady window of one wave from its rows, with
// its goodput window measuredS.
func steadyWindowOf(w Wave, rows []steadyRow, measuredS float64) (SteadyWindow, SteadySpan, bool) {
	spans := make([]Span, len(rows))
	for i, r := range rows {
		spans[i] = r.span
	}
	out := SteadyWindow{Wave: w.ID, Repeat: w.Repeat, MeasuredS: measuredS}
	span, ok := FindSteadyWindow(spans, w.Concurrency)
	if !ok {
		return out, span, false
	}
	start, end := span.StartS, span.EndS
	out.StartS, out.EndS, out.DurationS, out.BelowS = &start, &end, span.DurationS(), span.BelowS
	return out, span, true
}

// steadyOf is the steady figures of a sustained aggregate at concurrency
// clients over its waves, in repeat order.
func steadyOf(waves []*waveAgg, concurrency int) *Steady {
	s := &Steady{InFlightMin: SteadyThreshold(concurrency), Windows: []SteadyWindow{}, Warnings: []string{}}
	var lat Latencies
	var goodput, reqRate []float64
	for _, wa := range waves {
		win, span, ok := steadyWindowOf(wa.w, wa.steady, wa.window())
		s.MeasuredS += win.MeasuredS
		if !ok {
			s.Windows = append(s.Windows, win)
			s.Warnings = append(s.Warnings, fmt.Sprintf("repeat %d (wave %d): never had %d requests in flight: no steady window", wa.w.Repeat, wa.w.ID, s.InFlightMin))
			continue
		}
		tokens, oks := 0, 0
		for _, r := range wa.steady {
			if !span.Inside(r.span.StartS) {
				continue
			}
			win.N++
			if !r.ok {
				s.Failures++
				continue
			}
			oks++
			tokens += r.tokens
			lat.E2E = append(lat.E2E, r.e2e)
			if r.hasTTFT {
				lat.TTFT = append(lat.TTFT, r.ttft)
			}
			if r.hasTPOT {
				lat.TPOT = append(lat.TPOT, r.tpot)
			}
		}
		s.Windows = append(s.Windows, win)
		s.N += win.N
		s.DurationS += win.DurationS
		if d := win.DurationS; d > 0 {
			goodput = append(goodput, float64(tokens)/d)
			reqRate = append(reqRate, float64(oks)/d)
		}
		if w := steadyShortWarning(win); w != "" {
			s.Warnings = append(s.Warnings, fmt.Sprintf("repeat %d (wave %d): %s", wa.w.Repeat, wa.w.ID, w))
		}
	}
	if s.MeasuredS > 0 {
		s.Share = s.DurationS / s.MeasuredS
	}
	s.Goodput, s.RequestThroughput = SpreadOf(goodput), SpreadOf(reqRate)
	s.TTFT, s.TPOT, s.E2E = Summarize(lat.TTFT), Summarize(lat.TPOT), Summarize(lat.E2E)
	return s
}

// SteadyProbe is one wave's steady window with the attainment over its
// requests: a capacity probe's `steady` field.
type SteadyProbe struct {
	SteadyWindow
	Good       int     `json:"good"`
	Attainment float64 `json:"attainment"`
	CILow      float64 `json:"ci_low"`
	CIHigh     float64 `json:"ci_high"`
	// Verdict is against the target with the probe's min_requests;
	// ChangesVerdict is SteadyChangesVerdict of it and the probe's.
	Verdict        string   `json:"verdict"`
	ChangesVerdict bool     `json:"changes_verdict"`
	Warnings       []string `json:"warnings"`
}

// SteadyProbeOf is the steady window of the records of one sustained wave
// w and the attainment of the requests sent inside it against slo, its
// verdict with minRequests, and whether it changes whole, the verdict over
// every measured request.
func SteadyProbeOf(w Wave, records []Record, slo SLO, minRequests int, whole string) SteadyProbe {
	rows := make([]steadyRow, len(records))
	for i := range records {
		rows[i] = steadyRow{span: Span{records[i].StartS, records[i].EndS}}
	}
	win, span, ok := steadyWindowOf(w, rows, WaveWindowS(records))
	t := newAttainer(slo.Objectives)
	for i := range records {
		if ok && span.Inside(records[i].StartS) {
			t.add(&records[i])
		}
	}
	a := t.attainment()
	win.N = a.N
	out := SteadyProbe{SteadyWindow: win, Good: a.Good, Attainment: a.Attainment, CILow: a.CILow, CIHigh: a.CIHigh,
		Verdict: a.Verdict(slo.AttainmentTarget, minRequests), Warnings: []string{}}
	if !ok {
		out.Warnings = append(out.Warnings, fmt.Sprintf("never had %d requests in flight: no steady window", SteadyThreshold(w.Concurrency)))
	} else if s := steadyShortWarning(win); s != "" {
		out.Warnings = append(out.Warnings, s)
	}
	out.ChangesVerdict = SteadyChangesVerdict(out.Verdict, whole)
	if s := SteadyVerdictWarning(a, out.Verdict, whole); s != "" {
		out.Warnings = append(out.Warnings, s)
	}
	return out
}
