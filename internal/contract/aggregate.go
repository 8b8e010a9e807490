package contract

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"unicode"
)

// PercentileMethod names the percentile definition every aggregate uses; it
// is written into results.json.
const PercentileMethod = "linear interpolation between closest ranks (Hyndman-Fan type 7, NumPy default)"

// type7Names are names other tools give PercentileMethod, normalized as
// IsPercentileMethod normalizes: NumPy's and pandas' "linear", Python
// statistics' "inclusive", Excel's PERCENTILE.INC, R's type 7.
var type7Names = map[string]bool{
	"linear": true, "numpy linear": true, "numpy default": true,
	"linear interpolation": true, "linear interpolation between closest ranks": true,
	"inclusive": true, "percentile inc": true, "excel percentile inc": true,
	"r7": true, "r 7": true, "hf7": true, "hf 7": true, "h f 7": true,
}

// IsPercentileMethod reports whether name names the percentile method the
// contract uses (linear interpolation between closest ranks, Hyndman–Fan
// type 7) under any of its usual names: PercentileMethod, "linear",
// "type 7", "Hyndman-Fan type 7", "R-7", … Case, spaces and punctuation do
// not matter. A name of another method ("nearest", "lower", "type 6") is
// not: its figures would differ.
func IsPercentileMethod(name string) bool {
	words := strings.FieldsFunc(strings.ToLower(name), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	norm := strings.Join(words, " ")
	if type7Names[norm] {
		return true
	}
	// "type 7", "type7", "hyndman fan type 7", PercentileMethod itself: a
	// type 7 and no other type number.
	type7 := false
	for i, w := range words {
		switch {
		case w == "type7" || (w == "type" && i+1 < len(words) && words[i+1] == "7"):
			type7 = true
		case strings.HasPrefix(w, "type") && len(w) > 4, w == "type" && i+1 < len(words) && words[i+1] != "7":
			return false
		}
	}
	return type7
}

// MinTailSamples is the population size under which a p95 or p99 is flagged:
// with fewer samples the tail percentile is mostly the maximum.
const MinTailSamples = 20

// LatenessWarnS is the p99 client lateness (actual minus intended start)
// above which an open-loop aggregate warns that the load generator, not only
// the server, shaped the figures.
const LatenessWarnS = 0.010

// Spread is a per-repeat figure summarized as median [min–max].
type Spread struct {
	Median    *float64  `json:"median"`
	Min       *float64  `json:"min"`
	Max       *float64  `json:"max"`
	PerRepeat []float64 `json:"per_repeat"`
}

// Percentiles summarizes a pooled population; nil percentiles mean the
// population was empty.
type Percentiles struct {
	N   int      `json:"n"`
	P50 *float64 `json:"p50"`
	P90 *float64 `json:"p90"`
	P95 *float64 `json:"p95"`
	P99 *float64 `json:"p99"`
	// P95UB and P99UB are upper confidence bounds of P95 and P99 at
	// TailConfidence, order statistics of the population (UpperBoundRank);
	// nil where the population is too small to give one. P99MinN is the
	// smallest population that gives a P99UB (MinBoundN). All three are
	// absent from bundles written before them, and 0/nil in a summary
	// read from another tool.
	P95UB   *float64 `json:"p95_ub"`
	P99UB   *float64 `json:"p99_ub"`
	P99MinN int      `json:"p99_min_n,omitempty"`
}

// Failures counts failed attempts over all repeats.
type Failures struct {
	Count  int            `json:"count"`
	Total  int            `json:"total"`
	Rate   float64        `json:"rate"`
	ByKind map[string]int `json:"by_kind"`
}

// Aggregate is the contract's summary of one server at one concurrency (or,
// open loop, one request rate) over its recorded repeats.
type Aggregate struct {
	Server         string  `json:"server"`
	Mode           string  `json:"mode"`
	Concurrency    int     `json:"concurrency"`
	RequestRateRPS float64 `json:"request_rate_rps,omitempty"`
	// LoadShape names an open-loop load no single rate names (Key.Shape):
	// "ramp 1→20 req/s", "trace replay".
	LoadShape string `json:"load_shape,omitempty"`
	Repeats   int    `json:"repeats"`

	Goodput           Spread `json:"goodput_tok_s"`
	RequestThroughput Spread `json:"request_throughput_rps"`
	OutputTokens      int    `json:"output_tokens"`

	// ReasoningTokens is Σ reasoning_tokens of the ok records, and
	// ReasoningRate the same per repeat ÷ the goodput window, beside
	// goodput (which stays content output tokens); both absent when no
	// record of the population carries reasoning_tokens.
	ReasoningTokens *int    `json:"reasoning_tokens,omitempty"`
	ReasoningRate   *Spread `json:"reasoning_tok_s,omitempty"`

	TTFT Percentiles `json:"ttft_s"`
	// TTFTAny is the time to the first token of any channel, first_token_s
	// − start_s (first_content_s where a record has no first_token_s):
	// beside TTFT, which waits for content and so for a reasoning model's
	// whole reasoning phase.
	TTFTAny Percentiles `json:"ttft_any_s"`
	TPOT    Percentiles `json:"tpot_s"`
	ITL     Percentiles `json:"itl_s"`
	E2E     Percentiles `json:"e2e_s"`
	// Lateness is start_s − intended_start_s over every sent request of
	// open-loop waves: the load generator's own delay.
	Lateness *Percentiles `json:"lateness_s,omitempty"`
	// InputLength is the client-counted input_tokens of every recorded
	// attempt that carries one; OutputLength the output_tokens of the
	// successful ones (TrafficLengths): the traffic's shape beside its
	// latencies.
	InputLength  Lengths `json:"input_length_tok"`
	OutputLength Lengths `json:"output_length_tok"`

	Failures          Failures `json:"failures"`
	FailedWithContent int      `json:"failed_with_content"`
	SpeedupVsBaseline *float64 `json:"speedup_vs_baseline"`
	Warnings          []string `json:"warnings"`
	// SLO is the aggregate's standing against the rehearsal's objectives
	// (ApplySLO), absent when the rehearsal has none.
	SLO *SLOAggregate `json:"slo,omitempty"`
	// Steady is a sustained aggregate's figures over the steady windows
	// of its waves (steadyOf), beside those over every measured request;
	// absent in other modes.
	Steady *Steady `json:"steady,omitempty"`

	// GPUCount is the server's distinct GPUs where the rehearsal file
	// says them, and GoodputPerGPU the goodput of each repeat ÷ GPUCount;
	// both absent when the count is not known (ApplyReplicas).
	GPUCount      int     `json:"gpu_count,omitempty"`
	GoodputPerGPU *Spread `json:"goodput_per_gpu_tok_s,omitempty"`
	// ReplicaRequests counts the recorded attempts sent to each replica
	// (index = replica), absent when no record names a replica.
	ReplicaRequests []int `json:"replica_requests,omitempty"`
	// Models are the population's figures per model its records asked
	// for (Record.Model: LoRA adapters), by name; absent when no record
	// names one (ApplyApart).
	Models []ModelFigures `json:"models,omitempty"`
	// SideProbes are the side probes sent beside the population's waves,
	// never in its own figures; absent when none were (ApplyApart).
	SideProbes *SideProbeFigures `json:"side_probes,omitempty"`
	// UsageDisagreement is SPEC §2's per-record check of the re-counted
	// tokens against the server's usage; absent when no record carried
	// usage to compare (and in bundles written before it).
	UsageDisagreement *UsageDisagreement `json:"usage_disagreement,omitempty"`
}

// Key returns the population key of the aggregate, as KeyOf keys its
// waves: closed loop (the default) by concurrency, open loop by rate.
func (a Aggregate) Key() Key {
	return makeKey(a.Server, a.Mode, a.Concurrency, a.RequestRateRPS, a.LoadShape)
}

// LoadLabel names the aggregate's load: "64 clients" or "2.5 req/s".
func (a Aggregate) LoadLabel() string { return a.Key().LoadLabel() }

// Percentile returns the p-quantile (0 ≤ p ≤ 1) of sorted by linear
// interpolation between closest ranks (type 7), or nil for an empty slice.
func Percentile(sorted []float64, p float64) *float64 {
	n := len(sorted)
	if n == 0 {
		return nil
	}
	h := float64(n-1) * p
	lo := int(math.Floor(h))
	if lo >= n-1 {
		v := sorted[n-1]
		return &v
	}
	v := sorted[lo] + (h-float64(lo))*(sorted[lo+1]-sorted[lo])
	return &v
}

// Median returns the median of xs (the mean of the middle two for an even
// count), or nil when xs is empty. xs is not modified.
func Median(xs []float64) *float64 {
	s := sortedCopy(xs)
	return Percentile(s, 0.5)
}

// Summarize returns the percentiles of a population and the tail bounds
// of its p95 and p99. xs is not modified.
func Summarize(xs []float64) Percentiles {
	s := sortedCopy(xs)
	p := Percentiles{
		N:   len(s),
		P50: Percentile(s, 0.50),
		P90: Percentile(s, 0.90),
		P95: Percentile(s, 0.95),
		P99: Percentile(s, 0.99),
	}
	p.setBounds(func(rank int) float64 { return s[rank] })
	return p
}

// SpreadOf summarizes per-repeat values as median [min–max].
func SpreadOf(perRepeat []float64) Spread {
	sp := Spread{PerRepeat: perRepeat}
	if sp.PerRepeat == nil {
		sp.PerRepeat = []float64{}
	}
	if len(perRepeat) == 0 {
		return sp
	}
	s := sortedCopy(perRepeat)
	lo, hi := s[0], s[len(s)-1]
	sp.Median, sp.Min, sp.Max = Percentile(s, 0.5), &lo, &hi
	return sp
}

func sortedCopy(xs []float64) []float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s
}

// WaveClock accumulates a wave's times from its records handed to it one
// at a time (in any order): WallS, WindowS and ReleaseSpreadS are
// WaveWallS, WaveWindowS and WaveReleaseSpreadS of the records added.
type WaveClock struct {
	n              int
	maxEnd, lo, hi float64
	released       bool
	relLo, relHi   float64
}

// Add counts r among the wave's records.
func (c *WaveClock) Add(r *Record) {
	if c.n == 0 {
		c.lo, c.hi = r.StartS, r.EndS
	}
	c.n++
	if r.EndS > c.maxEnd {
		c.maxEnd = r.EndS
	}
	c.lo, c.hi = min(c.lo, r.StartS), max(c.hi, r.EndS)
	if r.Turn > 1 {
		// A session's later turns are sent when its last reply ended,
		// not at the release.
		return
	}
	if !c.released {
		c.relLo, c.relHi, c.released = r.StartS, r.StartS, true
	}
	c.relLo, c.relHi = min(c.relLo, r.StartS), max(c.relHi, r.StartS)
}

// WallS is WaveWallS of the records added.
func (c *WaveClock) WallS() float64 { return c.maxEnd }

// WindowS is WaveWindowS of the records added.
func (c *WaveClock) WindowS() float64 {
	if c.n == 0 {
		return 0
	}
	return c.hi - c.lo
}

// ReleaseSpreadS is WaveReleaseSpreadS of the records added.
func (c *WaveClock) ReleaseSpreadS() float64 { return c.relHi - c.relLo }

// GoodputWindowS is GoodputWindowS of the records added.
func (c *WaveClock) GoodputWindowS(mode string) float64 {
	if mode == ModeSustained {
		return c.WindowS()
	}
	return c.WallS()
}

func clockOf(records []Record) *WaveClock {
	var c WaveClock
	for i := range records {
		c.Add(&records[i])
	}
	return &c
}

// WaveWallS is a wave's wall time by the contract: the largest end_s among
// its records (the wave is released at 0), 0 for a wave with none.
func WaveWallS(records []Record) float64 { return clockOf(records).WallS() }

// WaveWindowS is a sustained wave's measured window by the contract: from
// its first send to its last end, the largest end_s minus the smallest
// start_s of its records, 0 for a wave with none. The wave is released at
// its first measured send, so the window differs from wall_s only by the
// instant between the release and that request's own start stamp. The
// requests of the warm-up are a separate wave and never in it.
func WaveWindowS(records []Record) float64 { return clockOf(records).WindowS() }

// GoodputWindowS is the time a wave's goodput and request throughput are
// divided by: the measured window (WaveWindowS) of a sustained wave, the
// wall time (WaveWallS, from the release at 0) of a closed or open one.
func GoodputWindowS(mode string, records []Record) float64 {
	return clockOf(records).GoodputWindowS(mode)
}

// WaveReleaseSpreadS is a closed wave's release spread by the contract: the
// last start_s of its records minus the first (of a session's records, its
// first turn's only), 0 for a wave with none.
func WaveReleaseSpreadS(records []Record) float64 { return clockOf(records).ReleaseSpreadS() }

// TTFT returns first_content_s − start_s, or false when no content arrived.
func (r Record) TTFT() (float64, bool) {
	if r.FirstContentS == nil {
		return 0, false
	}
	return *r.FirstContentS - r.StartS, true
}

// TTFTAny returns first_token_s − start_s, the time to the first generated
// text of any channel; a record without first_token_s (one of a bundle
// written before it) falls back on first_content_s. False when neither
// arrived.
func (r Record) TTFTAny() (float64, bool) {
	if r.FirstTokenS != nil {
		return *r.FirstTokenS - r.StartS, true
	}
	return r.TTFT()
}

// TPOT returns (end_s − first_content_s) ÷ (output_tokens − 1), defined for
// records with content and more than one output token.
func (r Record) TPOT() (float64, bool) {
	if r.FirstContentS == nil || r.OutputTokens <= 1 {
		return 0, false
	}
	return (r.EndS - *r.FirstContentS) / float64(r.OutputTokens-1), true
}

// Latencies are latency populations pooled as the contract pools them:
// successful records only (a failure never enters one), TTFT and TPOT
// where defined, ITL from consecutive chunk times, E2E from every one.
type Latencies struct {
	TTFT, TPOT, ITL, E2E []float64
	// TTFTAny is the time to the first token of any channel.
	TTFTAny []float64
}

// Add pools r's samples; a failed record adds none.
func (l *Latencies) Add(r Record) {
	if !r.OK {
		return
	}
	if v, ok := r.TTFT(); ok {
		l.TTFT = append(l.TTFT, v)
	}
	if v, ok := r.TTFTAny(); ok {
		l.TTFTAny = append(l.TTFTAny, v)
	}
	if v, ok := r.TPOT(); ok {
		l.TPOT = append(l.TPOT, v)
	}
	for i := 1; i < len(r.ChunkTimesS); i++ {
		l.ITL = append(l.ITL, r.ChunkTimesS[i]-r.ChunkTimesS[i-1])
	}
	l.E2E = append(l.E2E, r.EndS-r.StartS)
}

// PooledLatencies returns the populations behind the aggregate of key k:
// the successful records of its recorded waves, pooled over repeats.
func PooledLatencies(waves []Wave, records []Record, k Key) Latencies {
	var l Latencies
	EachPooled(waves, records, k, l.Add)
	return l
}

// EachPooled calls add with every recorded record behind the aggregate of
// key k: the records of its recorded waves, over every repeat.
func EachPooled(waves []Wave, records []Record, k Key, add func(Record)) {
	ids := map[int]bool{}
	for _, w := range waves {
		if w.Kind == KindRecorded && KeyOf(w) == k {
			ids[w.ID] = true
		}
	}
	for _, r := range records {
		if r.Kind == KindRecorded && ids[r.Wave] {
			add(r)
		}
	}
}

// Aggregates computes every aggregate of the recorded waves. Aggregates come
// in the order of servers (servers not named there follow, sorted), then
// closed, sustained, open, then by concurrency or rate.
//
// Goodput of a wave is Σ output_tokens of its ok records ÷ its goodput
// window (GoodputWindowS): the wall time of a closed or open wave; for a
// sustained wave the measured window, from its first measured send to its
// last measured end (its warm-up requests are a wave of kind warmup, never
// counted). Request throughput is the ok records ÷ the same window.
// Latencies are pooled over the ok records of all repeats in every mode;
// so are output lengths, and input lengths over every attempt with a
// client count (TrafficLengths); the re-counted tokens are held against the
// server's usage over every attempt that carries it (UsageDisagreement).
// baseline names the speed-up denominator ("" for none).
func Aggregates(waves []Wave, records []Record, servers []string, baseline string) []Aggregate {
	g := NewAggregator(waves, servers, baseline)
	for {
		for i := range records {
			g.Add(&records[i])
		}
		if !g.Next() {
			break
		}
	}
	return g.Aggregates()
}

// Aggregator computes Aggregates from records handed to it one at a time,
// without holding them: what it keeps is what the exact figures need, one
// float64 per request for each per-request population (TTFT, TPOT, E2E,
// lengths, lateness) and, for the ITL (a population of every
// inter-chunk gap, two orders of magnitude larger), the counts of an exact
// selection (selector) that finds the order statistics its percentiles
// read. The figures are those of sorting every pooled value: the same
// values, the same arithmetic.
//
// Use: Add every record (any order, records of other kinds or waves are
// ignored), then Next; while Next reports true, Add the same records again
// (only their chunk times are read) and call Next again; then Aggregates.
// Aggregates is the in-memory form of that loop.
type Aggregator struct {
	servers  []string
	baseline string
	keys     []Key
	groups   map[Key]*keyAgg
	byID     map[int][]*waveAgg
	pass     int
	// itlBudget is what the ITL selections may still hold (selectBudget).
	itlBudget int
}

// keyAgg is the state of one aggregate.
type keyAgg struct {
	k                 Key
	waves             []*waveAgg
	failures          Failures
	failedWithContent int
	reasoning         bool
	late              []float64
	usage             UsageDisagreement
	lat               Latencies // ITL unused: itl holds it
	lengths           TrafficLengths
	itl               *selector
}

// waveAgg is the state of one recorded wave.
type waveAgg struct {
	w                       Wave
	key                     *keyAgg
	clock                   WaveClock
	tokens, oks, reasonToks int
	// steady keeps each record of a sustained wave for its steady
	// window (steadyOf).
	steady []steadyRow
}

// NewAggregator starts the aggregates of the recorded waves of waves;
// servers and baseline are Aggregates'.
func NewAggregator(waves []Wave, servers []string, baseline string) *Aggregator {
	g := &Aggregator{servers: servers, baseline: baseline, groups: map[Key]*keyAgg{}, byID: map[int][]*waveAgg{}, itlBudget: selectBudget}
	for _, w := range waves {
		if w.Kind != KindRecorded {
			continue
		}
		k := KeyOf(w)
		ka, ok := g.groups[k]
		if !ok {
			ka = &keyAgg{k: k, failures: Failures{ByKind: map[string]int{}}, itl: newSelector()}
			ka.itl.budget = &g.itlBudget
			g.groups[k] = ka
			g.keys = append(g.keys, k)
		}
		wa := &waveAgg{w: w, key: ka}
		ka.waves = append(ka.waves, wa)
		g.byID[w.ID] = append(g.byID[w.ID], wa)
	}
	return g
}

// Add hands the aggregator one record of the current pass.
func (g *Aggregator) Add(r *Record) {
	if r.Kind != KindRecorded {
		return
	}
	for _, wa := range g.byID[r.Wave] {
		if g.pass == 0 {
			wa.add(r)
		}
		if itl := wa.key.itl; r.OK && (g.pass == 0 || len(itl.nodes) > 0) {
			itl.addGaps(r.ChunkTimesS)
		}
	}
}

// Next ends a pass over the records and reports whether the ITL selection
// needs them once more.
func (g *Aggregator) Next() bool {
	more := false
	for _, k := range g.keys {
		ka := g.groups[k]
		if (g.pass == 0 || len(ka.itl.nodes) > 0) && ka.itl.next(summaryRanks) {
			more = true
		}
	}
	g.pass++
	return more
}

func (wa *waveAgg) add(r *Record) {
	wa.clock.Add(r)
	a := wa.key
	if a.k.Mode == ModeSustained {
		wa.steady = append(wa.steady, newSteadyRow(r))
	}
	a.failures.Total++
	a.usage.Add(r)
	if r.ReasoningTokens != nil {
		a.reasoning = true
	}
	a.lengths.Add(*r)
	if a.k.Mode == ModeOpen {
		a.late = append(a.late, r.StartS-r.IntendedStartS)
	}
	if !r.OK {
		a.failures.Count++
		a.failures.ByKind[r.ErrorKind]++
		if r.FirstContentS != nil {
			a.failedWithContent++
		}
		return
	}
	wa.oks++
	wa.tokens += r.OutputTokens
	if r.ReasoningTokens != nil {
		wa.reasonToks += *r.ReasoningTokens
	}
	if v, ok := r.TTFT(); ok {
		a.lat.TTFT = append(a.lat.TTFT, v)
	}
	if v, ok := r.TTFTAny(); ok {
		a.lat.TTFTAny = append(a.lat.TTFTAny, v)
	}
	if v, ok := r.TPOT(); ok {
		a.lat.TPOT = append(a.lat.TPOT, v)
	}
	a.lat.E2E = append(a.lat.E2E, r.EndS-r.StartS)
}

// window is GoodputWindowS of the wave's records.
func (wa *waveAgg) window() float64 { return wa.clock.GoodputWindowS(wa.key.k.Mode) }

// Aggregates returns the aggregates, in Aggregates' order, once Next has
// reported false.
func (g *Aggregator) Aggregates() []Aggregate {
	keys := slices.Clone(g.keys)
	rank := map[string]int{}
	for i, s := range g.servers {
		if _, ok := rank[s]; !ok {
			rank[s] = i
		}
	}
	sort.SliceStable(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		ra, oka := rank[a.Server]
		rb, okb := rank[b.Server]
		switch {
		case oka != okb:
			return oka
		case oka && ra != rb:
			return ra < rb
		case !oka && a.Server != b.Server:
			return a.Server < b.Server
		case a.Mode != b.Mode:
			return modeRank[a.Mode] < modeRank[b.Mode]
		case a.Concurrency != b.Concurrency:
			return a.Concurrency < b.Concurrency
		case (a.Shape == "") != (b.Shape == ""):
			return a.Shape == "" // constant rates first, then ramps and replays
		case a.RequestRateRPS != b.RequestRateRPS:
			return a.RequestRateRPS < b.RequestRateRPS
		default:
			return a.Shape < b.Shape
		}
	})
	out := make([]Aggregate, 0, len(keys))
	for _, k := range keys {
		out = append(out, g.groups[k].aggregate())
	}
	applySpeedup(out, g.baseline)
	return out
}

// modeRank orders aggregates of one server by mode.
var modeRank = map[string]int{ModeClosed: 0, ModeSustained: 1, ModeOpen: 2}

// aggregate is the Aggregate of ka once its passes are done: the repeats'
// rates, the pooled latencies and lengths, and what it warns of.
func (ka *keyAgg) aggregate() Aggregate {
	k := ka.k
	waves := slices.Clone(ka.waves)
	sort.SliceStable(waves, func(i, j int) bool { return waves[i].w.Repeat < waves[j].w.Repeat })
	a := Aggregate{
		Server: k.Server, Mode: k.Mode, Concurrency: k.Concurrency, RequestRateRPS: k.RequestRateRPS, LoadShape: k.Shape,
		Repeats:           len(waves),
		Failures:          ka.failures,
		FailedWithContent: ka.failedWithContent,
		Warnings:          []string{},
	}
	a.Failures.ByKind = maps.Clone(ka.failures.ByKind)
	var goodput, reqRate, reasoningRate []float64
	successes, reasoningTotal := 0, 0
	for _, wa := range waves {
		wall := wa.window()
		successes += wa.oks
		a.OutputTokens += wa.tokens
		reasoningTotal += wa.reasonToks
		if wall > 0 {
			goodput = append(goodput, float64(wa.tokens)/wall)
			reqRate = append(reqRate, float64(wa.oks)/wall)
			reasoningRate = append(reasoningRate, float64(wa.reasonToks)/wall)
		}
		a.Warnings = append(a.Warnings, wa.warnings(wall)...)
	}
	if a.Failures.Total > 0 {
		a.Failures.Rate = float64(a.Failures.Count) / float64(a.Failures.Total)
	}
	a.Goodput = SpreadOf(goodput)
	a.RequestThroughput = SpreadOf(reqRate)
	lat := &ka.lat
	a.TTFT, a.TPOT, a.ITL, a.E2E = Summarize(lat.TTFT), Summarize(lat.TPOT), ka.itl.summary(), Summarize(lat.E2E)
	a.TTFTAny = Summarize(lat.TTFTAny)
	if ka.reasoning {
		rr := SpreadOf(reasoningRate)
		a.ReasoningTokens, a.ReasoningRate = &reasoningTotal, &rr
	}
	a.InputLength, a.OutputLength = SummarizeLengths(ka.lengths.Input), SummarizeLengths(ka.lengths.Output)
	if k.Mode == ModeOpen {
		l := Summarize(ka.late)
		a.Lateness = &l
		if l.P99 != nil && *l.P99 > LatenessWarnS {
			a.Warnings = append(a.Warnings, fmt.Sprintf("client lateness p99 %.0f ms: the load generator sent late; arrivals were not the schedule's", *l.P99*1000))
		}
	}
	a.Warnings = append(a.Warnings, sampleWarnings(&a, successes)...)
	a.Warnings = append(a.Warnings, failureWarnings(&a)...)
	if ka.usage.Compared > 0 {
		u := ka.usage
		a.UsageDisagreement = &u
	}
	if k.Mode == ModeSustained {
		a.Steady = steadyOf(waves, k.Concurrency)
	}
	return a
}

// warnings are what the aggregate says of this repeat, whose goodput
// window is wall: no window (left out of goodput), a cold wave, an early
// stop, requests that waited for a slot or were never sent.
func (wa *waveAgg) warnings(wall float64) []string {
	w := wa.w
	var out []string
	if wall <= 0 {
		out = append(out, fmt.Sprintf("repeat %d: wave has no records with a positive end time; left out of goodput", w.Repeat))
	}
	if w.Cold {
		g := 0.0
		if wall > 0 {
			g = float64(wa.tokens) / wall
		}
		out = append(out, fmt.Sprintf("repeat %d is a cold wave (no warm-up before it): %.1f tok/s", w.Repeat, g))
	}
	if w.Stopped != "" {
		out = append(out, fmt.Sprintf("repeat %d stopped early: %s", w.Repeat, w.Stopped))
	}
	if w.Waited > 0 {
		out = append(out, fmt.Sprintf("repeat %d: %d requests waited for a free slot under max_concurrency %d", w.Repeat, w.Waited, w.MaxConcurrency))
	}
	if w.NotSent > 0 {
		out = append(out, fmt.Sprintf("repeat %d: %d scheduled requests were never sent", w.Repeat, w.NotSent))
	}
	return out
}

// sampleWarnings are a's warnings on its latency samples, of successes
// successful requests: none at all, or a tail (p95, p99) drawn from fewer
// than MinTailSamples.
func sampleWarnings(a *Aggregate, successes int) []string {
	if successes == 0 {
		return []string{fmt.Sprintf("no successful request in %d attempts: every latency is null", a.Failures.Total)}
	}
	var small []string
	n := 0
	for _, p := range []struct {
		name string
		n    int
	}{{"TTFT", a.TTFT.N}, {"TPOT", a.TPOT.N}, {"E2E", a.E2E.N}} {
		if p.n > 0 && p.n < MinTailSamples {
			small = append(small, p.name)
			n = max(n, p.n)
		}
	}
	if len(small) == 0 {
		return nil
	}
	return []string{fmt.Sprintf("p95/p99 of %s from %d or fewer samples (< %d): the tail is close to the maximum", strings.Join(small, ", "), n, MinTailSamples)}
}

// failureWarnings are a's warnings on its failures: those that had
// received content, and those of the load generator's own.
func failureWarnings(a *Aggregate) []string {
	var out []string
	if a.FailedWithContent > 0 {
		out = append(out, fmt.Sprintf("%d failed requests had received content before failing (kept out of every latency)", a.FailedWithContent))
	}
	if n := a.Failures.ByKind[ErrClient]; n > 0 {
		out = append(out, fmt.Sprintf("%d failures were the load generator's own (client), not the server's: the client ran out of descriptors or ports, or could not build the request", n))
	}
	return out
}

func applySpeedup(aggs []Aggregate, baseline string) {
	if baseline == "" {
		return
	}
	base := map[Key]*float64{}
	for _, a := range aggs {
		if a.Server == baseline {
			k := a.Key()
			k.Server = ""
			base[k] = a.Goodput.Median
		}
	}
	for i := range aggs {
		a := &aggs[i]
		if a.Server == baseline || a.Goodput.Median == nil {
			continue
		}
		k := a.Key()
		k.Server = ""
		b, ok := base[k]
		if !ok || b == nil || *b == 0 {
			continue
		}
		s := *a.Goodput.Median / *b
		a.SpeedupVsBaseline = &s
	}
}
