package drive

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
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
	Load
	Kind        string // default contract.KindRecorded
	Concurrency int
	Repeat      int
	// Cold flags the first recorded wave of a series that had no warm-up.
	Cold bool
	// NumRequests is the measured requests (0: bounded by Duration only).
	NumRequests int
	// Duration bounds the measured part: no measured request is sent at or
	// after its release + Duration; those in flight then finish (0: bounded
	// by NumRequests only).
	Duration time.Duration
	// WarmupRequests are sent first by the same clients and recorded as a
	// wave of kind warmup of their own.
	WarmupRequests int
	// Until, when set, may end the measured part before its bounds: it is
	// called with the measured records ended so far, in the order they
	// ended, each time UntilEvery more of them have ended (0: each time one
	// has), never two calls at once; once it returns true no more measured
	// requests are sent and those in flight finish. NumRequests and
	// Duration stay the part's cap. It must not keep or change the slice.
	// A capacity probe's "min_requests and a resolved interval" is one.
	Until func(records []contract.Record) bool
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
	if err := s.validate(); err != nil {
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
	wave  contract.Wave
	rel   *release
	total int // requests it will send; -1 when bounded by duration only
	quiet bool
	cpu0  time.Duration
	// stalls is the part's stall watch, from its release to its end.
	stalls *stallWatch

	mu      sync.Mutex
	sent    int
	indexed []indexedRecord
	tl      tally

	// until ends the part early (SustainedSpec.Until); ended holds the
	// records in end order for it, untilMu keeps its calls one at a time,
	// and met is set once it returned true.
	until   func([]contract.Record) bool
	every   int
	ended   []contract.Record
	untilMu sync.Mutex
	met     atomic.Bool
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

// releasePart journals the part at its release and lets its records go.
func (d *Driver) releasePart(p *sustainedPart, at time.Time) {
	p.cpu0 = cpuTime()
	p.stalls = d.watchStalls()
	p.wave.StartedAt = anchor(at)
	if err := d.journalWave(p.wave); err != nil {
		p.tl.mu.Lock()
		p.tl.journalErr = err
		p.tl.mu.Unlock()
	}
	if !p.quiet {
		d.progress(Event{Kind: WaveReleased, Wave: p.wave, Total: p.total})
	}
	p.rel.publish(p.wave, at)
}

// settlePart records request i of the run, sent by client to part p,
// once the part is released, and returns its record (tag: the session's
// turn it is, if any).
func (d *Driver) settlePart(p *sustainedPart, i, client, prompt int, res stream.Result, tag turnTag) contract.Record {
	<-p.rel.done
	r := d.record(p.rel.wave, p.rel.at, client, prompt, 0, res)
	p.rel.scrub(&r)
	p.rel.stamp(&r)
	tag.apply(&r)
	p.mu.Lock()
	p.indexed = append(p.indexed, indexedRecord{i, r})
	var ended []contract.Record
	if p.until != nil && !p.met.Load() {
		p.ended = append(p.ended, r)
		if len(p.ended)%p.every == 0 {
			// Records below len(p.ended) are never written again, so the
			// predicate reads them outside the lock.
			ended = p.ended[:len(p.ended):len(p.ended)]
		}
	}
	p.mu.Unlock()
	if ended != nil {
		p.untilMu.Lock()
		if !p.met.Load() && p.until(ended) {
			p.met.Store(true)
		}
		p.untilMu.Unlock()
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
	w.ClientCPUS = (cpuTime() - p.cpu0).Seconds()
	w.ClientStalls = p.stalls.end()
	w.WallS = contract.WaveWallS(recs)
	w.Stopped = stopped(ctx)
	if ctx.Err() != nil && planned > 0 {
		w.NotSent = planned - len(recs)
	}
	d.count(w)
	p.tl.mu.Lock()
	journalErr := p.tl.journalErr
	done, failed := p.tl.done, p.tl.failed
	p.tl.mu.Unlock()
	if err := d.journalWave(w); err != nil && journalErr == nil {
		journalErr = err
	}
	if !p.quiet {
		d.progress(Event{Kind: WaveEnded, Wave: w, Done: done, Failed: failed, Total: p.total, Elapsed: time.Since(p.rel.at)})
	}
	return WaveResult{Wave: w, Release: p.rel.at, Records: recs, UntilMet: p.met.Load()}, waveError(ctx, w, journalErr)
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
	requests := len(spec.Prompts) // bounded by duration only: any prompt may be sent
	if spec.NumRequests > 0 {
		requests = spec.WarmupRequests + spec.NumRequests
	}
	ss, err := d.newSessionRunner(t, spec.Load)
	if err != nil {
		return WaveResult{}, fmt.Errorf("%s: %w", t.Name, err)
	}
	var prepared *replicaSet
	if ss == nil {
		if prepared, err = d.prepareReplicas(t, spec.Load, requests); err != nil {
			return WaveResult{}, fmt.Errorf("%s: %w", t.Name, err)
		}
		if spec.NumRequests == 0 {
			// Bound by duration: how many requests the run has is
			// known only when it ended, from this worker's picks.
			prepared.planned = 0
		}
		defer d.advance(t, prepared)
	}
	if err := ctx.Err(); err != nil {
		return WaveResult{}, fmt.Errorf("%s: sustained wave not released: %w", t.Name, context.Cause(ctx))
	}
	c, warmN, n := spec.Concurrency, spec.WarmupRequests, spec.NumRequests
	clients := spec.units(c)
	// This worker's requests of the run: k, k+step, ... from first.
	first, step := 0, 1
	if seg := spec.Segment; !seg.Whole() {
		first, step = seg.Index, seg.Count
	}
	owned := func(lo, hi int) int { // this worker's requests in [lo, hi)
		return len(plan.Share(spec.Segment, hi)) - len(plan.Share(spec.Segment, lo))
	}
	// A server that refuses connections is not an error of the wave: its
	// requests fail as connect and are recorded.
	if len(clients) > 0 {
		d.warm(ctx, t, len(clients))
	}
	defer d.client.Drop()
	if err := ctx.Err(); err != nil {
		return WaveResult{}, fmt.Errorf("%s: sustained wave not released: %w", t.Name, context.Cause(ctx))
	}

	base := contract.Wave{Server: t.Name, Concurrency: c, Repeat: spec.Repeat, Mode: contract.ModeSustained}
	var warm *sustainedPart
	if warmN > 0 {
		ww := base
		ww.ID, ww.Kind = d.NextWaveID(), contract.KindWarmup
		warm = &sustainedPart{wave: ww, rel: newRelease(), total: owned(0, warmN), quiet: true}
		warm.rel.load, warm.rel.worker, warm.rel.secrets = spec.Load, spec.worker(), t.Secrets
	}
	mw := base
	mw.ID, mw.Kind, mw.Cold, mw.Probe = d.NextWaveID(), spec.Kind, spec.Cold, spec.Probe
	total := owned(warmN, warmN+n)
	if n == 0 {
		total = -1
	}
	meas := &sustainedPart{wave: mw, rel: newRelease(), total: total, until: spec.Until, every: max(1, spec.UntilEvery)}
	meas.rel.load, meas.rel.worker, meas.rel.secrets = spec.Load, spec.worker(), t.Secrets

	var (
		mu         sync.Mutex
		next       = first
		measured   bool
		measuredAt time.Time
		releasing  sync.WaitGroup
		running    sync.WaitGroup
		settling   sync.WaitGroup
		warmEnded  sync.WaitGroup
	)
	// take hands out the next request: its index and part, or false when
	// the run is over (bounded or canceled). The first measured request
	// releases the measured wave.
	take := func() (int, *sustainedPart, bool) {
		mu.Lock()
		defer mu.Unlock()
		if ctx.Err() != nil {
			return 0, nil, false
		}
		i := next
		switch {
		case i < warmN:
			next += step
			warm.sent++
			return i, warm, true
		case n > 0 && i >= warmN+n:
			return 0, nil, false
		case !measured:
			measured = true
			measuredAt = time.Now()
			if warm == nil && !spec.ReleaseAt.IsZero() {
				// No warm-up: the measured part is released at the
				// instant the workers agreed on.
				measuredAt = spec.ReleaseAt
				spec.stampWave(&meas.wave, time.Now())
			}
			releasing.Add(1)
			go func(at time.Time) {
				defer releasing.Done()
				d.releasePart(meas, at)
			}(measuredAt)
		case spec.Duration > 0 && time.Since(measuredAt) >= spec.Duration:
			return 0, nil, false
		case meas.met.Load():
			return 0, nil, false
		}
		next += step
		meas.sent++
		return i, meas, true
	}

	// A split plan's workers agree on the release now that their
	// connections are dialed, and start their clients at that instant.
	start, err := spec.arm(ctx)
	if err != nil {
		return WaveResult{}, fmt.Errorf("%s: sustained wave %w", t.Name, err)
	}
	if warm != nil {
		warmEnded.Add(warm.total)
		spec.stampWave(&warm.wave, time.Now())
		d.releasePart(warm, start)
	}
	warmFinished := make(chan struct{})
	var warmRes WaveResult
	var warmErr error
	go func() {
		defer close(warmFinished)
		if warm == nil {
			return
		}
		// The warm-up wave ends when its last request has: the measured
		// part runs on meanwhile.
		warmEnded.Wait()
		warmRes, warmErr = d.finishPart(ctx, warm, warm.total)
	}()

	running.Add(len(clients))
	// The clients start a group at a time, the responses that came
	// meanwhile read between (stream.Barrier), as a closed wave's.
	gates := stream.NewBarrier(len(clients))
	for k, client := range clients {
		go func() {
			defer running.Done()
			<-gates.Gate(k)
			if ss != nil {
				// The client runs sessions back to back, each turn
				// taking the run's next request.
				turn := func(tag turnTag, prompt int, pr *stream.Prepared, _ time.Duration) (contract.Record, bool) {
					i, p, ok := take()
					if !ok {
						return contract.Record{}, false
					}
					r := d.settlePart(p, i, client, prompt, d.client.Send(ctx, pr), tag)
					if p == warm {
						warmEnded.Done()
					}
					return r, true
				}
				for ctx.Err() == nil && ss.run(ctx, first+step*int(ss.runs.Add(1)-1), turn) {
				}
				return
			}
			for {
				i, p, ok := take()
				if !ok {
					return
				}
				prompt := workload.PromptIndex(i, prepared.prompts())
				rep := prepared.pick(i)
				res := d.client.Send(ctx, prepared.get(rep, prompt))
				prepared.done(rep)
				// The record is made, re-counted and journaled beside
				// the loop, not in it: the client sends its next request
				// at once, so a slow journal write or a wait for the
				// measured release never leaves a slot empty.
				settling.Add(1)
				go func() {
					defer settling.Done()
					d.settlePart(p, i, client, prompt, res, turnTag{replica: replicaTag(rep)})
					if p == warm {
						warmEnded.Done()
					}
				}()
			}
		}()
	}
	go gates.Open()
	running.Wait()
	releasing.Wait()
	settling.Wait()
	if warm != nil {
		// Warm-up requests never sent (the run was canceled) end the
		// warm-up too.
		warmEnded.Add(-(warm.total - warm.sent))
	}
	<-warmFinished

	var out WaveResult
	var err2 error
	if meas.sent > 0 {
		out, err2 = d.finishPart(ctx, meas, max(total, 0))
	} else if err2 = ctx.Err(); err2 != nil {
		err2 = fmt.Errorf("%s: sustained wave not released: %w", t.Name, context.Cause(ctx))
	}
	if warm != nil {
		out.Warmup = &warmRes
		if err2 == nil {
			err2 = warmErr
		}
	}
	return out, err2
}
