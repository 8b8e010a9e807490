// Package coordinate keeps the workers of a split plan (SPEC §10) in step:
// a small HTTP server (rehearse coordinate) that gives its time, for each
// worker's NTP-style clock-offset measurement, and holds a barrier per
// wave, releasing it at one instant once every worker has reached it; and
// the worker's client of both. Waves are sequential, so each wave of every
// worker is released together: a worker, its share of wave s armed,
// re-measures its clock offset (a few samples), posts "ready for wave s"
// and gets back the release instant on the coordinator's clock, which it
// turns into its own with that offset.
package coordinate
