// Package report renders a bundle for people: README.md in the seed's layout
// (environment, launch commands, workload, the results table, latency detail,
// the mechanism check, warnings and the file-integrity table), the SVG
// figures and report.html. Every figure it prints is read from the aggregates
// of results.json, which package contract computed from the raw records.
package report
