// Package workload is what a rehearsal sends: the prompts (eight built-in
// ones, or a file) and the open-loop arrival schedules (fixed, Poisson,
// gamma), which are pure, seeded functions from a request's index to its
// offset after the wave's release.
package workload
