// Package search is the capacity search of SPEC §8 as a pure state
// machine: which probe to run next, what each probe's verdict does to the
// bracket, and when to stop. It performs no I/O and reads no clock. The
// runner drives it (a search is a source of waves, not a second loop): it
// asks Next for a probe, runs it as an ordinary sustained wave, fills an
// Outcome from package contract's SLO attainment of the wave's records,
// and hands it to Observe, until Next says the search is over. Replay
// feeds recorded outcomes through the same machine, so that verify
// recomputes the bracket from the records alone.
//
// The search doubles the concurrency from Config.Start (or probes the ends
// of a predicted bracket first) until a probe fails, then bisects between
// the largest pass and the smallest fail until min_fail − max_pass ≤
// max(1, 5 % of max_pass), then re-runs the final pass and fail points
// Config.Repeats times. An unresolved probe (its interval straddles α when
// its cap is reached) is re-probed once with a larger sample (Probe.Retry);
// unresolved again, it counts as a fail for bracketing — a point the
// search cannot call a pass is never one — and when it is the final
// min_fail the stop reason says so (StopCapReached).
package search
