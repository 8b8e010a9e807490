// Package rehearsal is the one runner: run, demo, bench and capacity all
// go through Run, and end through Perform, the runner's tail: Rehearse
// (inputs, provenance, Run, the report, verify with the tokenizer that
// counted) and Rehearsed.End (the summary, the warnings, where the bundle
// is, and the exit status: Rehearsed.Err).
//
// Run plans the workload once (plan.WorkloadOf), records that plan in
// the bundle's header (results.json's workload) and hands its load to
// package drive. For each server in order it launches the process (or
// reaches one already running), waits for readiness, walks the server's planned waves
// (package plan; package drive runs each one), runs the mechanism check
// while polling the server's metric, stops the server deliberately, and
// finally writes the bundle from the journal — also when a server failed or
// the run was interrupted, with whatever finished. A server of several
// replicas (fleet.go) is launched as all its processes, waited for
// together, driven through its router or balanced per request by the
// client, polled replica by replica, and stopped together. It also opens the
// rehearsal's tokenizer through the one resolver, tokenizer.Resolve
// (OpenTokenizer; a server's /tokenize checks it before the load), and is
// the provenance builder (Provenance) and prompt resolver (Prompts).
//
// On a split plan (config.Rehearsal.Segment, SPEC §10) the same runner is
// a worker: each wave runs this worker's share (plan.Share), released at
// the instant a Synchronizer (a coordinate.Client: one barrier per wave,
// taken once the wave is armed, its clock offset re-measured there) gives
// for it; the bundle carries provenance.worker with the plan digest.
package rehearsal
