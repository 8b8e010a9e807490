// Package engine is the simulated LLM engine that the live simulator
// (package sim) and the predictor (package predict) share: a calibrated
// step-latency Profile (the built-in ones are data, in package profiles),
// and a lock-serialized or iteration-level continuous-batching scheduler
// with vLLM's recompute preemption and an optional vLLM-style prefix cache
// (hash chains of 16-token blocks, least recently used evicted within the
// KV budget).
//
// The scheduler runs two ways with one step model (Profile.StepS, plus the
// context term and the step jitter): Start runs it on a Clock that can go
// K times faster than the wall clock, for the served simulator, counting
// vLLM's metrics as it goes (Metrics); Run steps it on a virtual clock for
// a predictor, with the clients' request overhead, frontend queue and
// timeouts modelled as the served simulator's handlers meet them.
package engine
