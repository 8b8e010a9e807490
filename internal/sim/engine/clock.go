package engine

import (
	"context"
	"time"
)

// Clock maps simulated seconds onto wall time: simulated time runs scale
// times faster than the wall clock. It reads time.Now and sleeps on
// time.Timer, so tests under testing/synctest see it run on a fake clock,
// exactly.
type Clock struct {
	epoch time.Time
	scale float64
}

// NewClock starts a clock at simulated time 0, running scale times faster
// than the wall clock.
func NewClock(scale float64) *Clock {
	return &Clock{epoch: time.Now(), scale: scale}
}

// Now is the simulated time in seconds since the clock was made.
func (c *Clock) Now() float64 {
	return time.Since(c.epoch).Seconds() * c.scale
}

// SleepUntil blocks until simulated time t or until ctx is done; it reports
// whether t was reached.
func (c *Clock) SleepUntil(ctx context.Context, t float64) bool {
	d := time.Until(c.epoch.Add(time.Duration(t / c.scale * float64(time.Second))))
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}
