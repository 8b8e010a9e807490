// Package drive runs waves against one server: closed-loop waves released
// together behind a start barrier, open-loop waves dispatched on a seeded
// arrival schedule, and the series of warm-up and recorded waves of a
// workload. Every record is stamped relative to one monotonic release
// instant per wave and journaled as its request ends; the wave is journaled
// at release and at its end, with its release spread, the client's
// lateness and CPU time, and why it stopped if it did.
package drive
