package drive

import (
	"context"
	"fmt"
	"time"

	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/plan"
)

// The three drivers (ClosedWave, OpenWave, SustainedWave) share a skeleton
// and keep only how they dispatch their requests: waveSends is a wave made
// ready to send (its requests prepared, its connections dialed, its release
// agreed), waveRun one journaled wave from its release to its end.

// waveSends is what a wave sends, made ready alike by the three drivers:
// its sessions or its prepared prompts, how many requests this worker
// sends, and its pre-dialed connections. close gives them back.
type waveSends struct {
	d *Driver
	t Target
	// mode is the wave's word in errors: closed, open or sustained.
	mode     string
	ss       *sessionRunner // nil unless the wave runs sessions
	prepared *replicaSet    // nil when it does
	total    int
	dialed   bool
}

// newSends prepares what a closed or open wave of n clients (or arrivals),
// of which this share runs units, sends (sendables).
func (d *Driver) newSends(t Target, mode string, l plan.Load, n int, units []int) (*waveSends, error) {
	ss, prepared, total, err := d.sendables(t, l, n, units)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t.Name, err)
	}
	return &waveSends{d: d, t: t, mode: mode, ss: ss, prepared: prepared, total: total}, nil
}

// notReleased is the error of a wave whose ctx ended before its release;
// nil while ctx lasts.
func (s *waveSends) notReleased(ctx context.Context) error {
	if ctx.Err() == nil {
		return nil
	}
	return fmt.Errorf("%s: %s wave not released: %w", s.t.Name, s.mode, context.Cause(ctx))
}

// dial pre-dials n connections (none for n 0), unless ctx ended before;
// it returns notReleased's error when ctx ended before or meanwhile. A
// server that refuses connections is not an error of the wave: its
// requests fail as connect and are recorded.
func (s *waveSends) dial(ctx context.Context, n int) error {
	if err := s.notReleased(ctx); err != nil {
		return err
	}
	if n > 0 {
		s.d.warm(ctx, s.t, n)
	}
	s.dialed = true
	return s.notReleased(ctx)
}

// arm agrees on the wave's release, on a split plan, and waits for it
// (Share.arm), once the wave is armed.
func (s *waveSends) arm(ctx context.Context, share *Share) (time.Time, error) {
	release, err := share.arm(ctx)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: %s wave %w", s.t.Name, s.mode, err)
	}
	return release, nil
}

// close drops the wave's connections, if it dialed them, and numbers the
// target's next wave on from this one's requests.
func (s *waveSends) close() {
	if s.dialed {
		s.d.client.Drop()
	}
	s.d.advance(s.t, s.prepared)
}

// waveRun is one journaled wave from its release to its end: the wave,
// the release its records wait for, the count of its ended requests, and
// the client's CPU time and stalls from its release.
type waveRun struct {
	d     *Driver
	w     contract.Wave
	rel   *release
	tl    tally
	total int // requests it will send; -1 when not known
	// quiet sends no progress events and starts no side probes (a
	// sustained wave's warm-up).
	quiet  bool
	cpu0   time.Duration
	stalls *stallWatch
}

// newWaveRun is wave w of total requests against t, its records stamped
// with l's prompts and the share's worker.
func (d *Driver) newWaveRun(t Target, share Share, l plan.Load, w contract.Wave, total int) *waveRun {
	r := &waveRun{d: d, w: w, rel: newRelease(), total: total}
	r.rel.load, r.rel.worker, r.rel.secrets = l, share.worker(), t.Secrets
	return r
}

// watch starts counting the client's CPU time and watching its stalls.
func (r *waveRun) watch() {
	r.cpu0 = cpuTime()
	r.stalls = r.d.watchStalls()
}

// publish journals the wave released at instant at, reports its release
// and starts the side probes armed beside it (unless quiet), then lets its
// records go: they are journaled after the wave's own line.
func (r *waveRun) publish(at time.Time) {
	r.w.StartedAt = anchor(at)
	if err := r.d.journalWave(r.w); err != nil {
		r.tl.mu.Lock()
		r.tl.journalErr = err
		r.tl.mu.Unlock()
	}
	if !r.quiet {
		r.d.released(r.w, at, r.total)
	}
	r.rel.publish(r.w, at)
}

// stampEnd sets on w, the wave at its end, the client's CPU time and
// stalls since the release, the wall time of its records, and why ctx
// stopped it, if it did.
func (r *waveRun) stampEnd(ctx context.Context, w *contract.Wave, records []contract.Record) {
	w.ClientCPUS = (cpuTime() - r.cpu0).Seconds()
	w.ClientStalls = r.stalls.end()
	w.WallS = contract.WaveWallS(records)
	w.Stopped = stopped(ctx)
}

// finish counts w, the wave at its end, in the driver's stats, journals
// it, reports its end (unless quiet), and returns its result; the error is
// the wave's first journal error, else why ctx stopped it.
func (r *waveRun) finish(ctx context.Context, w contract.Wave, records []contract.Record) (WaveResult, error) {
	d := r.d
	d.count(w)
	r.tl.mu.Lock()
	journalErr := r.tl.journalErr
	done, failed := r.tl.done, r.tl.failed
	r.tl.mu.Unlock()
	if err := d.journalWave(w); err != nil && journalErr == nil {
		journalErr = err
	}
	if !r.quiet {
		d.progress(Event{Kind: WaveEnded, Wave: w, Done: done, Failed: failed, Total: r.total, Elapsed: time.Since(r.rel.at)})
	}
	return WaveResult{Wave: w, Release: r.rel.at, Records: records}, waveError(ctx, w, journalErr)
}
