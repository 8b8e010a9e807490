package drive

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/plan"
	"github.com/rehearse/rehearse/internal/stream"
	"github.com/rehearse/rehearse/internal/workload"
)

// armLead is how long before its intended time an open-loop request takes
// its connection and is buffered, so that its send is one write on time.
const armLead = 2 * time.Millisecond

// MaxOpenRequests bounds the requests of one open-loop wave, so that a
// duration-bound schedule at an absurd rate is refused rather than
// allocated.
const MaxOpenRequests = 10_000_000

// OpenSpec is one open-loop wave: requests sent on an arrival schedule,
// bounded by NumRequests, Duration, or both (whichever ends first).
type OpenSpec struct {
	plan.Load
	Kind           string // default contract.KindRecorded
	Repeat         int
	RequestRateRPS float64
	Arrival        string // workload.ArrivalFixed, ArrivalPoisson, ArrivalGamma
	Burstiness     float64
	Seed           int64
	NumRequests    int
	Duration       time.Duration
	// MaxConcurrency caps the requests in flight (0: no cap). A request
	// that finds the cap full waits for a slot; it is counted in the wave's
	// waited, and its lateness shows the wait.
	MaxConcurrency int
	// Ramp, when set, moves the rate from its start to its end rate over
	// Duration (or, without one, over the time NumRequests are expected
	// to take); RequestRateRPS is then unused.
	Ramp *contract.Ramp
	// Pacing is "" for rehearse's schedules, workload.PacingVLLM for vllm
	// bench serve's.
	Pacing string
	// Share, on a split plan, sends this worker's requests only (request
	// k of the schedule, at its planned offset, for k mod N = i), with its
	// part of MaxConcurrency (plan.ShareCap), from the agreed release.
	Share
}

// Offsets returns the intended send offsets of the wave's requests: the
// schedule's (a constant rate's or the ramp's), or, arrival trace, the
// load's traced arrivals; up to NumRequests and strictly before Duration
// (workload.OpenOffsets, which the simulator's predictions call too).
func (s OpenSpec) Offsets() ([]time.Duration, error) {
	return workload.OpenOffsets(workload.OpenLoad{
		RateRPS: s.RequestRateRPS, Arrival: s.Arrival, Burstiness: s.Burstiness, Seed: s.Seed,
		NumRequests: s.NumRequests, Duration: s.Duration, Ramp: s.Ramp,
		Arrivals: s.Load.Arrivals, Prompts: len(s.Load.Prompts), MaxRequests: MaxOpenRequests, Pacing: s.Pacing,
	})
}

// OpenWave runs one open-loop wave: request i is sent at release +
// offset(i), records its intended and actual start, and the dispatcher
// never waits for a response before the next send. With a concurrency cap
// a request waits for a free slot and is counted. When ctx is canceled the
// requests not yet sent are counted as not_sent, those in flight end as
// canceled, and the wave is journaled as stopped.
func (d *Driver) OpenWave(ctx context.Context, t Target, spec OpenSpec) (WaveResult, error) {
	if spec.Kind == "" {
		spec.Kind = contract.KindRecorded
	}
	if err := spec.Validate(); err != nil {
		return WaveResult{}, fmt.Errorf("%s: open wave: %w", t.Name, err)
	}
	if spec.MaxConcurrency < 0 {
		return WaveResult{}, fmt.Errorf("%s: open wave: max_concurrency %d: want 0 (no cap) or more", t.Name, spec.MaxConcurrency)
	}
	offsets, err := spec.Offsets()
	if err != nil {
		return WaveResult{}, fmt.Errorf("%s: open wave: %w", t.Name, err)
	}
	mine := spec.units(len(offsets))
	s, err := d.newSends(t, "open", spec.Load, len(offsets), mine)
	if err != nil {
		return WaveResult{}, err
	}
	defer s.close()
	o := &openRun{s: s, spec: spec, offsets: offsets, mine: mine}
	limit := plan.ShareCap(spec.Segment, spec.MaxConcurrency)
	warm := min(len(mine), openWarm)
	if limit > 0 {
		warm = min(len(mine), limit)
		o.slots = make(chan struct{}, limit)
	}
	if err := s.dial(ctx, warm); err != nil {
		return WaveResult{}, err
	}
	return o.run(ctx)
}

// openRun is one open wave past its preparation: what its dispatcher and
// its requests share.
type openRun struct {
	// waveRun is the wave from its release (set by run).
	*waveRun
	s    *waveSends
	spec OpenSpec
	// offsets are every arrival's offset from the release; mine the
	// arrivals of this segment, in order.
	offsets []time.Duration
	mine    []int
	// slots holds a token per request in flight under a concurrency cap
	// (nil: none).
	slots chan struct{}

	records []contract.Record
	ended   sync.WaitGroup
}

// run releases the wave, dispatches its arrivals and ends it.
func (o *openRun) run(ctx context.Context) (WaveResult, error) {
	t, spec := o.s.t, o.spec
	o.waveRun = o.s.d.newWaveRun(t, spec.Share, spec.Load, contract.Wave{
		ID: o.s.d.NextWaveID(), Server: t.Name, Concurrency: spec.MaxConcurrency, Repeat: spec.Repeat,
		Kind: spec.Kind, Mode: contract.ModeOpen,
		RequestRateRPS: spec.RequestRateRPS, Arrival: spec.Arrival, Burstiness: spec.Burstiness,
		Seed: spec.Seed, MaxConcurrency: spec.MaxConcurrency, Ramp: spec.Ramp,
	}, o.s.total)
	o.records = make([]contract.Record, len(o.mine))
	// A split plan's workers agree on the release now that their
	// connections are dialed, and start their schedules at that instant:
	// request k goes at that instant + offset(k) on every
	// worker's clock.
	release, err := o.s.arm(ctx, &spec.Share)
	if err != nil {
		return WaveResult{}, err
	}
	o.watch()
	spec.stampWave(&o.w, time.Now())
	// The requests see the wave as released; the dispatcher goes on
	// counting in w.
	o.publish(release)

	sent := o.dispatch(ctx, release)
	o.ended.Wait()
	records := o.records[:sent]
	w := o.w
	w.NotSent = len(o.mine) - sent
	if o.s.ss != nil {
		records = o.s.ss.records()
		w.NotSent = o.total - len(records)
	}
	o.stampEnd(ctx, &w, records)
	return o.finish(ctx, w, records)
}

// dispatch sends the segment's arrivals at their times from release until
// the last or ctx ends, and returns how many it sent.
func (o *openRun) dispatch(ctx context.Context, release time.Time) int {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	sleepUntil := func(at time.Time) bool {
		if wait := time.Until(at); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
				return true
			case <-ctx.Done():
				return false
			}
		}
		return ctx.Err() == nil
	}
	// Arrivals due at once (a burst, a trace's simultaneous requests, a
	// dispatcher running late) go ReleaseGroup at a time, and the
	// dispatcher waits for the scheduler's next network poll between, so
	// a response that came meanwhile is read then, not after the whole run
	// of writes: as a closed wave's release (stream.Barrier).
	poll := stream.NewPollWait()
	defer poll.Close()
	sent, due := 0, 0
	for slot, i := range o.mine {
		off := o.offsets[i]
		// Arm the request armLead before its time: it takes its
		// connection and is buffered on it, so at its time only the
		// write is left.
		if !sleepUntil(release.Add(off-armLead)) || !o.takeSlot(ctx) {
			break
		}
		sent++
		o.ended.Add(1)
		gate := make(chan struct{})
		go o.send(ctx, slot, i, off, gate)
		// Canceled here, the armed request ends as canceled.
		if time.Until(release.Add(off)) > 0 {
			due = 0
		} else {
			due++
		}
		sleepUntil(release.Add(off))
		close(gate)
		if due == stream.ReleaseGroup {
			poll.Wait()
			due = 0
		}
	}
	return sent
}

// takeSlot waits for a free slot under the concurrency cap, counting the
// arrivals that waited; false when ctx ended first.
func (o *openRun) takeSlot(ctx context.Context) bool {
	if o.slots == nil {
		return true
	}
	select {
	case o.slots <- struct{}{}:
	default:
		o.w.Waited++
		select {
		case o.slots <- struct{}{}:
		case <-ctx.Done():
		}
	}
	return ctx.Err() == nil
}

// send is arrival i's request (of a session: its turns), armed until
// gate closes; slot is its place among the segment's records.
func (o *openRun) send(ctx context.Context, slot, i int, off time.Duration, gate chan struct{}) {
	defer o.ended.Done()
	d, ss, prepared := o.d, o.s.ss, o.s.prepared
	if ss != nil {
		// Arrival i starts a session; its first turn goes at the
		// arrival, the others each after the reply before it.
		ss.run(ctx, i, func(tag turnTag, prompt int, p *stream.Prepared, intended time.Duration) (contract.Record, bool) {
			var res stream.Result
			if tag.turn == 1 {
				res, intended = d.client.SendAt(ctx, p, gate, nil), off
			} else {
				res = d.client.Send(ctx, p)
			}
			return ss.settle(o.rel, i, prompt, intended, res, o.total, &o.tl, tag), true
		})
		if o.slots != nil {
			<-o.slots
		}
		return
	}
	prompt := workload.PromptIndex(i, prepared.prompts())
	rep := prepared.pick(i)
	res := d.client.SendAt(ctx, prepared.get(rep, prompt), gate, nil)
	prepared.done(rep)
	if o.slots != nil {
		<-o.slots
	}
	d.settle(o.rel, o.records, slot, i, prompt, off, res, len(o.mine), &o.tl, rep)
}
