// Package promscrape reads one metric from a server's Prometheus /metrics
// endpoint (parsed with prometheus/common/expfmt) and polls it periodically
// during a mechanism-check wave, keeping every sample on the same monotonic
// clock as the wave's requests.
package promscrape
