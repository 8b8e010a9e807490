// Package plan owns the input side of a rehearsal: the planned workload
// (Workload, made once from the rehearsal and its resolved prompts by
// WorkloadOf), what each request sends (Load), and the ordered waves of
// each server (Server): warm-up waves at their concurrency, recorded
// closed-loop waves with the first one flagged cold when there is no
// warm-up, open-loop waves with their per-repeat seeds, and the mechanism
// check. It is data only: pure functions of the workload, with no network,
// clock or file. Package rehearsal walks the plan and records it in
// results.json; package drive runs one planned wave.
//
// A plan split among N workers (SPEC §10) is the same plan: Share is
// worker i's deterministic part of every wave (clients, requests, sessions
// by global index k, k mod N = i).
package plan
