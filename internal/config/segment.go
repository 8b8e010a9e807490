package config

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// SegmentIndexEnv is the environment variable a segment of "auto/N" takes
// its index from (a Kubernetes Indexed Job sets it from
// JOB_COMPLETION_INDEX).
const SegmentIndexEnv = "REHEARSE_SEGMENT_INDEX"

// DefaultMaxOffsetUncertainty is the largest clock-offset uncertainty a
// worker's segment may carry and still be merged (rehearse merge
// --max-offset-uncertainty).
const DefaultMaxOffsetUncertainty = 5 * 1e-3 // seconds

// DefaultBarrierTimeout bounds how long a worker waits at a wave's barrier
// for the other workers (a worker that died makes it time out).
const DefaultBarrierTimeout = 10 * 60 // seconds

// DefaultReleaseMargin is how long after the last worker reached a wave's
// barrier the coordinator releases it, so that every worker hears the
// instant before it comes.
const DefaultReleaseMargin = 250 * 1e-3 // seconds

// DefaultCoordinatorWait is how long a worker keeps trying to reach its
// coordinator before it gives up (on Kubernetes the workers may start
// before the coordinator's pod is serving).
const DefaultCoordinatorWait = 2 * 60 // seconds

// DefaultOffsetSamples is how many time samples a worker takes of the
// coordinator's clock; the one of least round trip gives the offset.
const DefaultOffsetSamples = 16

// Segment is worker Index's share (0-based) of a plan split among Count
// workers; the zero value (and Count 1) is the whole plan.
type Segment struct {
	Index, Count int
}

// Whole reports whether s is the whole plan (no split).
func (s Segment) Whole() bool { return s.Count <= 1 }

// String is "i/N", or "" for the whole plan.
func (s Segment) String() string {
	if s.Count == 0 {
		return ""
	}
	return fmt.Sprintf("%d/%d", s.Index, s.Count)
}

// ParseSegment reads "i/N" (0 <= i < N) or "auto/N", whose index is then
// read from $REHEARSE_SEGMENT_INDEX (getenv; nil: os.Getenv).
func ParseSegment(text string, getenv func(string) string) (Segment, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	is, ns, ok := strings.Cut(strings.TrimSpace(text), "/")
	if !ok {
		return Segment{}, fmt.Errorf("%q: want i/N (0-based i below N) or auto/N", text)
	}
	n, err := strconv.Atoi(ns)
	if err != nil || n < 1 {
		return Segment{}, fmt.Errorf("%q: the count N must be a whole number of at least 1", text)
	}
	if is == "auto" {
		v := getenv(SegmentIndexEnv)
		if v == "" {
			return Segment{}, fmt.Errorf("%q: auto takes the index from $%s, which is not set", text, SegmentIndexEnv)
		}
		is = v
	}
	i, err := strconv.Atoi(is)
	if err != nil || i < 0 || i >= n {
		return Segment{}, fmt.Errorf("%q: the index must be a whole number from 0 to %d", text, n-1)
	}
	return Segment{Index: i, Count: n}, nil
}

// validateSegment parses segment: and refuses what a split plan cannot do:
// a capacity search (its probes follow verdicts, not a plan that can be
// split ahead of time) and launched servers (every worker would launch
// its own copy; workers reach one server at base_url).
func (r *Rehearsal) validateSegment(p *Problems) {
	if r.SegmentSpec == "" {
		return
	}
	s, err := ParseSegment(r.SegmentSpec, nil)
	if err != nil {
		p.add("segment", "%v", err)
		return
	}
	r.Segment = s
	if msg := r.SegmentProblem(); msg != "" {
		p.add("segment", "%s", msg)
	}
}

// SegmentProblem says why r's plan cannot be split into r.Segment, or "".
func (r *Rehearsal) SegmentProblem() string {
	if r.Segment.Whole() {
		return ""
	}
	if r.Capacity != nil {
		return fmt.Sprintf("%s: a capacity search cannot be split among workers (its probes follow its verdicts)", r.Segment)
	}
	for i, s := range r.Servers {
		if s.Launched() {
			return fmt.Sprintf("%s: servers[%d] (%s) is launched; the workers of a split plan reach one running server at its base_url", r.Segment, i, s.Name)
		}
	}
	return ""
}
