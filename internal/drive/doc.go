// Package drive runs one planned wave (package plan) against one server:
// a closed-loop wave released together behind a start barrier, or an
// open-loop wave dispatched on a seeded arrival schedule, each request
// sending the plan's load (plan.Load); the order of the waves is the
// plan's, and package rehearsal walks it. Every record is stamped relative
// to one monotonic release instant per wave and handed to the Sink the
// runner gives (its journal) as its request ends; the wave is handed over
// at release and at its end, with its release spread, the client's
// lateness and CPU time, and why it stopped if it did. A wave's Share runs
// one worker's part of it at an agreed release instant (SPEC §10).
package drive
