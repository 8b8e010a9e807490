package drive

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/plan"
	"github.com/rehearse/rehearse/internal/stream"
)

// sideRun is the side probes of one recorded wave (plan.SideProbes, vLLM's
// --probe-request-rate): armed before the wave, started at its release
// (Driver.released), one probe at a time, each sent the interval after the
// last one ended, outside the wave's concurrency cap; stopped once the
// wave's requests have all ended, the probe then in flight awaited. Its
// records are a wave of kind side_probe, mode open (probe k is client k),
// released at the recorded wave's release, beside it.
type sideRun struct {
	d        *Driver
	ctx      context.Context
	t        Target
	sp       plan.SideProbes
	prepared *stream.Prepared
	rel      *release

	startOnce      sync.Once
	started        bool
	stop, done     chan struct{}
	wave           contract.Wave
	at             time.Time
	records        []contract.Record
	journalErr     error
	sendingReplica *int
}

// armSideProbes prepares the side probes of the next wave t runs, and
// dials one more connection for them, so that they take none the wave's
// requests were dialed for; Driver.released starts them.
func (d *Driver) armSideProbes(ctx context.Context, t Target, l plan.Load, sp plan.SideProbes) (*sideRun, error) {
	if !(sp.RateRPS > 0) || sp.MaxTokens < 1 || sp.Prompt == "" {
		return nil, fmt.Errorf("%s: side probes: rate %v, max_tokens %d, prompt %q: want a rate above 0, at least 1 token and a prompt", t.Name, sp.RateRPS, sp.MaxTokens, sp.Prompt)
	}
	// vLLM's probe is its first request with the prompt, its length and
	// the model replaced: the body's other fields (extra body, headers)
	// are the wave's; no x-request-id.
	r := t.request(l, t.BaseURL, t.Model)
	r.Prompt, r.MaxTokens = sp.Prompt, sp.MaxTokens
	p, err := stream.Prepare(r)
	if err != nil {
		return nil, fmt.Errorf("%s: side probes: %w", t.Name, err)
	}
	s := &sideRun{d: d, ctx: ctx, t: t, sp: sp, prepared: p, rel: &release{secrets: t.Secrets},
		stop: make(chan struct{}), done: make(chan struct{})}
	if len(t.Replicas) > 1 {
		s.sendingReplica = replicaTag(0) // BaseURL is replica 0's
	}
	_ = d.client.Warm(ctx, t.BaseURL, 1)
	d.mu.Lock()
	d.side = s
	d.mu.Unlock()
	return s, nil
}

// released reports the release of wave w at instant at (a progress event)
// and starts the side probes armed beside it.
func (d *Driver) released(w contract.Wave, at time.Time, total int) {
	d.progress(Event{Kind: WaveReleased, Wave: w, Total: total})
	d.mu.Lock()
	s := d.side
	d.side = nil
	d.mu.Unlock()
	if s != nil {
		s.start(w, at)
	}
}

// start journals the side-probe wave beside w, released at w's release
// instant, and sends its probes.
func (s *sideRun) start(w contract.Wave, at time.Time) {
	s.startOnce.Do(func() {
		s.started, s.at = true, at
		s.wave = contract.Wave{ID: s.d.NextWaveID(), Server: w.Server, Repeat: w.Repeat, Kind: contract.KindSideProbe,
			Mode: contract.ModeOpen, RequestRateRPS: s.sp.RateRPS, StartedAt: anchor(at), Beside: w.ID}
		s.journalErr = s.d.journalWave(s.wave)
		go s.loop()
	})
}

// loop sends probe after probe until stop or the wave's context ends: the
// first at the release, each next one the interval after the last ended.
func (s *sideRun) loop() {
	defer close(s.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	next := s.at
	for k := 0; ; k++ {
		select {
		case <-s.stop:
			return
		case <-s.ctx.Done():
			return
		default:
		}
		res := s.d.client.Send(s.ctx, s.prepared)
		r := s.d.record(s.wave, s.at, k, -1, next.Sub(s.at), res)
		s.rel.scrub(&r)
		r.MaxTokens, r.Replica = s.sp.MaxTokens, s.sendingReplica
		s.records = append(s.records, r)
		if err := s.d.journalRecord(r); err != nil && s.journalErr == nil {
			s.journalErr = err
		}
		next = time.Now().Add(s.sp.Interval())
		timer.Reset(time.Until(next))
		select {
		case <-s.stop:
			return
		case <-s.ctx.Done():
			return
		case <-timer.C:
		}
	}
}

// finish stops the probes once the wave beside them has ended, awaits the
// one in flight and journals their wave at its end; nil when they never
// started (the wave was not released).
func (s *sideRun) finish() (*WaveResult, error) {
	s.d.mu.Lock()
	if s.d.side == s {
		s.d.side = nil
	}
	s.d.mu.Unlock()
	s.startOnce.Do(func() {}) // a late release no longer starts them
	if !s.started {
		return nil, nil
	}
	close(s.stop)
	<-s.done
	w := s.wave
	w.WallS = contract.WaveWallS(s.records)
	w.Stopped = stopped(s.ctx)
	err := s.d.journalWave(w)
	if s.journalErr != nil {
		err = s.journalErr
	}
	if err != nil {
		err = fmt.Errorf("side probes of wave %d: journal: %w", w.Beside, err)
	}
	return &WaveResult{Wave: w, Release: s.at, Records: s.records}, err
}
