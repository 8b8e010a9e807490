// Package config reads a rehearsal file: the servers under test (launched by
// argv or already running), the baseline, the workload, the mechanism check,
// the tokenizer and the output folder. Loading applies the defaults that make
// the seed's rehearsal short to write and reports every problem at once, each
// with its field path ("servers[1].launch: empty"); unknown keys are errors.
package config
