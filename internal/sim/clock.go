package sim

import (
	"context"
	"time"
)

// simClock maps simulated seconds onto wall time: simulated time runs scale
// times faster than the wall clock. It reads time.Now and sleeps on
// time.Timer, so tests under testing/synctest see it run on a fake clock,
// exactly.
type simClock struct {
	epoch time.Time
	scale float64
}

func newSimClock(scale float64) *simClock {
	return &simClock{epoch: time.Now(), scale: scale}
}

// now is the simulated time in seconds since the clock was made.
func (c *simClock) now() float64 {
	return time.Since(c.epoch).Seconds() * c.scale
}

// wall converts a duration in simulated seconds into wall time.
func (c *simClock) wall(simS float64) time.Duration {
	return time.Duration(simS / c.scale * float64(time.Second))
}

// sleepUntil blocks until simulated time t or until ctx is done; it reports
// whether t was reached.
func (c *simClock) sleepUntil(ctx context.Context, t float64) bool {
	d := c.epoch.Add(time.Duration(t / c.scale * float64(time.Second))).Sub(time.Now())
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

// sleep blocks for simS simulated seconds or until ctx is done.
func (c *simClock) sleep(ctx context.Context, simS float64) bool {
	return c.sleepUntil(ctx, c.now()+simS)
}
