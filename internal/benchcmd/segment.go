package benchcmd

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/rehearsal"
)

// Segment is the flags of a worker of a split plan (SPEC §10),
// shared by run and bench: --segment, --start-at, --coordinator,
// --barrier-timeout, and --workers (run the N segments here).
type Segment struct {
	segment        string
	startAt        string
	coordinator    string
	barrierTimeout time.Duration
	workers        int
	releaseMargin  time.Duration

	start time.Time // --start-at parsed
}

// Flags binds the segment flags to o.
func (o *Segment) Flags(f *pflag.FlagSet) {
	f.StringVar(&o.segment, "segment", "", "run worker i's share (0-based) of every wave of the plan split among N workers: i/N, or auto/N to read i from $"+config.SegmentIndexEnv)
	f.StringVar(&o.startAt, "start-at", "", "RFC 3339 instant at which the first wave is released (a split plan's workers start together)")
	f.StringVar(&o.coordinator, "coordinator", "", "base URL of the coordinator (rehearse coordinate) that releases a split plan's waves together and measures this worker's clock offset")
	f.DurationVar(&o.barrierTimeout, "barrier-timeout", time.Duration(config.DefaultBarrierTimeout)*time.Second, "how long a worker waits at a wave's barrier for the others before it stops with an error")
	f.IntVar(&o.workers, "workers", 0, "run the plan as N worker processes of this binary on this machine, with a coordinator, and merge their segments into one bundle")
	f.DurationVar(&o.releaseMargin, "release-margin", time.Duration(config.DefaultReleaseMargin*float64(time.Second)), "with --workers: how long after the last worker reached a wave's barrier the wave is released: it covers the barrier's reply reaching every worker (a worker reaches the barrier with its share already armed)")
}

// Apply sets cfg's segment from --segment (which overrides the file's
// segment:) and checks the segment flags; errors name the flag (exit 2).
func (o *Segment) Apply(cfg *config.Rehearsal) error {
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
// is resolved or asked of a server: Apply checks them against the plan.
func (o *Segment) check() error {
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

// Coordination is how this worker joins the others (nil: not a worker's
// flags).
func (o *Segment) Coordination() *rehearsal.Coordination {
	if o == nil {
		return nil
	}
	return &rehearsal.Coordination{Coordinator: o.coordinator, StartAt: o.start, BarrierTimeout: o.barrierTimeout}
}

// Workers is --workers: how many worker processes run the plan here (0:
// none).
func (o *Segment) Workers() int { return o.workers }

// Spec is --segment as given ("" without it).
func (o *Segment) Spec() string { return o.segment }
