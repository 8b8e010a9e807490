// Package predict predicts what a simulated engine does under a workload:
// closed waves (Closed), sustained loops (Sustained) and open-loop waves at
// a rate, along a ramp or replaying a trace (Open), each prompt with its own
// length and max_tokens, and the capacity bracket a capacity search would
// find (Capacity). A prediction is the served simulator's engine (package
// engine) stepped on a virtual clock by engine.Run, so its timeline is the
// one the served simulator follows on a fake clock; its records are
// aggregated by the metric contract, so predicted and measured figures are
// defined alike. It is deterministic: the same profile and workload give
// the same records.
//
// The runner imports this package (capacity.predict_from) and never the
// simulated HTTP server.
package predict
