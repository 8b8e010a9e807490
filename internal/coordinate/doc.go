// Package coordinate keeps the workers of a split plan (SPEC §10) in step:
// a small HTTP server (rehearse coordinate) that gives its time, for each
// worker's NTP-style clock-offset measurement, and holds a barrier per
// wave, releasing it at one instant once every worker has reached it; and
// the worker's client of both. Waves are sequential, so each wave of every
// worker is released together: a worker, its share of wave s armed,
// re-measures its clock offset (a few samples), posts "ready for wave s"
// and gets back the release instant on the coordinator's clock, which it
// turns into its own with that offset.
//
// Every request carries a shared token (TokenEnv) and is checked whole
// before it changes anything; connections are bounded in number and in
// time. A worker's arrival at a barrier lasts as long as the request that
// made it: if its connection closes before the release (the worker died),
// the arrival is withdrawn and the worker's restart may arrive again.
package coordinate
