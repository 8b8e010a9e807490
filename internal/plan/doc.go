// Package plan turns a workload into the ordered waves of each server:
// warm-up waves at their concurrency, recorded closed-loop waves with the
// first one flagged cold when there is no warm-up, open-loop waves with
// their per-repeat seeds, and the mechanism check. It is data only: a pure
// function of the workload, with no network, clock or file. Package
// rehearsal walks the plan; package drive runs one planned wave.
//
// A plan split among N workers (SPEC §10) is the same plan: Share is
// worker i's deterministic part of every wave (clients, requests, sessions
// by global index k, k mod N = i), and Digest names the plan so segments
// of different plans are told apart.
package plan
