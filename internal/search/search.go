package search

import (
	"fmt"
	"math"
	"sort"

	"github.com/rehearse/rehearse/internal/contract"
)

// Verdicts of a probe (SPEC §8), as package contract names them.
const (
	VerdictPass       = "pass"
	VerdictFail       = "fail"
	VerdictUnresolved = "unresolved"
	// VerdictScreened is a screen's verdict when it did not fail its load:
	// not a pass (a screen can only fail a load, SPEC §8).
	VerdictScreened = "screened"
)

// Stop reasons of a search.
const (
	// StopConverged: min_fail − max_pass ≤ max(1, 5 % of max_pass) with a
	// pass below and a resolved fail above.
	StopConverged = "converged"
	// StopUnmetAtMinimum: one client already fails the objectives.
	StopUnmetAtMinimum = "unmet_at_minimum"
	// StopCapReached: the bracket converged, but its min_fail is a point
	// whose interval stayed unresolved at its cap, after its retry too.
	StopCapReached = "cap_reached"
	// StopMaxConcurrency: Config.Max passes; the capacity is at least that.
	StopMaxConcurrency = "max_concurrency_reached"
	// StopServerFailed: a probe's outcome says the server failed (it exited
	// or stopped answering), so no later probe would mean anything.
	StopServerFailed = "server_failed"
	// StopInterrupted: the search has not finished (Result before Next
	// said it was over: a search cut midway, or a Replay of its probes).
	StopInterrupted = "interrupted"
)

// RetryScale is how many times its usual cap (max requests and duration)
// a retry of an unresolved probe measures for.
const RetryScale = 2

// Bracket is a capacity bracket: the largest load that passed and the
// smallest that failed (0: none).
type Bracket struct {
	MaxPass int `json:"max_pass"`
	MinFail int `json:"min_fail"`
}

// Config is one search. Alpha and MinRequests are the contract's; the
// search uses them only to refuse an Outcome whose verdict contradicts
// them (a pass below min_requests or with ci_low below α).
type Config struct {
	// Start is the first concurrency of the doubling (≥ 1).
	Start int
	// Max is the largest concurrency the search may probe (≥ Start).
	Max int
	// Alpha is the attainment target, in (0, 1).
	Alpha float64
	// MinRequests is the fewest measured requests of a resolved probe.
	MinRequests int
	// Repeats is how many times the final pass and fail points are re-run
	// after the bracket has converged (0: none).
	Repeats int
	// Predicted is a bracket predicted for the server (from its fitted
	// simulator profile): its ends are probed first. Nil: double from Start.
	Predicted *Bracket
	// Screen makes each probe of the doubling a screen (ScreenSize
	// requests, a fail or screened, never a pass) while no load has
	// failed; the largest screened load below the first fail is then
	// probed in full, and bisection goes on with full probes.
	Screen bool
	// Steer makes the search spend its probes where the answer is: the
	// doubling's screens are a round each (Spec.ScreenSize) and start
	// where a screen needs no more than SteerScreenRounds; once a load
	// has failed, the first probe goes where the margins (Outcome.Margin)
	// of the bracket's ends, a line between them, cross 1, and the
	// rest bisect (steer); a screened load, or a screen's fail, is
	// probed in full only when the bracket has converged on it; an
	// unresolved probe is not retried: it ends the bracket above,
	// unresolved.
	Steer bool
}

// Check reports the first thing wrong with c, naming the field.
func (c Config) Check() error {
	switch {
	case c.Start < 1:
		return fmt.Errorf("start %d: want at least 1", c.Start)
	case c.Max < c.Start:
		return fmt.Errorf("max concurrency %d is below the start %d", c.Max, c.Start)
	case !(c.Alpha > 0 && c.Alpha < 1):
		return fmt.Errorf("attainment target %v: want a number in (0, 1)", c.Alpha)
	case c.MinRequests < 1:
		return fmt.Errorf("min_requests %d: want at least 1", c.MinRequests)
	case c.Repeats < 0:
		return fmt.Errorf("repeats %d: want 0 or more", c.Repeats)
	}
	if p := c.Predicted; p != nil && (p.MaxPass < 0 || p.MinFail < 0 || (p.MinFail > 0 && p.MinFail <= p.MaxPass)) {
		return fmt.Errorf("predicted bracket [%d, %d]: want 0 ≤ max_pass < min_fail", p.MaxPass, p.MinFail)
	}
	return nil
}

// Outcome is what one probe measured, filled by the runner from package
// contract's attainment of the probe's recorded wave(s). The search reads
// Verdict (and ServerFailed); the rest it carries into Result for the
// report and results.json.
type Outcome struct {
	// WaveIDs are the recorded waves the probe ran (the runner's).
	WaveIDs []int
	// N is the requests of the verdict's population (Population), Good
	// those that met every objective.
	N, Good int
	// Attainment is Good ÷ N with its 95 % Wilson interval.
	Attainment, CILow, CIHigh float64
	// Verdict is VerdictPass, VerdictFail or VerdictUnresolved; a
	// screen's is VerdictFail or VerdictScreened.
	Verdict string
	// TTFTP95S and TPOTP95S are the probe's p95s in seconds (nil: none).
	TTFTP95S, TPOTP95S *float64
	// Failures is how many of the N requests failed.
	Failures int
	// AfterVerdict is the measured requests outside the verdict's
	// population: in flight at the look that resolved it (Population).
	// They are the probe's records too, and its rates count them.
	AfterVerdict int
	// AchievedRPS is requests per second over the measured window;
	// GoodputTokS the output tokens of good requests per second.
	AchievedRPS, GoodputTokS float64
	// Binding is the objective the most requests missed ("" when none did).
	Binding string
	// ServerFailed says the server failed during the probe: the search
	// stops with StopServerFailed.
	ServerFailed bool
	// Margin is the verdict population's contract.Margin (nil: no
	// records), what a steering search interpolates between the ends of
	// its bracket.
	Margin *float64
	// Steady is the probe's steady window and the attainment over it,
	// beside the verdict (which stays on every measured request); nil
	// for a probe without records and for a screen (MeasureScreen).
	Steady *contract.SteadyProbe
}

// Probe is one probe the search asks for, and once observed, its outcome.
type Probe struct {
	// Load is the concurrency C to probe.
	Load int
	// Repeat is 0 for a probe of the search, k ≥ 1 for the k-th re-run of
	// a final point.
	Repeat int
	// Retry marks the re-probe of a point whose first probe was
	// unresolved: it measures for RetryScale times the usual cap.
	Retry bool
	// Screen marks a screen of the doubling: it measures ScreenSize
	// requests, and its verdict is a fail or VerdictScreened.
	Screen bool
	// Outcome is the probe's outcome (zero until observed).
	Outcome Outcome
}

func (p Probe) same(q Probe) bool {
	return p.Load == q.Load && p.Repeat == q.Repeat && p.Retry == q.Retry && p.Screen == q.Screen
}

func (p Probe) String() string {
	s := fmt.Sprintf("%d clients", p.Load)
	if p.Load == 1 {
		s = "1 client"
	}
	switch {
	case p.Screen:
		s += " (screen)"
	case p.Retry:
		s += " (retry)"
	case p.Repeat > 0:
		s += fmt.Sprintf(" (repeat %d)", p.Repeat)
	}
	return s
}

// NonMonotonic is one non-monotonic answer: a probe passed at PassLoad
// although one failed at FailLoad ≤ PassLoad (equal loads: a re-run
// disagreeing with the first verdict at that point).
type NonMonotonic struct {
	PassLoad, FailLoad int
}

// Result is where a search stands, or its answer once it is over.
type Result struct {
	// MaxPass is the largest load that passed, MinFail the smallest that
	// failed or stayed unresolved (0: none).
	MaxPass, MinFail int
	// MinFailUnresolved says MinFail is an unresolved point, not a fail.
	MinFailUnresolved bool
	// StopReason is one of the Stop* constants.
	StopReason string
	// AchievedRPS and GoodputTokS are those of the probe that passed at
	// MaxPass (0 without one).
	AchievedRPS, GoodputTokS float64
	// BindingObjective is the Binding of the probe that decided MinFail.
	BindingObjective string
	// Predicted is Config.Predicted, kept beside the measured bracket.
	Predicted *Bracket
	// NonMonotonic lists every pass at or above a fail, by load.
	NonMonotonic []NonMonotonic
	// Probes are every observed probe, in the order they ran.
	Probes []Probe
}

// Search is one capacity search in progress. Its zero value is not
// usable: call New.
type Search struct {
	cfg    Config
	probes []Probe

	next  Probe // the probe Next hands out
	done  bool
	stop  string // the reason, once the bracket is final or the server failed
	queue []Probe

	lo, hi      int  // max pass, min fail (0: none)
	hiUnres     bool // hi is an unresolved point
	passAt      int  // index in probes of the search probe that passed at lo
	failAt      int  // index in probes of the search probe that decided hi
	predictions []int
	screened    []int // loads whose screen did not fail them, ascending

	// margins is the latest margin measured at each load by a probe of
	// the search (not a repeat), for Steer.
	margins map[int]float64
	// full counts the full probes of the search (not screens, retries or
	// repeats) since its doubling ended.
	full int
	// hiScreen says hi is a screen's fail.
	hiScreen bool
}

// New starts a search; its first probe is Next's.
func New(cfg Config) (*Search, error) {
	if err := cfg.Check(); err != nil {
		return nil, fmt.Errorf("capacity search: %w", err)
	}
	s := &Search{cfg: cfg, passAt: -1, failAt: -1, margins: map[int]float64{}}
	if p := cfg.Predicted; p != nil {
		for _, c := range []int{p.MaxPass, p.MinFail} {
			c = min(c, cfg.Max)
			if c >= 1 && !containsInt(s.predictions, c) {
				s.predictions = append(s.predictions, c)
			}
		}
	}
	s.advance()
	return s, nil
}

// Next returns the probe to run next, or false when the search is over.
// It returns the same probe until that probe is observed.
func (s *Search) Next() (Probe, bool) {
	if s.done {
		return Probe{}, false
	}
	return s.next, true
}

// Observe records the outcome of p, which must be the probe Next returned.
func (s *Search) Observe(p Probe, o Outcome) error {
	if s.done {
		return fmt.Errorf("capacity search: %v observed after the search stopped", p)
	}
	if !p.same(s.next) {
		return fmt.Errorf("capacity search: %v observed, but the search asked for %v", p, s.next)
	}
	if err := s.checkOutcome(p, o); err != nil {
		return err
	}
	p.Outcome = o
	s.probes = append(s.probes, p)
	if o.ServerFailed {
		s.stop, s.done = StopServerFailed, true
		return nil
	}
	if p.Repeat == 0 && o.Margin != nil {
		s.margins[p.Load] = *o.Margin
	}
	switch {
	case p.Screen && o.Verdict == VerdictScreened:
		s.screened = append(s.screened, p.Load)
	case p.Repeat == 0:
		if o.Verdict == VerdictUnresolved && !p.Retry && !s.cfg.Steer {
			s.next = Probe{Load: p.Load, Retry: true}
			return nil
		}
		s.bracket(p.Load, o.Verdict)
	}
	s.advance()
	return nil
}

func (s *Search) checkOutcome(p Probe, o Outcome) error {
	switch {
	case p.Screen && o.Verdict != VerdictFail && o.Verdict != VerdictScreened:
		return fmt.Errorf("capacity search: %v: verdict %q: a screen can only fail a load (fail or screened)", p, o.Verdict)
	case !p.Screen && o.Verdict == VerdictScreened:
		return fmt.Errorf("capacity search: %v: verdict %q, but the probe is not a screen", p, o.Verdict)
	}
	switch o.Verdict {
	case VerdictPass:
		if o.N < s.cfg.MinRequests || o.CILow < s.cfg.Alpha {
			return fmt.Errorf("capacity search: %v: a pass over %d requests with ci_low %v, against min_requests %d and α %v",
				p, o.N, o.CILow, s.cfg.MinRequests, s.cfg.Alpha)
		}
	case VerdictFail:
		if o.CIHigh > s.cfg.Alpha {
			return fmt.Errorf("capacity search: %v: a fail with ci_high %v above α %v", p, o.CIHigh, s.cfg.Alpha)
		}
	case VerdictUnresolved, VerdictScreened:
	default:
		return fmt.Errorf("capacity search: %v: verdict %q: want pass, fail or unresolved", p, o.Verdict)
	}
	return nil
}

// bracket moves the bracket by the final verdict of a search point.
func (s *Search) bracket(load int, verdict string) {
	last := len(s.probes) - 1
	screen := s.probes[last].Screen
	if !screen && s.hi > 0 {
		s.full++
	}
	if verdict == VerdictPass {
		if load > s.lo {
			s.lo, s.passAt = load, last
		}
		if s.cfg.Steer && s.hiScreen && load >= s.hi {
			// A full probe passed the load a screen failed: the
			// screen's round was the exception, and the doubling
			// goes on.
			s.hi, s.failAt, s.hiScreen = 0, -1, false
		}
		return
	}
	if s.hi == 0 || load < s.hi || (s.cfg.Steer && load == s.hi) {
		s.hi, s.failAt, s.hiUnres, s.hiScreen = load, last, verdict == VerdictUnresolved, screen
	}
}

// advance sets the next probe, or ends the search.
func (s *Search) advance() {
	if s.stop != "" {
		s.nextRepeat()
		return
	}
	for len(s.predictions) > 0 {
		c := s.predictions[0]
		s.predictions = s.predictions[1:]
		if c > s.lo && (s.hi == 0 || c < s.hi) {
			s.next = Probe{Load: c}
			return
		}
	}
	if s.cfg.Steer {
		s.advanceSteered()
		return
	}
	top := s.lo // the largest load passed or screened
	if n := len(s.screened); n > 0 {
		top = max(top, s.screened[n-1])
	}
	if c, ok := s.unconfirmed(); ok && (s.hi > 0 || c >= s.cfg.Max) {
		// A fail (or the maximum) ends the doubling: the search needs a
		// real pass below it, so the largest screened load is probed in
		// full.
		s.next = Probe{Load: c}
		return
	}
	switch {
	case s.hi == 0 && top >= s.cfg.Max:
		s.finish(StopMaxConcurrency)
	case s.hi == 0 && top == 0:
		s.next = Probe{Load: s.cfg.Start, Screen: s.screens(s.cfg.Start)}
	case s.hi == 0:
		c := min(2*top, s.cfg.Max)
		s.next = Probe{Load: c, Screen: s.screens(c)}
	case Converged(s.lo, s.hi):
		s.converged()
	default:
		s.next = Probe{Load: (s.lo + s.hi) / 2}
	}
}

// converged ends a search whose bracket has converged, with the reason
// its ends give.
func (s *Search) converged() {
	switch {
	case s.hiUnres:
		s.finish(StopCapReached)
	case s.lo == 0:
		s.finish(StopUnmetAtMinimum)
	default:
		s.finish(StopConverged)
	}
}

// advanceSteered is advance's bracket under Config.Steer: the doubling,
// from the first load worth a screen; then steer's probes between the
// largest load passed or screened (top) and the smallest failed; and a
// screened end probed in full once the bracket has converged on it.
func (s *Search) advanceSteered() {
	top := s.lo
	if c, ok := s.unconfirmed(); ok {
		top = c
	}
	switch {
	case s.hi == 0 && top >= s.cfg.Max:
		s.finish(StopMaxConcurrency)
	case s.hi == 0 && top == 0:
		c := s.cfg.Start
		for s.screens(c) && ScreenFloor > SteerScreenRounds*c && 2*c < s.cfg.Max {
			c *= 2
		}
		s.next = Probe{Load: c, Screen: s.screens(c)}
	case s.hi == 0:
		c := min(2*top, s.cfg.Max)
		s.next = Probe{Load: c, Screen: s.screens(c)}
	case Converged(top, s.hi) && top > s.lo:
		// The search needs a real pass at the bracket's lower end.
		s.next = Probe{Load: top}
	case Converged(top, s.hi) && s.hiScreen && s.lo > 0:
		// And a fail at its upper end that is more than one round's.
		s.next = Probe{Load: s.hi}
	case Converged(top, s.hi):
		s.converged()
	default:
		s.next = Probe{Load: s.steer(top)}
	}
}

// steer is the next load inside the bracket (top, hi). The search's first
// probe after its doubling goes where the line through the margins
// measured at the bracket's ends crosses 1, the level at which a load
// attains α (contract.Margin); every later one bisects. A batching
// server's margins are flat below its batch limit and jump above it, and
// a doubling in powers of two stops just below a limit that is one (a
// max_num_seqs of 64, 128, 256), where the line lands next to the jump;
// elsewhere a line through a jump misses the crossing, on the low side
// every time, which bisection does not (TestSteeredSearchCost counts
// both). The midpoint also where a margin is missing, infinite or on the
// wrong side of 1 (a verdict and its margin can disagree by a rounding,
// a screen's by its size).
func (s *Search) steer(top int) int {
	c := (top + s.hi) / 2
	qt, okt := s.margins[top]
	qh, okh := s.margins[s.hi]
	if s.full == 0 && top > 0 && okt && okh && qt < 1 && qh > 1 && !math.IsInf(qh, 1) {
		c = int(math.Round(float64(top) + float64(s.hi-top)*(1-qt)/(qh-qt)))
	}
	return min(max(c, top+1), s.hi-1)
}

// screens reports whether the doubling's probe at load c is a screen: with
// Config.Screen, below the maximum (a pass there ends the search, so a
// screen before it would only add its cost), and where a screen measures
// fewer requests than a full probe's first look (from LookUnit/LookRounds
// clients on it would measure as many, and a full probe can pass).
func (s *Search) screens(c int) bool {
	return s.cfg.Screen && c < s.cfg.Max && screenSize(s.cfg.Steer, s.cfg.MinRequests, c) < LookUnit(s.cfg.MinRequests, c)
}

// unconfirmed is the largest screened load inside the bracket (above
// max_pass, below min_fail), false when none is: a load the search has
// only screened, which a full probe must pass before it counts.
func (s *Search) unconfirmed() (int, bool) {
	for i := len(s.screened) - 1; i >= 0; i-- {
		if c := s.screened[i]; c > s.lo && (s.hi == 0 || c < s.hi) {
			return c, true
		}
	}
	return 0, false
}

// MinPass is the fewest requests whose 95 % Wilson interval can pass α:
// the least n with the interval of n good of n at or above α, which is
// n ≥ α·z²/(1 − α) (73 at α 0.95, 35 at 0.9, 381 at 0.99). A look at fewer
// can only fail a load. 0 for an α outside (0, 1).
func MinPass(alpha float64) int {
	if !(alpha > 0 && alpha < 1) {
		return 0
	}
	n := int(math.Ceil(alpha * contract.WilsonZ * contract.WilsonZ / (1 - alpha)))
	for n > 1 {
		if lo, _ := contract.Wilson(n-1, n-1); lo < alpha {
			break
		}
		n--
	}
	for {
		if lo, _ := contract.Wilson(n, n); lo >= alpha {
			return n
		}
		n++
	}
}

// Converged reports whether the bracket (maxPass, minFail) is narrow
// enough to stop: minFail − maxPass ≤ max(1, 5 % of maxPass).
func Converged(maxPass, minFail int) bool {
	return float64(minFail-maxPass) <= math.Max(1, 0.05*float64(maxPass))
}

// finish fixes the bracket's stop reason and queues the re-runs of its
// final points: per repeat, the pass point, then the fail point.
func (s *Search) finish(reason string) {
	s.stop = reason
	for r := 1; r <= s.cfg.Repeats; r++ {
		if s.lo > 0 {
			s.queue = append(s.queue, Probe{Load: s.lo, Repeat: r})
		}
		if s.hi > 0 {
			s.queue = append(s.queue, Probe{Load: s.hi, Repeat: r})
		}
	}
	s.nextRepeat()
}

func (s *Search) nextRepeat() {
	if len(s.queue) == 0 {
		s.done = true
		return
	}
	s.next, s.queue = s.queue[0], s.queue[1:]
}

// Observed is how many probes the search has observed.
func (s *Search) Observed() int { return len(s.probes) }

// Result returns where the search stands: its answer once Done, else the
// bracket so far with StopInterrupted.
func (s *Search) Result() Result {
	r := Result{
		MaxPass: s.lo, MinFail: s.hi, MinFailUnresolved: s.hiUnres,
		StopReason: s.stop, Probes: append([]Probe(nil), s.probes...),
		NonMonotonic: nonMonotonic(s.probes),
	}
	if !s.done {
		r.StopReason = StopInterrupted
	}
	if p := s.cfg.Predicted; p != nil {
		r.Predicted = &Bracket{MaxPass: p.MaxPass, MinFail: p.MinFail}
	}
	if s.passAt >= 0 {
		o := s.probes[s.passAt].Outcome
		r.AchievedRPS, r.GoodputTokS = o.AchievedRPS, o.GoodputTokS
	}
	if s.failAt >= 0 {
		r.BindingObjective = s.probes[s.failAt].Outcome.Binding
	}
	return r
}

// nonMonotonic returns every (pass, fail) pair of loads with a probe that
// passed at or above a load where one failed, sorted.
func nonMonotonic(probes []Probe) []NonMonotonic {
	var passes, fails []int
	for _, p := range probes {
		switch p.Outcome.Verdict {
		case VerdictPass:
			if !containsInt(passes, p.Load) {
				passes = append(passes, p.Load)
			}
		case VerdictFail:
			if !containsInt(fails, p.Load) {
				fails = append(fails, p.Load)
			}
		}
	}
	var out []NonMonotonic
	for _, pl := range passes {
		for _, fl := range fails {
			if pl >= fl {
				out = append(out, NonMonotonic{PassLoad: pl, FailLoad: fl})
			}
		}
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].FailLoad != out[b].FailLoad {
			return out[a].FailLoad < out[b].FailLoad
		}
		return out[a].PassLoad < out[b].PassLoad
	})
	return out
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// Replay runs the search of cfg over recorded probes, feeding each its
// recorded outcome, and returns the Result the search reached: the same as
// the live search's when the probes are its probes. It fails when a
// recorded probe is not the one the search asks for (a load, repeat or
// retry that differs, or a probe after the search stopped); a prefix of
// the probes (a search cut midway) gives StopInterrupted.
func Replay(cfg Config, probes []Probe) (Result, error) {
	s, err := New(cfg)
	if err != nil {
		return Result{}, err
	}
	for i, p := range probes {
		want, ok := s.Next()
		if !ok {
			return Result{}, fmt.Errorf("capacity search: probe %d (%v) was run after the search stopped (%s)", i+1, p, s.stop)
		}
		if !p.same(want) {
			return Result{}, fmt.Errorf("capacity search: probe %d is %v, but the search asks for %v", i+1, p, want)
		}
		if err := s.Observe(want, p.Outcome); err != nil {
			return Result{}, fmt.Errorf("probe %d: %w", i+1, err)
		}
	}
	return s.Result(), nil
}

// StopRule is a capacity probe's stop rule for drive's Until (SPEC §8):
// at a look point k of a probe at load clients (Look at LookUnit), once
// the first k requests sent have all ended, the probe ends if the verdict
// over those k is resolved; that verdict is the probe's (Population), and
// the requests still in flight land outside it. Which requests a look
// judges does not depend on how long any of them took, so the requests
// that end first (those that did not queue) cannot decide a probe.
func StopRule(slo contract.SLO, minRequests, load int) func(prefix []contract.Record) bool {
	unit := LookUnit(minRequests, load)
	return func(prefix []contract.Record) bool {
		return Look(len(prefix), unit) && resolved(prefix, slo, minRequests)
	}
}

// LookRounds is how many rounds of the closed loop (load requests each) a
// probe's first look waits for at least. The requests of one round share
// the server's batch and queue, so they are not the independent trials
// the Wilson interval assumes: at 66 clients, a verdict over the first 73
// requests sent (about one round) failed a load whose retry passed 566 of
// 584. Four rounds let the batch state change between the requests judged.
const LookRounds = 4

// LookUnit is the first look point of a probe at load clients:
// minRequests, or LookRounds rounds of the closed loop where that is more.
// The look points are LookUnit · 2^j.
func LookUnit(minRequests, load int) int {
	return max(minRequests, LookRounds*load)
}

func resolved(recs []contract.Record, slo contract.SLO, minRequests int) bool {
	return contract.Attain(recs, slo.Objectives).Verdict(slo.AttainmentTarget, minRequests) != VerdictUnresolved
}

// Look reports whether a probe that has measured n requests should look
// at its interval now: at n = unit · 2^k only (unit: LookUnit, or
// min_requests in bundles of the rule before it). Each look is one
// more chance of a wrong verdict where the attainment is close to α, so a
// probe looks a few times, not after every request (bench/capacity-search.md
// measures the difference). StopRule looks only there, and the runner
// asks it every LookUnit ended records (drive's UntilEvery).
func Look(n, minRequests int) bool {
	if minRequests < 1 || n < minRequests || n%minRequests != 0 {
		return false
	}
	k := n / minRequests
	return k&(k-1) == 0
}
