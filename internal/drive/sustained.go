package drive

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/plan"
	"github.com/rehearse/rehearse/internal/stream"
	"github.com/rehearse/rehearse/internal/workload"
)

// SustainedSpec is one sustained closed-loop wave: Concurrency clients,
// each sending its next request as soon as its last one ended, first
// WarmupRequests requests of warm-up, then the measured requests, bounded by
// NumRequests, Duration, or both (whichever ends first).
type SustainedSpec struct {
	plan.Load
	Kind        string // default contract.KindRecorded
	Concurrency int
	Repeat      int
	// Cold flags the first recorded wave of a series that had no warm-up.
	Cold bool
	// NumRequests is the measured requests (0: bounded by Duration only).
	NumRequests int
	// Duration bounds the measured part: once one of its requests has
	// ended at or after its release + Duration, no more are sent; those in
	// flight then finish (0: bounded by NumRequests only). A client whose
	// last request ended before it sends one more, so the wave's records
	// show the bound was reached (a request that ended past it).
	Duration time.Duration
	// WarmupRequests are sent first by the same clients and recorded as a
	// wave of kind warmup of their own.
	WarmupRequests int
	// Until, when set, may end the measured part before its bounds: it is
	// called with the first k measured records in send order, each time
	// the first k requests sent have all ended, for k = UntilEvery · j
	// (UntilEvery 0: every k) in increasing order, never two calls at once
	// and never during a measured send; once it returns true no more
	// measured requests are sent and those in flight finish, measured but
	// outside the k (the wave's Look then says k and the ended and sent
	// counts). Each measured record then carries its place in the send
	// order (Record.Request). Which records a call sees does not depend on
	// how long any of them took. NumRequests and Duration stay the part's
	// cap. It must not keep or change the slice. A capacity probe's stop
	// rule is one (search.StopRule).
	Until func(prefix []contract.Record) bool
	// UntilEvery is how many measured records end between calls of Until.
	UntilEvery int
	// Probe is the capacity probe kind the measured wave records.
	Probe string
	// Share, on a split plan, runs this worker's clients (client j for
	// j mod N = i) and its requests of the run (request k, counted over
	// the warm-up and the measured part, for k mod N = i, sending prompt
	// k as in the whole plan; sessions likewise by run), from the agreed
	// release. Duration bounds each worker's measured part from its own
	// release.
	Share
}

func (s SustainedSpec) check() error {
	if err := s.Validate(); err != nil {
		return err
	}
	switch {
	case s.Concurrency <= 0:
		return fmt.Errorf("concurrency %d: want at least 1", s.Concurrency)
	case s.NumRequests < 0 || s.Duration < 0 || s.WarmupRequests < 0 || s.UntilEvery < 0:
		return fmt.Errorf("num_requests %d, duration %v, warmup_requests %d, until every %d: want non-negative bounds", s.NumRequests, s.Duration, s.WarmupRequests, s.UntilEvery)
	case s.NumRequests == 0 && s.Duration == 0:
		return fmt.Errorf("sustained wave of %d clients is unbounded: set num_requests, duration, or both", s.Concurrency)
	}
	switch s.Kind {
	case contract.KindRecorded, contract.KindWarmup:
	default:
		return fmt.Errorf("kind %q: want recorded or warmup", s.Kind)
	}
	return nil
}

// sustainedPart is one of a sustained run's two waves, the warm-up or the
// measured part: its release, its records as they end, and its counts.
type sustainedPart struct {
	// waveRun is the part's wave: its total is -1 when a duration alone
	// bounds the part, and a warm-up's is quiet.
	*waveRun

	mu      sync.Mutex
	indexed []indexedRecord

	// until ends the part early (SustainedSpec.Until). bySent holds the
	// records at their place in the send order, landed which have ended,
	// prefix how many from the first have all ended, and landedN how many
	// have ended in all (under mu). gate makes a look (a call of until) and
	// a send exclusive: sent, looked, met and look are its.
	until   func([]contract.Record) bool
	every   int
	bySent  []contract.Record
	landed  []bool
	prefix  int
	landedN int
	gate    sync.Mutex
	sent    int
	looked  int // the largest k looked at
	met     bool
	look    *contract.Look
	// endedBy is why the part stopped sending (contract.Ended*), set once
	// under the run's take lock.
	endedBy string
}

// admit counts one more request sent to the part and returns its place in
// the send order, unless a look has ended it: no request is sent after the
// look that decided to stop.
func (p *sustainedPart) admit() (int, bool) {
	p.gate.Lock()
	defer p.gate.Unlock()
	if p.met {
		return 0, false
	}
	p.sent++
	return p.sent - 1, true
}

// sentCount is how many requests were sent to the part.
func (p *sustainedPart) sentCount() int {
	p.gate.Lock()
	defer p.gate.Unlock()
	return p.sent
}

// land puts record r, sent at place j, among the part's records in send
// order, and reports whether the first requests sent that have all ended
// now reach a look.
func (p *sustainedPart) land(j int, r contract.Record) bool {
	if j >= len(p.bySent) {
		n := max(j+1, 2*len(p.bySent))
		p.bySent = append(p.bySent, make([]contract.Record, n-len(p.bySent))...)
		p.landed = append(p.landed, make([]bool, n-len(p.landed))...)
	}
	p.bySent[j], p.landed[j] = r, true
	p.landedN++
	before := p.prefix
	for p.prefix < len(p.landed) && p.landed[p.prefix] {
		p.prefix++
	}
	return p.prefix/p.every > before/p.every
}

// lookAt calls until, with sends held off, at each look k (a multiple of
// every) not looked at yet whose first k requests sent have all ended, in
// increasing k, and ends the part at the first that says so. The records
// below prefix are never written again (those above may be, on another
// backing array after a growth), so until reads them outside mu.
func (p *sustainedPart) lookAt() {
	p.gate.Lock()
	defer p.gate.Unlock()
	for !p.met {
		p.mu.Lock()
		k := p.looked + p.every
		if k > p.prefix {
			p.mu.Unlock()
			return
		}
		recs, ended := p.bySent[:k:k], p.landedN
		p.mu.Unlock()
		p.looked = k
		if p.until(recs) {
			p.met = true
			p.look = &contract.Look{Prefix: k, Ended: ended, Sent: p.sent}
		}
	}
}

// closedLoop hands out a sustained run's requests, one at a time, to the
// clients that ask as their last request ended: the warm-up's, then the
// measured part's until a bound or a look ends it.
type closedLoop struct {
	ctx            context.Context
	spec           *SustainedSpec
	warm, meas     *sustainedPart // warm is nil without a warm-up
	warmN, n, step int
	release        func(at time.Time) // releases the measured part
	mu             sync.Mutex
	next           int
	measured       bool
	measuredAt     time.Time
	pastDuration   bool
}

// lastEnd is what a client knows of its last request: whether it was a
// measured one, and when it ended (res.End).
type lastEnd struct {
	measured bool
	at       time.Time
}

// sendSlot is a request handed out: its index in the run, its part, and
// its place in that part's send order.
type sendSlot struct {
	i, j int
	p    *sustainedPart
}

// take hands out the next request, or false when the run is over
// (bounded, ended by a look, or canceled). The first measured request
// releases the measured part. last is the asking client's last request
// (zero for its first).
func (s *closedLoop) take(last lastEnd) (sendSlot, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx.Err() != nil {
		return sendSlot{}, s.end(contract.EndedCanceled)
	}
	i := s.next
	switch {
	case i < s.warmN:
		s.next += s.step
		s.warm.sent++
		return sendSlot{i: i, j: s.warm.sent - 1, p: s.warm}, true
	case s.n > 0 && i >= s.warmN+s.n:
		return sendSlot{}, s.end(contract.EndedNumRequests)
	case !s.measured:
		s.measured = true
		s.measuredAt = time.Now()
		if s.warm == nil && !s.spec.ReleaseAt.IsZero() {
			// No warm-up: the measured part is released at the
			// instant the workers agreed on.
			s.measuredAt = s.spec.ReleaseAt
			s.spec.stampWave(&s.meas.w, time.Now())
		}
		s.release(s.measuredAt)
	case s.pastDuration || s.spec.Duration > 0 && last.measured && last.at.Sub(s.measuredAt) >= s.spec.Duration:
		// A measured request ended at or after the duration (its
		// record's end_s says so, from the same instants).
		s.pastDuration = true
		return sendSlot{}, s.end(contract.EndedDuration)
	}
	j, ok := s.meas.admit()
	if !ok {
		return sendSlot{}, s.end(contract.EndedUntil)
	}
	s.next += s.step
	return sendSlot{i: i, j: j, p: s.meas}, true
}

// end records why the measured part stopped sending, the first time, and
// returns false.
func (s *closedLoop) end(reason string) bool {
	if s.meas.endedBy == "" {
		s.meas.endedBy = reason
	}
	return false
}

type indexedRecord struct {
	i int
	r contract.Record
}

// records returns the part's records in send order.
func (p *sustainedPart) records() []contract.Record {
	p.mu.Lock()
	defer p.mu.Unlock()
	sort.Slice(p.indexed, func(a, b int) bool { return p.indexed[a].i < p.indexed[b].i })
	out := make([]contract.Record, len(p.indexed))
	for k, ir := range p.indexed {
		out[k] = ir.r
	}
	return out
}

// release starts the part's watch and publishes it, released at at.
func (p *sustainedPart) release(at time.Time) {
	p.watch()
	p.publish(at)
}

// settlePart records request slot of the run, sent by client, once its
// part is released, and returns its record (tag: the session's turn it
// is, if any). Each record carries the request's place in its part's send
// order; a part with a stop rule looks once the requests sent before it
// have ended.
func (d *Driver) settlePart(slot sendSlot, client, prompt int, res stream.Result, tag turnTag) contract.Record {
	p := slot.p
	<-p.rel.done
	r := d.record(p.rel.wave, p.rel.at, client, prompt, 0, res)
	p.rel.scrub(&r)
	p.rel.stamp(&r)
	tag.apply(&r)
	j := slot.j
	r.Request = &j
	p.mu.Lock()
	p.indexed = append(p.indexed, indexedRecord{slot.i, r})
	look := p.until != nil && p.land(slot.j, r)
	p.mu.Unlock()
	if look {
		p.lookAt()
	}
	if !p.quiet {
		d.ended(p.rel.wave, p.rel.at, p.total, &p.tl, r)
		return r
	}
	err := d.journalRecord(r)
	p.tl.mu.Lock()
	p.tl.done++
	if !r.OK {
		p.tl.failed++
	}
	if err != nil && p.tl.journalErr == nil {
		p.tl.journalErr = err
	}
	p.tl.mu.Unlock()
	return r
}

// finishPart journals the part at its end and returns its result.
func (d *Driver) finishPart(ctx context.Context, p *sustainedPart, planned int) (WaveResult, error) {
	recs := p.records()
	w := p.rel.wave
	p.stampEnd(ctx, &w, recs)
	if ctx.Err() != nil && planned > 0 {
		w.NotSent = planned - len(recs)
	}
	p.gate.Lock()
	met := p.met
	w.EndedBy = p.endedBy
	if w.EndedBy == contract.EndedUntil {
		w.Look = p.look
	}
	p.gate.Unlock()
	res, err := p.finish(ctx, w, recs)
	res.UntilMet = met
	return res, err
}

// SustainedWave runs one sustained closed-loop wave: Concurrency clients on
// pre-dialed connections, each sending its next request as soon as its
// last one ended, so that exactly Concurrency requests are in flight while
// requests remain. Request i (counted over the warm-up and the measured
// part together) sends the prompt at workload.PromptIndex(i, len(Prompts)).
//
// The first WarmupRequests requests are a wave of kind warmup (mode
// sustained), released at the first send and journaled quietly (no
// progress events); the measured requests are the wave of spec.Kind,
// released at the first measured send, bounded by NumRequests and/or
// Duration from that release (and ended sooner when Until says so:
// WaveResult.UntilMet). Each wave is journaled at its release and at its
// end, each record as its request ends, in a goroutine of its own: a client
// sends its next request as soon as its last one ended, never after that
// record's re-count, journal write or progress event. The WaveResult is the
// measured wave, its Warmup the warm-up's (nil without one). When ctx is
// canceled the requests in flight end as canceled, no more are sent, and
// both waves are journaled as stopped.
func (d *Driver) SustainedWave(ctx context.Context, t Target, spec SustainedSpec) (WaveResult, error) {
	if spec.Kind == "" {
		spec.Kind = contract.KindRecorded
	}
	if err := spec.check(); err != nil {
		return WaveResult{}, fmt.Errorf("%s: sustained wave: %w", t.Name, err)
	}
	s, err := d.sustainedSends(t, spec)
	if err != nil {
		return WaveResult{}, err
	}
	defer s.close()
	clients := spec.units(spec.Concurrency)
	if err := s.dial(ctx, len(clients)); err != nil {
		return WaveResult{}, err
	}
	// This worker's requests of the run: k, k+step, ... from first.
	first, step := 0, 1
	if seg := spec.Segment; !seg.Whole() {
		first, step = seg.Index, seg.Count
	}

	warm, meas := d.sustainedParts(t, &spec)
	var releasing, settling, warmEnded sync.WaitGroup
	snd := &closedLoop{ctx: ctx, spec: &spec, warm: warm, meas: meas, warmN: spec.WarmupRequests, n: spec.NumRequests, next: first, step: step}
	snd.release = func(at time.Time) {
		releasing.Add(1)
		go func() {
			defer releasing.Done()
			meas.release(at)
		}()
	}
	// A split plan's workers agree on the release now that their
	// connections are dialed, and start their clients at that instant.
	start, err := s.arm(ctx, &spec.Share)
	if err != nil {
		return WaveResult{}, err
	}
	warmup := d.runWarmup(ctx, &spec, warm, start, &warmEnded)
	sc := &sustainedClients{d: d, ctx: ctx, snd: snd, ss: s.ss, prepared: s.prepared, warm: warm, meas: meas,
		warmEnded: &warmEnded, settling: &settling, first: first, step: step}
	sc.runAll(clients)
	releasing.Wait()
	settling.Wait()
	warmRes, warmErr := warmup()

	var out WaveResult
	var err2 error
	if meas.sentCount() > 0 {
		out, err2 = d.finishPart(ctx, meas, max(meas.total, 0))
	} else {
		err2 = s.notReleased(ctx)
	}
	if warm != nil {
		out.Warmup = warmRes
		if err2 == nil {
			err2 = warmErr
		}
	}
	return out, err2
}

// sustainedSends is what a sustained wave sends: its sessions, or the
// prompts of its requests (bounded by duration only, any prompt may be
// sent).
func (d *Driver) sustainedSends(t Target, spec SustainedSpec) (*waveSends, error) {
	s := &waveSends{d: d, t: t, mode: "sustained"}
	var err error
	if s.ss, err = d.newSessionRunner(t, spec.Load); err != nil {
		return nil, fmt.Errorf("%s: %w", t.Name, err)
	}
	if s.ss != nil {
		return s, nil
	}
	requests := len(spec.Prompts)
	if spec.NumRequests > 0 {
		requests = spec.WarmupRequests + spec.NumRequests
	}
	if s.prepared, err = d.prepareReplicas(t, spec.Load, requests); err != nil {
		return nil, fmt.Errorf("%s: %w", t.Name, err)
	}
	if spec.NumRequests == 0 {
		// Bound by duration: how many requests the run has is
		// known only when it ended, from this worker's picks.
		s.prepared.planned = 0
	}
	return s, nil
}

// runWarmup releases the warm-up part, if there is one, at start, and
// finishes it beside the measured part once its last request has ended
// (ended). The func it returns, called once the clients are done, counts
// the warm-up requests never sent (the run was canceled) as ended too and
// returns the warm-up's result (nil without a warm-up).
func (d *Driver) runWarmup(ctx context.Context, spec *SustainedSpec, warm *sustainedPart, start time.Time, ended *sync.WaitGroup) func() (*WaveResult, error) {
	if warm == nil {
		return func() (*WaveResult, error) { return nil, nil }
	}
	ended.Add(warm.total)
	spec.stampWave(&warm.w, time.Now())
	warm.release(start)
	finished := make(chan struct{})
	var res WaveResult
	var err error
	go func() {
		defer close(finished)
		// The warm-up wave ends when its last request has: the measured
		// part runs on meanwhile.
		ended.Wait()
		res, err = d.finishPart(ctx, warm, warm.total)
	}()
	return func() (*WaveResult, error) {
		ended.Add(-(warm.total - warm.sent))
		<-finished
		return &res, err
	}
}

// sustainedParts are a sustained wave's warm-up part (nil without one)
// and measured part, of this worker's requests of each (the measured
// part's unknown, -1, when a duration alone bounds the run).
func (d *Driver) sustainedParts(t Target, spec *SustainedSpec) (warm, meas *sustainedPart) {
	warmN, n := spec.WarmupRequests, spec.NumRequests
	owned := func(lo, hi int) int { // this worker's requests in [lo, hi)
		return len(plan.Share(spec.Segment, hi)) - len(plan.Share(spec.Segment, lo))
	}
	base := contract.Wave{Server: t.Name, Concurrency: spec.Concurrency, Repeat: spec.Repeat, Mode: contract.ModeSustained}
	if warmN > 0 {
		ww := base
		ww.ID, ww.Kind = d.NextWaveID(), contract.KindWarmup
		warm = &sustainedPart{waveRun: d.newWaveRun(t, spec.Share, spec.Load, ww, owned(0, warmN))}
		warm.quiet = true
	}
	mw := base
	mw.ID, mw.Kind, mw.Cold, mw.Probe = d.NextWaveID(), spec.Kind, spec.Cold, spec.Probe
	measN := -1
	if n > 0 {
		measN = owned(warmN, warmN+n)
	}
	meas = &sustainedPart{waveRun: d.newWaveRun(t, spec.Share, spec.Load, mw, measN), until: spec.Until, every: max(1, spec.UntilEvery)}
	return warm, meas
}

// sustainedClients is what a sustained wave's clients share: the run's
// request hand-out, its prompts (or sessions), its parts, and the waits
// for their records.
type sustainedClients struct {
	d        *Driver
	ctx      context.Context
	snd      *closedLoop
	ss       *sessionRunner // nil unless the wave runs sessions
	prepared *replicaSet    // nil when it does
	warm     *sustainedPart // nil without a warm-up
	meas     *sustainedPart
	// warmEnded waits for the warm-up's records, settling for the
	// records being made beside the loop.
	warmEnded, settling *sync.WaitGroup
	// first and step are this worker's requests of the run: first,
	// first+step, ...
	first, step int
}

// runAll runs the clients, started a group at a time, the responses that
// came meanwhile read between (stream.Barrier), as a closed wave's, and
// returns when each has ended its loop.
func (sc *sustainedClients) runAll(clients []int) {
	var running sync.WaitGroup
	running.Add(len(clients))
	gates := stream.NewBarrier(len(clients))
	for k, client := range clients {
		go func() {
			defer running.Done()
			<-gates.Gate(k)
			sc.run(client)
		}()
	}
	go gates.Open()
	running.Wait()
}

// run is client's loop: it takes the run's next request as soon as its
// last one ended, until the run is over.
func (sc *sustainedClients) run(client int) {
	d, ctx, warm, meas := sc.d, sc.ctx, sc.warm, sc.meas
	var last lastEnd
	if sc.ss != nil {
		// The client runs sessions back to back, each turn taking the
		// run's next request.
		turn := func(tag turnTag, prompt int, pr *stream.Prepared, _ time.Duration) (contract.Record, bool) {
			slot, ok := sc.snd.take(last)
			if !ok {
				return contract.Record{}, false
			}
			res := d.client.Send(ctx, pr)
			last = lastEnd{measured: slot.p == meas, at: res.End}
			r := d.settlePart(slot, client, prompt, res, tag)
			if slot.p == warm {
				sc.warmEnded.Done()
			}
			return r, true
		}
		for ctx.Err() == nil && sc.ss.run(ctx, sc.first+sc.step*int(sc.ss.runs.Add(1)-1), turn) {
		}
		return
	}
	for {
		slot, ok := sc.snd.take(last)
		if !ok {
			return
		}
		prompt := workload.PromptIndex(slot.i, sc.prepared.prompts())
		rep := sc.prepared.pick(slot.i)
		res := d.client.Send(ctx, sc.prepared.get(rep, prompt))
		last = lastEnd{measured: slot.p == meas, at: res.End}
		sc.prepared.done(rep)
		// The record is made, re-counted and journaled beside the loop,
		// not in it: the client sends its next request at once, so a slow
		// journal write or a wait for the measured release never leaves a
		// slot empty.
		sc.settling.Add(1)
		go func() {
			defer sc.settling.Done()
			d.settlePart(slot, client, prompt, res, turnTag{replica: replicaTag(rep)})
			if slot.p == warm {
				sc.warmEnded.Done()
			}
		}()
	}
}
