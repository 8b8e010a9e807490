package config

import (
	"math"
	"time"

	"github.com/rehearse/rehearse/internal/endpoint"
	"github.com/rehearse/rehearse/internal/workload"
)

// The defaults of vllm bench serve (vLLM main's vllm/benchmarks/serve.py
// and datasets.py), which rehearse bench serve takes for every flag not
// given; rehearse bench keeps its own. The mapping of each flag onto a
// rehearsal is one, in package cli; only these defaults differ.
const (
	// VLLMDefaultBackend is --backend: the completions API.
	VLLMDefaultBackend = "openai"
	// VLLMDefaultEndpoint is --endpoint.
	VLLMDefaultEndpoint = endpoint.Completions
	// VLLMDefaultDataset is --dataset-name.
	VLLMDefaultDataset = "random"
	// VLLMDefaultNumPrompts is --num-prompts: the requests of the run.
	VLLMDefaultNumPrompts = 1000
	// VLLMDefaultBurstiness is --burstiness: Poisson arrivals.
	VLLMDefaultBurstiness = 1.0
	// VLLMDefaultCustomOutputLen is --custom-output-len.
	VLLMDefaultCustomOutputLen = 256
	// VLLMDefaultPercentileMetrics and VLLMDefaultMetricPercentiles are
	// --percentile-metrics (for generative models) and --metric-percentiles.
	VLLMDefaultPercentileMetrics = "ttft,tpot,itl"
	VLLMDefaultMetricPercentiles = "99"
	// VLLMDefaultTimeout is vLLM's aiohttp timeout of a request: 6 hours.
	VLLMDefaultTimeout = 6 * time.Hour
	// VLLMDefaultRepeats: vLLM runs its requests once.
	VLLMDefaultRepeats = 1
	// VLLMDefaultNumWarmups is --num-warmups.
	VLLMDefaultNumWarmups = 0
	// VLLMAPIKeyEnv is the variable vLLM's request functions read the API
	// key from, when it is set.
	VLLMAPIKeyEnv = "OPENAI_API_KEY"
	// VLLMRequestIDPrefix begins --request-id-prefix's default,
	// "bench-" + 8 random hex digits + "-".
	VLLMRequestIDPrefix = "bench-"
	// VLLMDefaultLoRAAssignment is --lora-assignment.
	VLLMDefaultLoRAAssignment = workload.AssignRandom
	// VLLMProbePrompt and VLLMProbeMaxTokens are what each of vLLM's probe
	// requests sends (--probe-request-rate): the defaults of
	// workload.side_probes.
	VLLMProbePrompt    = "Hi"
	VLLMProbeMaxTokens = 1
)

// VLLMDefaultRequestRate is --request-rate: inf, every request at time 0.
var VLLMDefaultRequestRate = math.Inf(1)
