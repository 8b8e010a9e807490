// Package supervise launches a server under test by argv in its own process
// group (never through a shell) under a keeper: rehearse re-executed, a
// child subreaper that takes the server and everything it started down with
// rehearse, however rehearse dies. It sends the server's stdout and stderr to
// a log file, waits for it to become ready (alive, health probe, /v1/models,
// one tiny request), notices when it dies, and stops it deliberately:
// SIGTERM to the group, a grace period, SIGKILL to the group and every other
// descendant. Lines the tool itself adds to a log start with "==> rehearse:";
// ScanLog splits a log at the deliberate-stop marker so shutdown noise is
// never read as a failure.
package supervise
