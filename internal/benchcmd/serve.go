package benchcmd

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/export"
	"github.com/rehearse/rehearse/internal/rehearsal"
	"github.com/rehearse/rehearse/internal/vllmcli"
	"github.com/rehearse/rehearse/internal/workload"
)

// rehearse bench serve is `vllm bench serve` with vllm replaced by
// rehearse: bench's flags, one mapping of vLLM's (vllm.go), and
// vLLM's defaults (config.VLLMDefault*) for every flag not given.

// ShowServeDefaults makes bench serve's help show vLLM's defaults where
// they are not bench's (applyServeDefaults sets them).
func ShowServeDefaults(f *pflag.FlagSet) {
	for name, def := range vllmDefaultsShown {
		if fl := f.Lookup(name); fl != nil {
			fl.DefValue = def
		}
	}
}

// vllmDefaultsShown are the defaults bench serve's help shows where they
// are vLLM's, not bench's (applyServeDefaults sets them).
var vllmDefaultsShown = map[string]string{
	"backend": config.VLLMDefaultBackend, "endpoint": config.VLLMDefaultEndpoint, "dataset-name": config.VLLMDefaultDataset,
	"request-rate": "inf", "burstiness": "1", "repeats": strconv.Itoa(config.VLLMDefaultRepeats),
	"timeout": config.VLLMDefaultTimeout.String(), "percentile-metrics": config.VLLMDefaultPercentileMetrics,
	"request-id-prefix": config.VLLMRequestIDPrefix + "<8 random hex>-", "custom-output-len": strconv.Itoa(config.VLLMDefaultCustomOutputLen),
}

// applyServeDefaults gives every flag of bench serve that was not given
// vLLM's default; nothing for bench.
func (o *Bench) applyServeDefaults(f *pflag.FlagSet) error {
	v := &o.vllm
	if !v.serve && f.Changed("chat-template-kwargs") {
		return usageError("--chat-template-kwargs: only rehearse bench serve renders custom prompts through the chat template")
	}
	if !v.serve {
		return nil
	}
	given := f.Changed
	if !given("base-url") && !given("host") && !given("port") {
		o.baseURL = "http://" + net.JoinHostPort(vllmDefaultHost, strconv.Itoa(vllmDefaultPort)) // vLLM's --host and --port
	}
	if !given("backend") && !given("endpoint-type") {
		v.backend = config.VLLMDefaultBackend
	}
	if !given("dataset-name") && o.promptsPath == "" {
		o.dataset.name = config.VLLMDefaultDataset
	}
	if !given("num-prompts") {
		o.dataset.numPrompts = config.VLLMDefaultNumPrompts
	}
	backend := v.backend
	if given("endpoint-type") {
		backend = v.endpointType
	}
	if o.dataset.name == datasetRandom && slices.Contains(vllmOpenAICompatible, backend) {
		// vLLM turns ignore_eos on for random prompts on these backends,
		// so every request runs to its --random-output-len.
		o.dataset.ignoreEOS = true
	}
	if !given("request-rate") && len(o.rampSet) == 0 && !o.dataset.trace() {
		o.requestRates = []float64{config.VLLMDefaultRequestRate}
	}
	if !given("burstiness") {
		o.burstiness = config.VLLMDefaultBurstiness
	}
	if !given("repeats") {
		o.repeats = config.VLLMDefaultRepeats
	}
	if !given("timeout") {
		o.timeout = config.VLLMDefaultTimeout
	}
	if !given("warmup-requests") {
		o.warmupRequests = 0
	}
	if !given("percentile-metrics") {
		v.percentileMetrics = config.VLLMDefaultPercentileMetrics
	}
	if !given("request-id-prefix") {
		v.requestIDPrefix = config.VLLMRequestIDPrefix + randomHex(4) + "-"
	}
	if !given("api-key-env") && os.Getenv(config.VLLMAPIKeyEnv) != "" {
		o.apiKeyEnv = config.VLLMAPIKeyEnv
	}
	if o.dataset.name == datasetShareGPT {
		// vLLM samples ShareGPT with its seed (CPython's shuffle) and its length checks.
		o.dataset.order = workload.OrderVLLM
		if v.disableShuffle {
			o.dataset.order = workload.OrderVLLMUnshuffled
		}
	}
	if o.dataset.name == datasetCustom && !given("custom-output-len") && !given("output-len") && !given("max-tokens") {
		o.maxTokens = config.VLLMDefaultCustomOutputLen
	}
	if err := v.chatTemplate(o, given("chat-template-kwargs")); err != nil {
		return err
	}
	if given("multi-turn") {
		return usageError("--multi-turn: vllm bench serve has no multi-turn sessions; use rehearse bench --multi-turn")
	}
	return nil
}

// chatTemplate sets custom prompts to be rendered through the tokenizer's
// chat template on the client, as vLLM's custom dataset does unless
// --skip-chat-template, with --chat-template-kwargs (a JSON object) as
// extra template variables.
func (v *vllmOptions) chatTemplate(o *Bench, kwargsGiven bool) error {
	render := o.dataset.name == datasetCustom && !v.skipChatTemplate
	if kwargsGiven && !render {
		return usageError("--chat-template-kwargs: rehearse renders a chat template only for --dataset-name custom without --skip-chat-template; for the server's template use --extra-body '{\"chat_template_kwargs\":{...}}'")
	}
	if !render {
		return nil
	}
	o.dataset.chatTemplate = true
	if kwargsGiven {
		if err := json.Unmarshal([]byte(v.chatTemplateKwargs), &o.dataset.chatTemplateKwargs); err != nil || o.dataset.chatTemplateKwargs == nil {
			return usageError("--chat-template-kwargs %s: not a JSON object", v.chatTemplateKwargs)
		}
	}
	return nil
}

// vllmOpenAICompatible are the text backends of vLLM's
// OPENAI_COMPATIBLE_BACKENDS that rehearse sends.
var vllmOpenAICompatible = []string{"openai", "vllm", "openai-chat"}

// randomHex is n random bytes in hex, as Python's uuid4().hex[:2n].
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// serveLoad maps bench serve's load onto rehearse's with vLLM's meaning,
// once applyLoad has: a finite rate or a ramp is paced as vLLM paces it
// (workload.PacingVLLM), its arrivals gamma of --burstiness (1: Poisson,
// inf: every 1/rate), bounded by --num-prompts alone.
func (o *Bench) serveLoad() error {
	v := &o.vllm
	if !v.serve {
		return nil
	}
	if o.ramp() {
		if err := o.serveRamp(); err != nil {
			return err
		}
	}
	open := o.ramp() || (len(o.requestRates) > 0 && !o.sustained())
	// vLLM takes --burstiness and --seed with any rate (the seed also
	// shuffles its datasets): they are never refused as open-loop flags.
	v.consumed["burstiness"], v.consumed["seed"] = true, true
	if !open {
		return nil
	}
	if o.duration > 0 {
		return usageError("--duration: vllm bench serve's run is bounded by --num-prompts (use rehearse bench for a timed open loop)")
	}
	o.pacing = workload.PacingVLLM
	switch {
	case math.IsInf(o.burstiness, 1):
		o.arrival, o.burstiness = workload.ArrivalFixed, 0
	case o.burstiness == 1 && !v.changed["arrival"]:
		o.arrival, o.burstiness = workload.ArrivalPoisson, 0
	case !v.changed["arrival"]:
		o.arrival = workload.ArrivalGamma
	}
	return nil
}

// serveRamp checks a ramp-up as vLLM's main_async does, and that its first
// request, drawn at the start rate, has a rate above 0 (vLLM's get_request
// asserts it).
func (o *Bench) serveRamp() error {
	switch {
	case o.vllm.changed["request-rate"]:
		return usageError("--request-rate with --ramp-up-strategy: the ramp sets the rate (vLLM: remove --request-rate)")
	case !slices.Contains(o.rampSet, "ramp-up-start-rps") || !slices.Contains(o.rampSet, "ramp-up-end-rps"):
		return usageError("--ramp-up-strategy needs both --ramp-up-start-rps and --ramp-up-end-rps")
	case o.rampStartRPS != math.Trunc(o.rampStartRPS) || o.rampEndRPS != math.Trunc(o.rampEndRPS):
		return usageError("--ramp-up-start-rps %v, --ramp-up-end-rps %v: vLLM takes whole requests per second", o.rampStartRPS, o.rampEndRPS)
	case o.rampStartRPS > o.rampEndRPS:
		return usageError("--ramp-up-start-rps %v is above --ramp-up-end-rps %v (vLLM: the start must be less than the end)", o.rampStartRPS, o.rampEndRPS)
	case o.rampStartRPS < 1:
		return usageError("--ramp-up-start-rps %v: vLLM draws the first request's gap at the start rate, which must be at least 1", o.rampStartRPS)
	}
	o.requestRates = nil
	return nil
}

// vllmRun is what the result file records of the command line: for bench
// serve every value given, or vLLM's default; for bench, given --label,
// --metadata or --backend, those (each load's rate, concurrency and count
// then come from its waves); nil for bench without them.
func (o *Bench) vllmRun(modelID string) *vllmcli.Run {
	v := &o.vllm
	shaped := v.changed["label"] || v.changed["metadata"] || v.changed["backend"] || v.changed["endpoint-type"]
	if !v.serve && !shaped {
		return nil
	}
	run := &vllmcli.Run{Serve: v.serve, Backend: v.backend, ModelID: modelID, Metadata: v.metadataPairs}
	if v.serve || v.showPercentiles() {
		run.PercentileMetrics, run.MetricPercentiles = v.metrics, v.percentiles
	}
	if v.changed["label"] {
		run.Label = &v.label
	}
	if !v.skipTokenizerInit {
		tok := modelID
		if v.changed["tokenizer"] {
			tok = o.tokenizer
		}
		run.TokenizerID = &tok
	}
	if !v.serve {
		return run
	}
	run.NumPrompts = o.dataset.numPrompts
	if !v.changed["request-rate"] || o.ramp() {
		run.RequestRateRPS = nil
	} else if r := v.requestRate; !math.IsInf(r, 1) {
		run.RequestRateRPS = &r
	}
	if b := v.burstiness; !math.IsInf(b, 1) {
		run.Burstiness = &b
	}
	if v.changed["max-concurrency"] {
		c := o.maxConcurrency
		run.MaxConcurrency = &c
	}
	if o.ramp() {
		run.RampUp = &vllmcli.RampUp{Strategy: o.rampStrategy, StartRPS: int(o.rampStartRPS), EndRPS: int(o.rampEndRPS)}
	}
	return run
}

// printSummary prints, for bench serve, vLLM's "Serving Benchmark Result"
// block of each load (from the figures of its result file) before
// rehearse's own table; for bench, the table, then vLLM's percentile
// block where --percentile-metrics or --metric-percentiles asked for it.
func (o *Bench) printSummary(w io.Writer, res *bundle.Results) {
	if o.vllm.serve {
		for _, r := range export.VLLMResults(res, export.Options{}) {
			export.VLLMSummary(w, r.Object)
		}
		fmt.Fprintln(w)
	}
	rehearsal.PrintBench(w, res)
	if !o.vllm.serve && o.vllm.showPercentiles() {
		printPercentiles(w, res, o.vllm.metrics, o.vllm.percentiles)
	}
}

// metadataPair splits one --metadata KEY=VALUE as vLLM does (at the first
// =, both sides trimmed).
func metadataPair(kv string) (vllmcli.KeyValue, bool) {
	k, val, ok := strings.Cut(kv, "=")
	if !ok || strings.TrimSpace(k) == "" {
		return vllmcli.KeyValue{}, false
	}
	return vllmcli.KeyValue{Key: strings.TrimSpace(k), Value: strings.TrimSpace(val)}, true
}
