package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/coordinate"
	"github.com/rehearse/rehearse/internal/plan"
	"github.com/rehearse/rehearse/internal/rehearsal"
	"github.com/rehearse/rehearse/internal/workload"
)

// segmentOptions are the flags of a worker of a split plan (SPEC §10),
// shared by run and bench: --segment, --start-at, --coordinator,
// --barrier-timeout, and --workers (run the N segments here).
type segmentOptions struct {
	segment        string
	startAt        string
	coordinator    string
	barrierTimeout time.Duration
	workers        int
	releaseMargin  time.Duration

	start time.Time // --start-at parsed
}

func segmentFlags(f *pflag.FlagSet, o *segmentOptions) {
	f.StringVar(&o.segment, "segment", "", "run worker i's share (0-based) of every wave of the plan split among N workers: i/N, or auto/N to read i from $"+config.SegmentIndexEnv)
	f.StringVar(&o.startAt, "start-at", "", "RFC 3339 instant at which the first wave is released (a split plan's workers start together)")
	f.StringVar(&o.coordinator, "coordinator", "", "base URL of the coordinator (rehearse coordinate) that releases a split plan's waves together and measures this worker's clock offset")
	f.DurationVar(&o.barrierTimeout, "barrier-timeout", time.Duration(config.DefaultBarrierTimeout)*time.Second, "how long a worker waits at a wave's barrier for the others before it stops with an error")
	f.IntVar(&o.workers, "workers", 0, "run the plan as N worker processes of this binary on this machine, with a coordinator, and merge their segments into one bundle")
	f.DurationVar(&o.releaseMargin, "release-margin", time.Duration(config.DefaultReleaseMargin*float64(time.Second)), "with --workers: how long after the last worker reached a wave's barrier the wave is released: it covers the barrier's reply reaching every worker (a worker reaches the barrier with its share already armed)")
}

// apply sets cfg's segment from --segment (which overrides the file's
// segment:) and checks the segment flags; errors name the flag (exit 2).
func (o *segmentOptions) apply(cfg *config.Rehearsal) error {
	if err := o.check(); err != nil {
		return err
	}
	if o.workers > 0 {
		if !cfg.Segment.Whole() {
			return usageError("--workers runs every segment here, but the rehearsal file names segment %s", cfg.Segment)
		}
		split := *cfg
		split.Segment = config.Segment{Index: 0, Count: o.workers}
		if msg := split.SegmentProblem(); msg != "" {
			return usageError("--workers %d: %s", o.workers, msg)
		}
	}
	if o.segment != "" {
		s, err := config.ParseSegment(o.segment, nil)
		if err != nil {
			return usageError("--segment %v", err)
		}
		cfg.Segment, cfg.SegmentSpec = s, o.segment
		if msg := cfg.SegmentProblem(); msg != "" {
			return usageError("--segment %s", msg)
		}
	}
	if cfg.Segment.Whole() && o.workers == 0 && (o.coordinator != "" || o.startAt != "") {
		return usageError("--coordinator and --start-at are for a split plan: give --segment i/N (or segment: in the file)")
	}
	return nil
}

// check checks what the segment flags say on their own, before anything
// is resolved or asked of a server: apply checks them against the plan.
func (o *segmentOptions) check() error {
	if o.workers != 0 && (o.segment != "" || o.coordinator != "") {
		return usageError("--workers runs every segment here: it takes no --segment or --coordinator")
	}
	if o.workers < 0 || o.workers == 1 {
		return usageError("--workers %d: want 2 or more worker processes", o.workers)
	}
	if o.segment != "" {
		if _, err := config.ParseSegment(o.segment, nil); err != nil {
			return usageError("--segment %v", err)
		}
	}
	if o.startAt != "" {
		t, err := time.Parse(time.RFC3339Nano, o.startAt)
		if err != nil {
			return usageError("--start-at %q: want an RFC 3339 instant, e.g. 2026-12-01T12:00:00Z", o.startAt)
		}
		o.start = t
	}
	if o.releaseMargin < 0 {
		return usageError("--release-margin %v: want 0 or more", o.releaseMargin)
	}
	if o.barrierTimeout <= 0 {
		return usageError("--barrier-timeout %v: want a positive duration", o.barrierTimeout)
	}
	return nil
}

// synchronizer is the worker's link to the other workers: a coordinator
// client whose clock offset is measured now, or a fixed first release at
// --start-at; with it the worker's provenance so far, and what to call
// once the rehearsal ends (the worker reports done).
func (o *segmentOptions) synchronizer(ctx context.Context, cfg *config.Rehearsal, prompts workload.Set) (rehearsal.Synchronizer, *bundle.Worker, func(), error) {
	if o == nil || cfg.Segment.Whole() {
		return nil, nil, func() {}, nil
	}
	w := &bundle.Worker{Coordinator: config.RedactURL(o.coordinator)}
	if !o.start.IsZero() {
		w.StartAt = o.start.UTC().Format(time.RFC3339Nano)
	}
	planned := plan.WorkloadOf(cfg, prompts)
	if o.coordinator == "" {
		// The runner refuses a plan of several waves with no synchronizer.
		if o.start.IsZero() || rehearsal.SyncWaves(cfg, planned) > 1 {
			return nil, w, func() {}, nil
		}
		return coordinate.Fixed{At: o.start}, w, func() {}, nil
	}
	c := &coordinate.Client{
		URL: o.coordinator, Worker: cfg.Segment.Index, Count: cfg.Segment.Count, Token: os.Getenv(coordinate.TokenEnv),
		Digest: rehearsal.PlanDigest(cfg, planned), BarrierTimeout: o.barrierTimeout, StartAt: o.start,
	}
	if err := measureOffset(ctx, c); err != nil {
		return nil, nil, nil, &ExitError{Code: 1, Err: fmt.Errorf("--coordinator: %v", config.RedactURL(err.Error()))}
	}
	w.ClockOffsetS, w.OffsetUncertaintyS = c.Offset.Seconds(), c.Uncertainty.Seconds()
	done := func() {
		dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.Done(dctx)
	}
	return c, w, done, nil
}

// measureOffset measures c's clock offset, trying again for up to
// config.DefaultCoordinatorWait while the coordinator cannot be reached
// (a worker may start before it serves), but not once it refused the
// token.
func measureOffset(ctx context.Context, c *coordinate.Client) error {
	deadline := time.Now().Add(time.Duration(config.DefaultCoordinatorWait) * time.Second)
	for {
		err := c.Measure(ctx, config.DefaultOffsetSamples)
		if err == nil || ctx.Err() != nil || time.Now().After(deadline) || errors.Is(err, coordinate.ErrUnauthorized) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(500 * time.Millisecond):
		}
	}
}
