// Package vllmcli is what a vllm bench serve command line said about its
// run beyond the workload, as vLLM's result file records it: a leaf type
// that the rehearsal file (package config) carries from the command line
// and results.json (package bundle) records.
package vllmcli

// Run is what a vllm bench serve command line (rehearse bench serve)
// said about its run beyond the workload, as vLLM's result file records it
// (vllm/benchmarks/serve.py, main_async): the values given, or vLLM's
// defaults, not what rehearse derived from them. The vllm export writes
// its keys from it, so the file of `rehearse export --format vllm` is the
// one --save-result wrote.
type Run struct {
	// Serve is true for rehearse bench serve, whose every field is as given
	// (or vLLM's default). For rehearse bench, which takes vLLM's flags
	// over rehearse's own loads, only Backend, Label, ModelID,
	// TokenizerID, Metadata and the percentile choice are; each load's
	// rate, burstiness, concurrency and count come from its waves.
	Serve bool `json:"serve"`
	// Backend is --backend (vLLM's default openai).
	Backend string `json:"backend"`
	// Label is --label; null without one (the file name then starts with
	// the backend).
	Label *string `json:"label"`
	// ModelID is --model, or the model the server listed first.
	ModelID string `json:"model_id"`
	// TokenizerID is --tokenizer, else the model; null with
	// --skip-tokenizer-init.
	TokenizerID *string `json:"tokenizer_id"`
	// NumPrompts is --num-prompts as given (vLLM's default 1000).
	NumPrompts int `json:"num_prompts"`
	// Metadata are --metadata's KEY=VALUE pairs in the order given, written
	// as top-level keys of the result.
	Metadata []KeyValue `json:"metadata,omitempty"`
	// RequestRateRPS is --request-rate; null for inf (vLLM's default).
	RequestRateRPS *float64 `json:"request_rate_rps"`
	// Burstiness is --burstiness (vLLM's default 1.0); null for inf.
	Burstiness *float64 `json:"burstiness"`
	// MaxConcurrency is --max-concurrency; null without one.
	MaxConcurrency *int `json:"max_concurrency"`
	// RampUp is --ramp-up-strategy with its rates; absent without one.
	RampUp *RampUp `json:"ramp_up,omitempty"`
	// PercentileMetrics and MetricPercentiles are --percentile-metrics
	// (vLLM's default ttft,tpot,itl) and --metric-percentiles (99): the
	// percentile keys of the result and the summary's blocks.
	PercentileMetrics []string  `json:"percentile_metrics"`
	MetricPercentiles []float64 `json:"metric_percentiles"`
}

// RampUp is vllm bench serve's ramp-up: its rates are whole requests
// per second, as vLLM's parser takes them.
type RampUp struct {
	Strategy string `json:"strategy"`
	StartRPS int    `json:"start_rps"`
	EndRPS   int    `json:"end_rps"`
}

// KeyValue is one --metadata pair.
type KeyValue struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}
