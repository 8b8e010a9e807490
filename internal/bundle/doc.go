// Package bundle is the results bundle on disk: results.json (schema
// rehearse/results/v1) with provenance, workload, every raw record and the
// aggregates; the journal from which results.json can be rebuilt after a
// crash; the SHA256SUMS manifest; and verification, which checks digests,
// schema and recomputes every aggregate with package contract.
package bundle
