// Package workload is what a rehearsal sends: the prompt sources (eight
// built-in prompts, inline prompts, files, ShareGPT JSON, chat JSONL,
// synthetic prompts of exact token lengths, shared prefixes, and request
// traces whose lines also give each request's arrival), registered by name
// in one map and resolved once into an ordered Set with the record the
// bundle keeps, and the open-loop arrival schedules (fixed, Poisson, gamma,
// at a constant rate or on a linear or exponential ramp), which are pure,
// seeded functions from a request's index to its offset after the wave's
// release.
package workload
