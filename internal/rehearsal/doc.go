// Package rehearsal runs a rehearsal file end to end: for each server in
// order it launches the process (or reaches one already running), waits for
// readiness, drives the warm-up and recorded waves, runs the mechanism check
// while polling the server's metric, stops the server deliberately, and
// finally writes the bundle from the journal — also when a server failed or
// the run was interrupted, with whatever finished.
package rehearsal
