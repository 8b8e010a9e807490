package contract

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// SLO objective names (SPEC §3, vLLM's --goodput names; itl is a request's
// largest inter-chunk gap, which vLLM does not offer).
const (
	ObjTTFT = "ttft"
	ObjTPOT = "tpot"
	ObjITL  = "itl"
	ObjE2EL = "e2el"
)

// ObjectiveNames lists the objectives in their canonical order, the order
// Objectives are written in.
var ObjectiveNames = []string{ObjTTFT, ObjTPOT, ObjITL, ObjE2EL}

// DefaultAttainment is the attainment target α when none is given (SPEC §8).
const DefaultAttainment = 0.95

// WilsonZ is the normal quantile of the 95 % two-sided Wilson interval.
const WilsonZ = 1.959963984540054

// Verdicts of an attainment against a target α.
const (
	VerdictPass       = "pass"
	VerdictFail       = "fail"
	VerdictUnresolved = "unresolved"
)

// Objectives are per-request latency limits in milliseconds; nil means the
// objective is not set. A request meets an objective when its value is at
// most the limit (`<=`: a request exactly at the limit is good).
type Objectives struct {
	TTFTMS *float64 `json:"ttft_ms,omitempty"`
	TPOTMS *float64 `json:"tpot_ms,omitempty"`
	ITLMS  *float64 `json:"itl_ms,omitempty"`
	E2ELMS *float64 `json:"e2el_ms,omitempty"`
}

// Scaled returns o with every limit multiplied by k (a simulated
// rehearsal's objectives, stated at one time scale, run at another).
func (o Objectives) Scaled(k float64) Objectives {
	var out Objectives
	for _, name := range o.Names() {
		v, _ := o.Limit(name)
		scaled := v * k
		*out.limit(name) = &scaled
	}
	return out
}

// limit returns the objective's field.
func (o *Objectives) limit(name string) **float64 {
	switch name {
	case ObjTTFT:
		return &o.TTFTMS
	case ObjTPOT:
		return &o.TPOTMS
	case ObjITL:
		return &o.ITLMS
	case ObjE2EL:
		return &o.E2ELMS
	}
	return nil
}

// Limit returns the objective's limit in milliseconds, false where it is
// not set (or the name is none of ObjectiveNames).
func (o Objectives) Limit(name string) (float64, bool) {
	p := o.limit(name)
	if p == nil || *p == nil {
		return 0, false
	}
	return **p, true
}

// Set sets the objective's limit in milliseconds; an unknown name is an
// error.
func (o *Objectives) Set(name string, ms float64) error {
	p := o.limit(name)
	if p == nil {
		return fmt.Errorf("unknown objective %q (want %s)", name, strings.Join(ObjectiveNames, ", "))
	}
	if math.IsNaN(ms) || math.IsInf(ms, 0) || ms <= 0 {
		return fmt.Errorf("objective %s: %v ms is not a positive limit", name, ms)
	}
	*p = &ms
	return nil
}

// Names lists the objectives set, in canonical order.
func (o Objectives) Names() []string {
	var out []string
	for _, n := range ObjectiveNames {
		if _, ok := o.Limit(n); ok {
			out = append(out, n)
		}
	}
	return out
}

// Empty reports whether no objective is set.
func (o Objectives) Empty() bool { return len(o.Names()) == 0 }

// String writes the objectives in the form ParseObjectives reads, in
// canonical order: "ttft<=500ms,tpot<=50ms".
func (o Objectives) String() string {
	var parts []string
	for _, n := range o.Names() {
		v, _ := o.Limit(n)
		parts = append(parts, n+"<="+FormatMS(v))
	}
	return strings.Join(parts, ",")
}

// FormatMS writes a limit in milliseconds as the shortest of "500ms" or
// "1.5s" that reads back exactly.
func FormatMS(ms float64) string {
	if ms >= 1000 && math.Mod(ms, 1000) == 0 {
		return strconv.FormatFloat(ms/1000, 'f', -1, 64) + "s"
	}
	return strconv.FormatFloat(ms, 'f', -1, 64) + "ms"
}

// ParseObjectives reads "ttft<=500ms,tpot<=50ms": comma-separated
// objectives, each a name of ObjectiveNames, `<=` (`<` is not accepted: a
// limit is inclusive, as vLLM's --goodput is), and a positive number with
// the unit ms or s. A number without a unit, an unknown name, a name given
// twice or an empty list is an error naming the part at fault.
func ParseObjectives(s string) (Objectives, error) {
	var o Objectives
	if strings.TrimSpace(s) == "" {
		return o, fmt.Errorf("no objective (write e.g. ttft<=500ms,tpot<=50ms)")
	}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		name, value, ok := strings.Cut(part, "<=")
		if !ok {
			if strings.Contains(part, "<") || strings.Contains(part, "=") || strings.Contains(part, ":") {
				return Objectives{}, fmt.Errorf("%q: write the objective as name<=limit (e.g. ttft<=500ms); a limit is inclusive", part)
			}
			return Objectives{}, fmt.Errorf("%q: not name<=limit (e.g. ttft<=500ms)", part)
		}
		name = strings.ToLower(strings.TrimSpace(name))
		if err := o.setOnce(name, strings.TrimSpace(value)); err != nil {
			return Objectives{}, fmt.Errorf("%q: %w", part, err)
		}
	}
	return o, nil
}

// setOnce parses a limit with its unit and sets the named objective,
// refusing one already set.
func (o *Objectives) setOnce(name, value string) error {
	if o.limit(name) == nil {
		return fmt.Errorf("unknown objective %q (want %s)", name, strings.Join(ObjectiveNames, ", "))
	}
	if _, dup := o.Limit(name); dup {
		return fmt.Errorf("objective %s given twice", name)
	}
	ms, err := ParseLimitMS(value)
	if err != nil {
		return err
	}
	return o.Set(name, ms)
}

// SetLimit sets the named objective from a limit with its unit ("500ms",
// "0.5s"), refusing an unknown name or one already set.
func (o *Objectives) SetLimit(name, value string) error { return o.setOnce(name, value) }

// ParseLimitMS reads a positive time limit with its unit, ms or s, and
// returns it in milliseconds. A bare number is an error: 500 could be
// either.
func ParseLimitMS(v string) (float64, error) {
	num, scale := "", 0.0
	switch {
	case strings.HasSuffix(v, "ms"):
		num, scale = strings.TrimSuffix(v, "ms"), 1
	case strings.HasSuffix(v, "s"):
		num, scale = strings.TrimSuffix(v, "s"), 1000
	default:
		if _, err := strconv.ParseFloat(v, 64); err == nil {
			return 0, fmt.Errorf("limit %q has no unit (write %sms or %ss)", v, v, v)
		}
		return 0, fmt.Errorf("limit %q is not a time (write e.g. 500ms or 0.5s)", v)
	}
	x, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
		return 0, fmt.Errorf("limit %q is not a time (write e.g. 500ms or 0.5s)", v)
	}
	if x <= 0 {
		return 0, fmt.Errorf("limit %q is not positive", v)
	}
	return x * scale, nil
}

// CheckAttainmentTarget says what is wrong with an attainment target α: it
// must lie strictly between 0 and 1.
func CheckAttainmentTarget(alpha float64) error {
	if math.IsNaN(alpha) || alpha <= 0 || alpha >= 1 {
		return fmt.Errorf("attainment target %v is not between 0 and 1 (exclusive), e.g. 0.95", alpha)
	}
	return nil
}

// MaxITL is a record's largest gap between consecutive content chunks,
// false where it has fewer than two chunks.
func (r Record) MaxITL() (float64, bool) {
	if len(r.ChunkTimesS) < 2 {
		return 0, false
	}
	m := math.Inf(-1)
	for i := 1; i < len(r.ChunkTimesS); i++ {
		m = max(m, r.ChunkTimesS[i]-r.ChunkTimesS[i-1])
	}
	return m, true
}

// RequestVerdict is one request's standing against a set of objectives.
type RequestVerdict struct {
	// Good is true when the request succeeded and met every objective.
	Good bool
	// Missed names the objectives a successful request missed, in
	// canonical order; empty for a failure (a failure is a miss of the
	// request as a whole, counted apart) and for a good request.
	Missed []string
	// Ratio is the request's value over its limit for the objective it
	// comes nearest to missing (or misses by most): ≤ 1 for a good
	// request, +Inf for a failure or a missing first token; 0 with no
	// objective defined for it.
	Ratio float64
}

// Judge is r's verdict against o (SPEC §3, DistServe's definition): a
// failed request is never good; a successful one is good when each set
// objective is met, value ≤ limit (within a nanosecond of rounding):
//   - ttft: first_content_s − start_s; a successful request with no content
//     has no first token and misses it;
//   - tpot: as the TPOT population; a request of one output token (or
//     none) has no time per output token and meets it vacuously, as vLLM's
//     goodput counts its TPOT as 0;
//   - itl: the largest gap between consecutive chunks; fewer than two
//     chunks have no gap and meet it vacuously;
//   - e2el: end_s − start_s.
func Judge(r Record, o Objectives) RequestVerdict {
	if !r.OK {
		return RequestVerdict{Ratio: math.Inf(1)}
	}
	var missed []string
	ratio := 0.0
	for _, name := range o.Names() {
		limit, _ := o.Limit(name)
		v, defined := 0.0, true
		switch name {
		case ObjTTFT:
			v, defined = r.TTFT()
			if !defined {
				missed = append(missed, name)
				ratio = math.Inf(1)
				continue
			}
		case ObjTPOT:
			v, defined = r.TPOT()
		case ObjITL:
			v, defined = r.MaxITL()
		case ObjE2EL:
			v = r.EndS - r.StartS
		}
		if !defined {
			continue
		}
		if v*1000 > limit+limitSlackMS {
			missed = append(missed, name)
		}
		if limit > 0 {
			ratio = math.Max(ratio, v*1000/limit)
		} else if v > 0 {
			ratio = math.Inf(1)
		}
	}
	return RequestVerdict{Good: len(missed) == 0, Missed: missed, Ratio: ratio}
}

// Margin is how far records stand from objectives o at attainment target
// alpha: the ⌈alpha·n⌉-th smallest of their Ratios (the nearest-rank
// alpha-quantile), so the records attain alpha about when it is ≤ 1 (a
// good request's ratio can exceed 1 by the nanosecond of rounding Judge
// allows). It is continuous in load where attainment is not (every
// request good, or none), and a capacity search steers by it. +Inf when
// more than 1 − alpha of them failed; false with no records.
func Margin(records []Record, o Objectives, alpha float64) (float64, bool) {
	if len(records) == 0 || !(alpha > 0 && alpha < 1) {
		return 0, false
	}
	ratios := make([]float64, len(records))
	for i, r := range records {
		ratios[i] = Judge(r, o).Ratio
	}
	sort.Float64s(ratios)
	k := int(math.Ceil(alpha*float64(len(ratios)))) - 1
	return ratios[max(k, 0)], true
}

// limitSlackMS is how far over a limit a value may be and still meet it:
// one nanosecond, below any clock's resolution, so a value computed at the
// limit (a TPOT of 0.05000000000000003 s against 50 ms) is not missed by
// floating-point rounding.
const limitSlackMS = 1e-6

// Attainment is the share of attempted requests that were good, with its
// 95 % Wilson score interval.
type Attainment struct {
	// N is the attempted requests, Good the good ones among them.
	N, Good int
	// Attainment is Good ÷ N (0 when N is 0).
	Attainment float64
	// CILow and CIHigh bound the 95 % Wilson score interval ([0, 1] when
	// N is 0: nothing is known).
	CILow, CIHigh float64
	// Missed counts, per objective, the successful requests that missed
	// it; Failed counts the failed requests (all misses).
	Missed map[string]int
	Failed int
}

// Attain judges records against o and returns their attainment. Every
// record given is an attempt.
func Attain(records []Record, o Objectives) Attainment {
	t := newAttainer(o)
	for i := range records {
		t.add(&records[i])
	}
	return t.attainment()
}

// attainer is Attain over records handed to it one at a time.
type attainer struct {
	o Objectives
	a Attainment
}

func newAttainer(o Objectives) *attainer {
	return &attainer{o: o, a: Attainment{Missed: map[string]int{}}}
}

// add judges r and counts it; it returns the verdict.
func (t *attainer) add(r *Record) RequestVerdict {
	v := Judge(*r, t.o)
	t.count(r.OK, v.Good)
	for _, m := range v.Missed {
		t.a.Missed[m]++
	}
	return v
}

// count counts a request already judged: ok, and good or not (its missed
// objectives are not kept).
func (t *attainer) count(ok, good bool) {
	t.a.N++
	switch {
	case !ok:
		t.a.Failed++
	case good:
		t.a.Good++
	}
}

func (t *attainer) attainment() Attainment {
	a := t.a
	a.Missed = maps.Clone(t.a.Missed)
	a.fill()
	return a
}

// AttainmentOf is the attainment of good requests out of n attempts, for a
// caller that counted them itself (pooling probes, a test); its Missed is
// empty. A test helper: the binary's attainments all come from Attain.
func AttainmentOf(good, n int) Attainment {
	a := Attainment{N: n, Good: good, Missed: map[string]int{}}
	a.fill()
	return a
}

func (a *Attainment) fill() {
	a.CILow, a.CIHigh = Wilson(a.Good, a.N)
	if a.N > 0 {
		a.Attainment = float64(a.Good) / float64(a.N)
	}
}

// Binding is the objective missed by the most successful requests (ties go
// to the earlier in canonical order), "" when none was missed.
func (a Attainment) Binding() string {
	best, n := "", 0
	for _, name := range ObjectiveNames {
		if a.Missed[name] > n {
			best, n = name, a.Missed[name]
		}
	}
	return best
}

// Verdict compares the attainment with the target α (SPEC §8): fewer than
// minRequests attempts, or an interval containing α in its inside, is
// unresolved; an interval wholly at or above α passes (every attainment it
// allows meets "at least α"); one wholly below α fails.
func (a Attainment) Verdict(alpha float64, minRequests int) string {
	switch {
	case a.N == 0 || a.N < minRequests:
		return VerdictUnresolved
	case a.CILow >= alpha:
		return VerdictPass
	case a.CIHigh < alpha:
		return VerdictFail
	}
	return VerdictUnresolved
}

// Wilson returns the 95 % Wilson score interval of k successes in n trials
// (z = WilsonZ), clamped to [0, 1]; [0, 1] for n = 0.
func Wilson(k, n int) (lo, hi float64) {
	if n <= 0 {
		return 0, 1
	}
	nf, z2 := float64(n), WilsonZ*WilsonZ
	p := float64(k) / nf
	denom := 1 + z2/nf
	center := (p + z2/(2*nf)) / denom
	half := WilsonZ / denom * math.Sqrt(p*(1-p)/nf+z2/(4*nf*nf))
	lo, hi = max(0, center-half), min(1, center+half)
	// At k = 0 and k = n the bounds are 0 and 1 exactly; rounding must
	// not move them.
	if k == 0 {
		lo = 0
	}
	if k == n {
		hi = 1
	}
	return lo, hi
}

// SLO is a rehearsal's objectives and attainment target, as results.json
// keeps them (its `slo` block).
type SLO struct {
	Objectives Objectives `json:"objectives"`
	// Expr is Objectives in the form --slo takes.
	Expr             string  `json:"expr"`
	AttainmentTarget float64 `json:"attainment_target"`
	// Interval names the interval every ci_low/ci_high is.
	Interval string `json:"interval"`
	// Definition says what good means, in words.
	Definition string `json:"definition"`
}

// SLOInterval and SLODefinition are written into results.json's slo block.
const (
	SLOInterval   = "Wilson score, 95 % (z = 1.96)"
	SLODefinition = "good = succeeded and every objective met (value <= limit); failures are misses; attainment = good / attempted; " +
		"tpot of a request with at most one output token and itl of a request with fewer than two chunks are met vacuously; " +
		"a successful request with no content misses ttft; request goodput = good / the wave's goodput window, token goodput = output tokens of good requests / the same"
)

// NewSLO returns the results.json block of objectives o and target alpha.
func NewSLO(o Objectives, alpha float64) *SLO {
	return &SLO{Objectives: o, Expr: o.String(), AttainmentTarget: alpha, Interval: SLOInterval, Definition: SLODefinition}
}

// SLOStanding is a population's standing against the rehearsal's
// objectives: an aggregate's pooled over its repeats (SLOAggregate), or
// its steady windows' (SteadySLO).
type SLOStanding struct {
	// N is the attempted requests, Good the good ones.
	N    int `json:"n"`
	Good int `json:"good"`
	// Attainment, CILow and CIHigh are null when N is 0.
	Attainment *float64 `json:"attainment"`
	CILow      *float64 `json:"ci_low"`
	CIHigh     *float64 `json:"ci_high"`
	// Verdict is against the attainment target (at least one request).
	Verdict string `json:"verdict"`
	// RequestGoodput is good requests ÷ each repeat's window, TokenGoodput
	// their output tokens ÷ the same: median [min–max].
	RequestGoodput Spread `json:"request_goodput_rps"`
	TokenGoodput   Spread `json:"token_goodput_tok_s"`
}

// standingOf is a's standing at target alpha, with the good-request and
// good-token rates of each repeat.
func standingOf(a Attainment, alpha float64, reqRate, tokRate []float64) SLOStanding {
	out := SLOStanding{N: a.N, Good: a.Good, Verdict: a.Verdict(alpha, 1),
		RequestGoodput: SpreadOf(reqRate), TokenGoodput: SpreadOf(tokRate)}
	if a.N > 0 {
		at, lo, hi := a.Attainment, a.CILow, a.CIHigh
		out.Attainment, out.CILow, out.CIHigh = &at, &lo, &hi
	}
	return out
}

// SLOAggregate is an aggregate's standing against the rehearsal's
// objectives (its `slo` field), pooled over its recorded repeats.
type SLOAggregate struct {
	SLOStanding
	// Missed counts, per objective set, the successful requests that
	// missed it; Failed the failed requests.
	Missed map[string]int `json:"missed"`
	Failed int            `json:"failed"`
	// BindingObjective is the objective missed most often among successful
	// requests, null when none was.
	BindingObjective *string `json:"binding_objective"`
}

// ApplySLO sets the slo field of every aggregate of aggs (as Aggregates
// returned them for waves and records) from slo; nil clears it.
func ApplySLO(aggs []Aggregate, waves []Wave, records []Record, slo *SLO) {
	if slo == nil {
		for i := range aggs {
			aggs[i].SLO = nil
			if aggs[i].Steady != nil {
				aggs[i].Steady.SLO = nil
			}
		}
		return
	}
	j := NewSLOJudge(waves, slo)
	for i := range records {
		j.Add(&records[i])
	}
	j.Apply(aggs)
}

// SLOJudge is ApplySLO over records handed to it one at a time (in any
// order), keeping counts only: per recorded wave its good requests, their
// output tokens and its clock, per population its attainment.
type SLOJudge struct {
	slo    *SLO
	groups map[Key][]*sloWave
	byID   map[int][]*sloWave
	pooled map[Key]*attainer
}

type sloWave struct {
	w            Wave
	key          Key
	clock        WaveClock
	good, tokens int
	// steady keeps each request of a sustained wave for the attainment
	// over its steady window (steadySLO).
	steady []sloRow
}

// sloRow is what the steady attainment keeps of one request.
type sloRow struct {
	startS     float64
	ok, good   bool
	goodTokens int
}

// NewSLOJudge starts the SLO figures of the recorded waves of waves.
func NewSLOJudge(waves []Wave, slo *SLO) *SLOJudge {
	j := &SLOJudge{slo: slo, groups: map[Key][]*sloWave{}, byID: map[int][]*sloWave{}, pooled: map[Key]*attainer{}}
	for _, w := range waves {
		if w.Kind != KindRecorded {
			continue
		}
		k := KeyOf(w)
		sw := &sloWave{w: w, key: k}
		j.groups[k] = append(j.groups[k], sw)
		j.byID[w.ID] = append(j.byID[w.ID], sw)
		if j.pooled[k] == nil {
			j.pooled[k] = newAttainer(slo.Objectives)
		}
	}
	return j
}

// Add judges one record.
func (j *SLOJudge) Add(r *Record) {
	if r.Kind != KindRecorded {
		return
	}
	for _, sw := range j.byID[r.Wave] {
		sw.clock.Add(r)
		good := j.pooled[sw.key].add(r).Good
		if good {
			sw.good++
			sw.tokens += r.OutputTokens
		}
		if sw.key.Mode == ModeSustained {
			row := sloRow{startS: r.StartS, ok: r.OK, good: good}
			if good {
				row.goodTokens = r.OutputTokens
			}
			sw.steady = append(sw.steady, row)
		}
	}
}

// Apply sets the slo field of every aggregate of aggs.
func (j *SLOJudge) Apply(aggs []Aggregate) {
	for i := range aggs {
		k := aggs[i].Key()
		ws := slices.Clone(j.groups[k])
		sort.SliceStable(ws, func(a, b int) bool { return ws[a].w.Repeat < ws[b].w.Repeat })
		s := j.sloAggregate(aggs[i].Mode, k, ws)
		aggs[i].SLO = &s
		if st := aggs[i].Steady; st != nil {
			st.SLO = j.steadySLO(st, ws, s.Verdict)
		}
	}
}

// steadySLO is the attainment over the requests of the steady windows of
// st (SteadySpan.Inside) of waves, judged as the aggregate's, and whether
// its verdict changes whole, the verdict over every measured request.
func (j *SLOJudge) steadySLO(st *Steady, waves []*sloWave, whole string) *SteadySLO {
	spans := map[int]SteadySpan{}
	for _, w := range st.Windows {
		if span, ok := w.Span(); ok {
			spans[w.Wave] = span
		}
	}
	t := newAttainer(j.slo.Objectives)
	var reqRate, tokRate []float64
	for _, sw := range waves {
		span, ok := spans[sw.w.ID]
		if !ok {
			continue
		}
		good, tokens := 0, 0
		for _, r := range sw.steady {
			if !span.Inside(r.startS) {
				continue
			}
			t.count(r.ok, r.good)
			if r.good {
				good++
				tokens += r.goodTokens
			}
		}
		if d := span.DurationS(); d > 0 {
			reqRate = append(reqRate, float64(good)/d)
			tokRate = append(tokRate, float64(tokens)/d)
		}
	}
	a := t.attainment()
	out := &SteadySLO{SLOStanding: standingOf(a, j.slo.AttainmentTarget, reqRate, tokRate)}
	out.ChangesVerdict = SteadyChangesVerdict(out.Verdict, whole)
	out.Warning = SteadyVerdictWarning(a, out.Verdict, whole)
	return out
}

func (j *SLOJudge) sloAggregate(mode string, k Key, waves []*sloWave) SLOAggregate {
	slo := j.slo
	var reqRate, tokRate []float64
	for _, sw := range waves {
		window := sw.clock.GoodputWindowS(mode)
		if window <= 0 {
			continue
		}
		reqRate = append(reqRate, float64(sw.good)/window)
		tokRate = append(tokRate, float64(sw.tokens)/window)
	}
	var a Attainment
	if t := j.pooled[k]; t != nil {
		a = t.attainment()
	} else {
		a = Attain(nil, slo.Objectives)
	}
	out := SLOAggregate{
		SLOStanding: standingOf(a, slo.AttainmentTarget, reqRate, tokRate),
		Missed:      map[string]int{}, Failed: a.Failed,
	}
	for _, n := range slo.Objectives.Names() {
		out.Missed[n] = a.Missed[n]
	}
	if b := a.Binding(); b != "" {
		out.BindingObjective = &b
	}
	return out
}
