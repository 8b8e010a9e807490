package benchcmd

import "strings"

// benchFlagOf names, for each field a bench rehearsal sets from flags, the
// flag that set it, so that the one validation (config.Rehearsal.Validate)
// speaks to a command line in its own words. The longest matching path
// wins; a field no flag sets keeps its path.
var benchFlagOf = map[string]string{
	"servers[0]":                           "--base-url",
	"servers[0].base_url":                  "--base-url",
	"servers[0].base_urls":                 "--base-url",
	"servers[0].replicas":                  "--base-url",
	"servers[0].balance":                   "--balance",
	"servers[0].gpus":                      "--gpus",
	"servers[0].name":                      "--name",
	"servers[0].model":                     "--model",
	"servers[0].api_key_env":               "--api-key-env",
	"servers[0].headers":                   "--header",
	"servers[0].ready.mode":                "--ready",
	"servers[0].ready.timeout":             "--ready-timeout",
	"servers[0].max_model_len":             "--max-model-len",
	"workload.concurrencies":               "--concurrency",
	"workload.repeats":                     "--repeats",
	"workload.max_tokens":                  "--max-tokens",
	"workload.temperature":                 "--temperature",
	"workload.timeout":                     "--timeout",
	"workload.warmup_waves":                "--warmup-waves",
	"workload.warmup_waves_per_load":       "--warmup-waves-per-load",
	"workload.warmup_concurrency":          "--warmup-concurrency",
	"workload.endpoint":                    "--endpoint",
	"workload.extra_body":                  "--extra-body",
	"workload.request_id_prefix":           "--request-id-prefix",
	"workload.num_warmups":                 "--num-warmups",
	"workload.sessions":                    "--multi-turn",
	"workload.sustained.num_requests":      "--num-requests",
	"workload.sustained.duration":          "--duration",
	"workload.sustained.warmup_requests":   "--warmup-requests",
	"workload.open_loop.request_rates_rps": "--request-rate",
	"workload.open_loop.arrival":           "--arrival",
	"workload.open_loop.burstiness":        "--burstiness",
	"workload.open_loop.num_requests":      "--num-requests",
	"workload.open_loop.duration":          "--duration",
	"workload.open_loop.max_concurrency":   "--max-concurrency",
	"workload.open_loop.ramp":              "--ramp-up-strategy",
	"workload.open_loop.ramp.start_rps":    "--ramp-up-start-rps",
	"workload.open_loop.ramp.end_rps":      "--ramp-up-end-rps",
	"workload.open_loop.pacing":            "--request-rate",
	"workload.models":                      "--lora-modules",
	"workload.side_probes":                 "--probe-request-rate",
	"slo":                                  "--slo",
	"cost":                                 "--gpu-hour-cost",
	"cost.gpus":                            "--gpus",
	"tokenizer":                            "--tokenizer",
	"segment":                              "--segment",
}

// promptFlagOf names, per dataset, the flag that set each field of
// workload.prompts ("" is bench without --dataset-name: --prompts).
var promptFlagOf = map[string]map[string]string{
	"":              {"path": "--prompts"},
	datasetRandom:   {"input_len": "--random-input-len", "output_len": "--random-output-len", "prefix_len": "--random-prefix-len", "count": "--num-prompts"},
	datasetPrefix:   {"prefix_len": "--prefix-repetition-prefix-len", "suffix_len": "--prefix-repetition-suffix-len", "num_prefixes": "--prefix-repetition-num-prefixes", "output_len": "--prefix-repetition-output-len", "count": "--num-prompts"},
	datasetShareGPT: {"path": "--dataset-path", "count": "--num-prompts", "max_model_len": "--max-model-len", "output_len": "--sharegpt-output-len"},
	datasetCustom:   {"path": "--dataset-path", "count": "--num-prompts"},
	datasetChat:     {"path": "--dataset-path", "count": "--num-prompts", "max_model_len": "--max-model-len"},
	datasetMooncake: {"path": "--dataset-path", "count": "--num-prompts", "time_scale": "--trace-time-scale", "block_size": "--trace-block-size"},
	datasetAzure:    {"path": "--dataset-path", "count": "--num-prompts", "time_scale": "--trace-time-scale", "block_size": "--trace-block-size"},
}

// flagOf is the flag that set the field at path (see benchFlagOf): a
// field of the prompts is its dataset's flag (promptFlagOf; the dataset
// itself where no one flag set it), and an open loop's own problems are
// its rate's, or its ramp's.
func (o *Bench) flagOf(path string) string {
	if rest, ok := strings.CutPrefix(path, "workload.prompts"); ok {
		field, _, _ := strings.Cut(strings.TrimLeft(rest, "."), "[")
		if flag, ok := promptFlagOf[o.dataset.name][field]; ok {
			return flag
		}
		if o.dataset.name == "" {
			return "--prompts"
		}
		return "--dataset-name " + o.dataset.name
	}
	if path == "workload.open_loop" && o.ramp() {
		return "--ramp-up-strategy"
	}
	if path == "workload.open_loop" {
		return "--request-rate"
	}
	for p := path; p != ""; p = parentPath(p) {
		if flag, ok := benchFlagOf[p]; ok {
			return flag
		}
	}
	return path
}

// parentPath is path less its last element: "a.b[2]" → "a.b", "a.b" → "a".
func parentPath(path string) string {
	i := strings.LastIndexAny(path, ".[")
	if i < 0 {
		return ""
	}
	return path[:i]
}
