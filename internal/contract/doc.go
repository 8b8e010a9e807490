// Package contract is the metric contract of SPEC §3–§4a as pure code: the
// raw request record, the wave, the aggregation of records into aggregates
// (goodput, percentiles, failures, speed-up, warnings), SLO attainment
// (slo.go: objectives, per-request verdicts, attainment with its Wilson
// interval and a pass/fail/unresolved verdict against a target, which the
// capacity search consumes), and the metric table (Metrics) by which gates
// and objectives read aggregates. It imports
// nothing of this module, performs no I/O, and is the one place where a
// figure of a report is defined, so that `rehearse verify` can recompute
// every aggregate from the raw records alone.
package contract
