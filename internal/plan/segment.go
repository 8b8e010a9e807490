package plan

import "github.com/rehearse/rehearse/internal/config"

// Segment is one worker's share of a plan split among several (SPEC §10):
// worker Index of Count. The zero value is the whole plan.
type Segment = config.Segment

// Share is worker s's share of a wave's n units (the clients of a closed
// or sustained wave, the requests of an open-loop schedule, its sessions,
// the requests of a sustained run): the global indices k in [0, n) with
// k mod Count = Index, in order. Every unit belongs to exactly one worker,
// and a unit keeps its global index, so that the prompt it sends and the
// time it is meant to go are what they are in the single-process plan.
// The whole plan's share is every index.
func Share(s Segment, n int) []int {
	out := []int{}
	step, first := 1, 0
	if !s.Whole() {
		step, first = s.Count, s.Index
	}
	for k := first; k < n; k += step {
		out = append(out, k)
	}
	return out
}

// ShareCap is worker s's part of a cap c shared by the workers (an
// open-loop max_concurrency): c split as evenly as whole numbers allow,
// at least 1 for a positive cap; 0 (no cap) stays 0.
func ShareCap(s Segment, c int) int {
	if c <= 0 || s.Whole() {
		return c
	}
	share := c / s.Count
	if s.Index < c%s.Count {
		share++
	}
	return max(share, 1)
}
