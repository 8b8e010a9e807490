package drive

import (
	"context"
	"time"

	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/plan"
)

// Share is what a worker of a split plan adds to a wave (SPEC §10): the
// segment whose share of the wave it runs (plan.Share: clients, requests
// or sessions by global index, each keeping its index, its prompt and its
// intended time), and the release instant the workers agreed on. The zero
// value is the whole wave, released as soon as it is ready.
type Share struct {
	Segment plan.Segment
	// ReleaseAt is the agreed release on this process's clock; record
	// times are from it, so the workers' records share one origin.
	ReleaseAt time.Time
	// ReleaseStamp is the instant as the coordinator wrote it, journaled
	// as the wave's release_at.
	ReleaseStamp string
	// Agree, when set, is asked for ReleaseAt and ReleaseStamp once the
	// wave is armed: its requests prepared, its connections pre-dialed
	// and (closed wave) its first requests buffered on them, so that the
	// workers agree on an instant only when each is ready to fire, and
	// the coordinator's margin covers no preparation (plan.Wave.Agree).
	Agree func(ctx context.Context) (plan.Release, error)
	// Offset, when set, is this worker's clock offset and its uncertainty
	// measured at the wave's barrier (Agree's), recorded on the wave.
	Offset *plan.Release
}

// NotReleasedError is a wave whose workers could not agree on its release
// (Share.Agree failed): nothing of it was sent or journaled.
type NotReleasedError struct{ Err error }

func (e *NotReleasedError) Error() string { return "not released: " + e.Err.Error() }
func (e *NotReleasedError) Unwrap() error { return e.Err }

// ShareOf is the share a planned wave carries.
func ShareOf(w plan.Wave) Share {
	return Share{Segment: w.Segment, ReleaseAt: w.ReleaseAt, ReleaseStamp: w.ReleaseStamp, Agree: w.Agree}
}

// arm is called once the wave is armed: it asks Agree (when set) for the
// release instant, then waits for it, and returns it (await's).
func (s *Share) arm(ctx context.Context) (time.Time, error) {
	if s.Agree != nil {
		rel, err := s.Agree(ctx)
		if err != nil {
			return time.Time{}, &NotReleasedError{Err: err}
		}
		s.ReleaseAt, s.ReleaseStamp = rel.At, rel.Stamp
		if rel.Measured {
			s.Offset = &rel
		}
	}
	return s.await(ctx), nil
}

// worker is the index records carry, nil for the whole plan.
func (s Share) worker() *int {
	if s.Segment.Whole() {
		return nil
	}
	i := s.Segment.Index
	return &i
}

// units is the global indices of a wave's n units this share runs.
func (s Share) units(n int) []int { return plan.Share(s.Segment, n) }

// await waits for the agreed release (or ctx) and returns the release
// instant: ReleaseAt when one was agreed, else now.
func (s Share) await(ctx context.Context) time.Time {
	if s.ReleaseAt.IsZero() {
		return time.Now()
	}
	if wait := time.Until(s.ReleaseAt); wait > 0 {
		sleepCtx(ctx, wait)
	}
	return s.ReleaseAt
}

// stampWave sets w's agreed release and, given the instant the wave was
// actually let go, how late that was.
func (s Share) stampWave(w *contract.Wave, actual time.Time) {
	if s.ReleaseAt.IsZero() {
		return
	}
	w.ReleaseAt = s.ReleaseStamp
	late := max(actual.Sub(s.ReleaseAt).Seconds(), 0)
	w.ReleaseLateS = &late
	if o := s.Offset; o != nil {
		off, unc := o.Offset.Seconds(), o.Uncertainty.Seconds()
		w.ClockOffsetS, w.OffsetUncertaintyS = &off, &unc
	}
}
