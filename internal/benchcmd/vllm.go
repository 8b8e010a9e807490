package benchcmd

import (
	"fmt"
	"io"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/endpoint"
	"github.com/rehearse/rehearse/internal/rehearsal"
	"github.com/rehearse/rehearse/internal/stream"
	"github.com/rehearse/rehearse/internal/vllmcli"
	"github.com/rehearse/rehearse/internal/workload"
)

// The flags of `vllm bench serve` that bench takes with vLLM's meaning,
// beyond those it had under vLLM's names already (bench.go,
// dataset.go), and those it refuses by name. The README's table
// "vllm bench serve flags" lists every one of them.

// vllmOptions are vllm bench serve's flags that map onto bench's own.
type vllmOptions struct {
	backend, endpointType string
	host                  string
	port                  int
	goodput               []string
	percentileMetrics     string
	metricPercentiles     string
	disableTqdm           bool
	trustRemoteCode       bool
	label                 string
	metadata              []string
	inputLen, outputLen   int
	temperature           float64
	topP, minP            float64
	topK                  int
	frequencyPenalty      float64
	presencePenalty       float64
	repetitionPenalty     float64
	logprobs              int
	servedModelName       string
	readyCheckTimeoutSec  int
	numWarmups            int
	tokenizerMode         string
	skipTokenizerInit     bool
	disableShuffle        bool
	customOutputLen       int
	sharegptOutputLen     int
	requestIDPrefix       string
	headers               []string
	insecure              bool
	skipChatTemplate      bool
	chatTemplateKwargs    string
	useBeamSearch         bool
	loraModules           []string
	loraAssignment        string
	probeRequestRate      float64

	// serve is rehearse bench serve: vLLM's defaults, vLLM's body style,
	// pacing and result file (serve.go).
	serve bool
	// requestRate and burstiness are --request-rate and --burstiness as
	// given (or vLLM's defaults), before they are mapped.
	requestRate, burstiness float64
	// metadataPairs are --metadata's pairs, in order.
	metadataPairs []vllmcli.KeyValue
	// headerPairs are --header's pairs, in order; their values are secrets.
	headerPairs []config.Header

	// changed are the flags given on the command line.
	changed map[string]bool
	// consumed are open-loop flags a vLLM meaning has already used.
	consumed map[string]bool
	// bounded says --num-prompts bounds the run, as vLLM's total of
	// requests: one repeat unless --repeats says otherwise.
	bounded bool
	// modelID is --model when --served-model-name names the requests'
	// model: the tokenizer's model.
	modelID string
	// metrics and percentiles are what the summary's percentile block
	// shows (printed when --percentile-metrics or --metric-percentiles is
	// given).
	metrics     []string
	percentiles []float64
	// notes go into the bundle's notes (--metadata).
	notes []string
	// models are --lora-modules assigned as --lora-assignment says, and
	// sideProbes --probe-request-rate's probes (nil: none).
	models     *config.Models
	sideProbes *config.SideProbes
}

// vLLM's defaults of the flags whose default bench shows.
const (
	vllmDefaultHost        = "127.0.0.1"
	vllmDefaultPort        = 8000
	vllmDefaultMetrics     = "ttft,tpot,itl"
	vllmDefaultPercentiles = "99"
)

func vllmFlags(f *pflag.FlagSet, v *vllmOptions) {
	f.StringVar(&v.backend, "backend", "", "vllm bench serve's API: openai or vllm (completions: prompt, choices[0].text; --endpoint defaults to /v1/completions), openai-chat (chat completions, /v1/chat/completions); default: the API of --endpoint")
	f.StringVar(&v.endpointType, "endpoint-type", "", "older vllm bench serve's name of --backend")
	f.StringVar(&v.host, "host", vllmDefaultHost, "with --port, instead of --base-url: the server is http://HOST:PORT")
	f.IntVar(&v.port, "port", vllmDefaultPort, "with --host, instead of --base-url: the server's port")
	f.StringArrayVar(&v.goodput, "goodput", nil, "vllm bench serve's objectives KEY:VALUE in ms, space-separated (ttft:500 tpot:50; keys ttft, tpot, e2el): the same as --slo 'ttft<=500ms,tpot<=50ms'")
	f.StringVar(&v.percentileMetrics, "percentile-metrics", vllmDefaultMetrics, "metrics of the summary's percentile block, comma-separated: ttft, tpot, itl, e2el (the bundle keeps every one)")
	f.StringVar(&v.metricPercentiles, "metric-percentiles", vllmDefaultPercentiles, "percentiles of the summary's percentile block, comma-separated, e.g. 25,50,99")
	f.BoolVar(&v.disableTqdm, "disable-tqdm", false, "no progress view (--progress never)")
	f.BoolVar(&v.trustRemoteCode, "trust-remote-code", false, "accepted: rehearse reads tokenizer.json and runs no code from a model's repository")
	f.StringVar(&v.label, "label", "", "the results' label: the server's name in the bundle (--name)")
	f.StringArrayVar(&v.metadata, "metadata", nil, "KEY=VALUE pairs, space-separated, kept as notes of the bundle")
	f.IntVar(&v.inputLen, "input-len", 0, "vLLM's general input length: --random-input-len")
	f.IntVar(&v.outputLen, "output-len", 0, "vLLM's general output length: --random-output-len, --prefix-repetition-output-len, --sharegpt-output-len or --custom-output-len, by --dataset-name")
	f.Float64Var(&v.temperature, "temperature", 0, "temperature of every request (rehearse sends 0 unless told)")
	f.Float64Var(&v.topP, "top-p", 0, "top_p of every request (sent only when given; --extra-body wins)")
	f.IntVar(&v.topK, "top-k", 0, "top_k of every request (sent only when given; --extra-body wins)")
	f.Float64Var(&v.minP, "min-p", 0, "min_p of every request (sent only when given; --extra-body wins)")
	f.Float64Var(&v.frequencyPenalty, "frequency-penalty", 0, "frequency_penalty of every request (sent only when given; --extra-body wins)")
	f.Float64Var(&v.presencePenalty, "presence-penalty", 0, "presence_penalty of every request (sent only when given; --extra-body wins)")
	f.Float64Var(&v.repetitionPenalty, "repetition-penalty", 0, "repetition_penalty of every request (sent only when given; --extra-body wins)")
	f.IntVar(&v.logprobs, "logprobs", 0, "logprobs per token: completions logprobs N, chat logprobs true with top_logprobs N")
	f.StringVar(&v.servedModelName, "served-model-name", "", "the model name the requests send, when it is not --model (whose tokenizer is then used)")
	f.IntVar(&v.readyCheckTimeoutSec, "ready-check-timeout-sec", 0, "above 0: --ready full with --ready-timeout of this many seconds")
	f.IntVar(&v.numWarmups, "num-warmups", 0, "warm-up requests of the sustained closed loop: --warmup-requests")
	f.StringVar(&v.tokenizerMode, "tokenizer-mode", "auto", "auto or hf: rehearse reads the Hugging Face tokenizer.json (other modes are refused)")
	f.BoolVar(&v.skipTokenizerInit, "skip-tokenizer-init", false, "count output tokens with the server's usage (--tokenizer usage)")
	f.BoolVar(&v.disableShuffle, "disable-shuffle", false, "accepted: rehearse sends sharegpt, custom and chat datasets in file order")
	f.IntVar(&v.customOutputLen, "custom-output-len", 0, "max_tokens of --dataset-name custom prompts (--max-tokens)")
	f.IntVar(&v.sharegptOutputLen, "sharegpt-output-len", 0, "max_tokens of every --dataset-name sharegpt prompt instead of its reply's length")
	f.StringVar(&v.requestIDPrefix, "request-id-prefix", "", "send each request with the header x-request-id: this prefix and its prompt's index, as vLLM does (bench serve's default: bench-<8 random hex>-; warm-ups carry none)")
	f.StringArrayVar(&v.headers, "header", nil, "KEY=VALUE headers sent with every request, space-separated; the values are secrets, never written or shown")
	f.BoolVar(&v.insecure, "insecure", false, "do not verify the server's TLS certificate (self-signed servers)")
	f.BoolVar(&v.useBeamSearch, "use-beam-search", false, "accepted: vLLM main parses it and sends nothing different")
	f.BoolVar(&v.skipChatTemplate, "skip-chat-template", false, "send custom prompts as they are; bench serve otherwise renders each through the tokenizer's chat template (the tokenizer_config.json beside its tokenizer.json)")
	f.StringVar(&v.chatTemplateKwargs, "chat-template-kwargs", "", "JSON object of extra chat template variables for custom prompts rendered on the client (bench serve), e.g. '{\"enable_thinking\":false}'")
	f.StringArrayVar(&v.loraModules, "lora-modules", nil, "LoRA adapters the server serves, space-separated: each prompt's requests ask for one as their model, assigned by --lora-assignment (warm-ups and probes ask for --model); each must be in the server's /v1/models, and each record keeps its own")
	f.StringVar(&v.loraAssignment, "lora-assignment", config.VLLMDefaultLoRAAssignment, "how --lora-modules go to the prompts: random (drawn with --seed as vLLM's random.choice draws them) or round-robin")
	f.Float64Var(&v.probeRequestRate, "probe-request-rate", 0, "above 0: beside each recorded wave, probes of one token (prompt \"Hi\") one at a time, the next 1/RATE s after the last ended, outside --max-concurrency; their latency reported apart")
	for _, r := range vllmRefused {
		if r.noValue {
			f.Bool(r.name, false, r.why)
		} else {
			f.StringArray(r.name, nil, r.why)
		}
		_ = f.MarkHidden(r.name)
	}
}

// VLLMFlags adds to f, bound to nothing, vllm bench serve's flags that
// bench takes beyond its own or refuses by name: the list the README's
// table of them must cover. Only the tests that hold that table call it.
func VLLMFlags(f *pflag.FlagSet) { vllmFlags(f, new(vllmOptions)) }

// Refused are vllm bench serve's flags that bench refuses by name, each
// with why (the error's text after the flag's name). Only the tests that
// hold the README's table call it.
func Refused() map[string]string {
	out := map[string]string{}
	for _, r := range vllmRefused {
		out[r.name] = r.why
	}
	return out
}

// refusedFlag is a vllm bench serve flag bench refuses, and why.
type refusedFlag struct {
	name    string
	noValue bool // argparse's store_true: takes no value
	why     string
}

// vllmRefused are vllm bench serve's flags with no equivalent in bench,
// each with what to use instead.
var vllmRefused = []refusedFlag{
	{"profile", true, "rehearse does not drive vLLM's profiler (start it on the server)"},
	{"self-timed", true, timedTrace},
	{"no-self-timed", true, timedTrace},
	{"plot-timeline", true, "the bundle's report has the plots (rehearse report DIR)"},
	{"timeline-itl-thresholds", false, "the bundle's report has the plots (rehearse report DIR)"},
	{"plot-dataset-stats", true, "the bundle's report has the plots (rehearse report DIR)"},
	{"no-stream", true, "applies to vLLM's Hugging Face datasets, which rehearse does not read"},
	{"no-oversample", true, "rehearse never oversamples: requests go through the dataset's prompts in turn"},
	{"enable-multimodal-chat", true, "rehearse sends text prompts only"},
	{"spec-bench-output-len", false, "applies to vLLM's spec_bench dataset, which rehearse does not read"},
	{"spec-bench-category", false, "applies to vLLM's spec_bench dataset, which rehearse does not read"},
	{"sonnet-input-len", false, "applies to vLLM's sonnet dataset, which rehearse does not read (use --dataset-name random)"},
	{"sonnet-output-len", false, "applies to vLLM's sonnet dataset, which rehearse does not read (use --dataset-name random)"},
	{"sonnet-prefix-len", false, "applies to vLLM's sonnet dataset, which rehearse does not read (use --dataset-name random --random-prefix-len)"},
	{"blazedit-min-distance", false, "applies to vLLM's blazedit dataset, which rehearse does not read"},
	{"blazedit-max-distance", false, "applies to vLLM's blazedit dataset, which rehearse does not read"},
	{"random-batch-size", false, "applies to embeddings benchmarks: rehearse rehearses text generation"},
	{"no-reranker", true, "applies to reranker benchmarks: rehearse rehearses text generation"},
	{"random-mm-base-items-per-request", false, "rehearse sends text prompts only (vLLM's random-mm dataset)"},
	{"random-mm-num-mm-items-range-ratio", false, "rehearse sends text prompts only (vLLM's random-mm dataset)"},
	{"random-mm-limit-mm-per-prompt", false, "rehearse sends text prompts only (vLLM's random-mm dataset)"},
	{"random-mm-bucket-config", false, "rehearse sends text prompts only (vLLM's random-mm dataset)"},
	{"hf-subset", false, "rehearse reads no Hugging Face dataset: convert it to JSONL (--dataset-name custom or chat)"},
	{"hf-split", false, "rehearse reads no Hugging Face dataset: convert it to JSONL (--dataset-name custom or chat)"},
	{"hf-name", false, "rehearse reads no Hugging Face dataset: convert it to JSONL (--dataset-name custom or chat)"},
	{"hf-output-len", false, "rehearse reads no Hugging Face dataset: convert it to JSONL (--dataset-name custom or chat)"},
	{"bfcl-categories", false, "applies to vLLM's BFCL tool-calling dataset (a Hugging Face dataset), which rehearse does not read: convert it to chat JSONL (--dataset-name chat)"},
	{"custom-ensure-client-side-data", true, "applies to vLLM's custom_image dataset: rehearse sends text prompts only"},
	{"speed-bench-dataset-subset", false, "applies to vLLM's speed_bench dataset, which rehearse does not read"},
	{"speed-bench-output-len", false, "applies to vLLM's speed_bench dataset, which rehearse does not read"},
	{"speed-bench-category", false, "applies to vLLM's speed_bench dataset, which rehearse does not read"},
	{"asr-max-audio-len-sec", false, "applies to vLLM's audio (ASR) datasets: rehearse rehearses text generation"},
	{"asr-min-audio-len-sec", false, "applies to vLLM's audio (ASR) datasets: rehearse rehearses text generation"},
	{"timed-trace-chunk-hash-size", false, timedTrace + " (its hash block is --trace-block-size)"},
	{"timed-trace-sec-multiplier", false, timedTrace + " (scale its times with --trace-time-scale)"},
	{"timed-trace-label-timestamp", false, timedTrace + ", whose fields are Mooncake's"},
	{"timed-trace-label-input-length", false, timedTrace + ", whose fields are Mooncake's"},
	{"timed-trace-label-output-length", false, timedTrace + ", whose fields are Mooncake's"},
	{"timed-trace-label-hash-ids", false, timedTrace + ", whose fields are Mooncake's"},
}

// timedTrace is the refusal of vLLM's timed_trace flags.
const timedTrace = "applies to vLLM's timed_trace dataset: replay a Mooncake trace at its own times with --dataset-name mooncake --dataset-path FILE"

// vllmDatasets are vllm bench serve's dataset names that rehearse does not
// read, for --dataset-name's refusal.
var vllmDatasets = []string{"burstgpt", "sonnet", "random-mm", "random-rerank", "hf", "custom_audio", "custom_image", "custom_mm", "spec_bench", "speed_bench", "timed_trace", "txt-slices"}

// vllmBackends are vllm bench serve's backends that are not text
// generation over the chat or completions API.
var vllmBackends = []string{"openai-responses", "openai-audio", "openai-embeddings", "openai-embeddings-chat", "openai-embeddings-clip", "openai-embeddings-vlm2vec",
	"infinity-embeddings", "infinity-embeddings-clip", "vllm-pooling", "vllm-rerank"}

// vllmMultiValued are vllm bench serve's flags of nargs "+" or "*": every
// value up to the next flag is theirs.
var vllmMultiValued = map[string]bool{"goodput": true, "metadata": true, "header": true, "lora-modules": true}

// Args rewrites a bench command line written for vllm bench serve
// into one pflag reads with the same meaning: the values after a flag of
// several values (--goodput ttft:500 tpot:50) become one flag each, and a
// flag spelled with underscores (--num_prompts, which vLLM's parser
// accepts) gets dashes. Any other command line is returned as it is.
func Args(args []string) []string {
	if len(args) == 0 || args[0] != "bench" {
		return args
	}
	out := []string{args[0]}
	for i := 1; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		if !strings.HasPrefix(a, "--") {
			out = append(out, a)
			continue
		}
		name, value, hasValue := strings.Cut(a[2:], "=")
		name = strings.ReplaceAll(name, "_", "-")
		if hasValue || !vllmMultiValued[name] {
			if hasValue {
				out = append(out, "--"+name+"="+value)
			} else {
				out = append(out, "--"+name)
			}
			continue
		}
		n := 0
		for i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			i++
			n++
			out = append(out, "--"+name+"="+args[i])
		}
		if n == 0 {
			out = append(out, "--"+name) // pflag says it needs a value
		}
	}
	return out
}

// CheckRefused refuses the first vllm bench serve flag given that bench
// has no equivalent of.
func CheckRefused(f *pflag.FlagSet) error {
	for _, r := range vllmRefused {
		if f.Changed(r.name) {
			return usageError("--%s (vllm bench serve's): %s", r.name, r.why)
		}
	}
	return nil
}

// applyVLLM turns the vllm bench serve flags given into bench's own, with
// vLLM's meaning: the API of --backend, --host/--port, --goodput as --slo,
// --num-prompts as the bound of an open-loop or sustained run,
// --max-concurrency without --request-rate as the sustained closed loop
// (vLLM's rate is inf by default), --request-rate inf without
// --max-concurrency as every request released at once, --burstiness as
// gamma arrivals, the sampling flags as body fields.
func (o *Bench) applyVLLM(f *pflag.FlagSet) error {
	v := &o.vllm
	v.changed, v.consumed = map[string]bool{}, map[string]bool{}
	f.Visit(func(fl *pflag.Flag) { v.changed[fl.Name] = true })
	ch := v.changed
	if err := o.applyBackend(); err != nil {
		return err
	}
	if ch["host"] || ch["port"] {
		if o.baseURL != "" || len(o.baseURLs) > 0 {
			return usageError("--base-url and --host/--port: give one")
		}
		if v.port < 1 || v.port > 65535 {
			return usageError("--port %d: want 1 to 65535", v.port)
		}
		o.baseURL = "http://" + net.JoinHostPort(v.host, strconv.Itoa(v.port))
	}
	if len(v.goodput) > 0 {
		if o.slo.expr != "" {
			return usageError("--goodput and --slo: give one (--goodput ttft:500 tpot:50 is --slo 'ttft<=500ms,tpot<=50ms')")
		}
		expr, err := goodputSLO(v.goodput)
		if err != nil {
			return err
		}
		o.slo.expr = expr
	}
	if err := v.parsePercentiles(); err != nil {
		return err
	}
	if v.showPercentiles() {
		// --save-result's file holds the same percentiles, as vLLM's does.
		o.save.metrics, o.save.percentiles = v.metrics, v.percentiles
	}
	if v.disableTqdm {
		if ch["progress"] && o.progress != config.ProgressNever {
			return usageError("--disable-tqdm and --progress %s: give one", o.progress)
		}
		o.progress = config.ProgressNever
	}
	if err := o.applyRecordFlags(); err != nil {
		return err
	}
	if err := o.recordRate(); err != nil {
		return err
	}
	if err := o.applyLengths(); err != nil {
		return err
	}
	if ch["served-model-name"] {
		if o.model == "" {
			return usageError("--served-model-name needs --model: the model whose tokenizer counts the tokens")
		}
		v.modelID, o.model = o.model, v.servedModelName
	}
	if v.readyCheckTimeoutSec < 0 {
		return usageError("--ready-check-timeout-sec %d: want 0 (no check) or more", v.readyCheckTimeoutSec)
	}
	if v.readyCheckTimeoutSec > 0 {
		if ch["ready"] || ch["ready-timeout"] {
			return usageError("--ready-check-timeout-sec and --ready/--ready-timeout: give one")
		}
		o.ready, o.readyTimeout = config.ReadyFull, time.Duration(v.readyCheckTimeoutSec)*time.Second
	}
	switch v.tokenizerMode {
	case "auto", "hf":
	default:
		return usageError("--tokenizer-mode %q: rehearse reads the Hugging Face tokenizer.json (auto or hf)", v.tokenizerMode)
	}
	if v.skipTokenizerInit {
		if o.tokenizer != "" {
			return usageError("--skip-tokenizer-init and --tokenizer: give one (--skip-tokenizer-init is --tokenizer usage)")
		}
		o.tokenizer = rehearsal.VariantUsage
	}
	if v.disableShuffle && o.dataset.name == datasetPrefix {
		return usageError("--disable-shuffle: rehearse shuffles prefix_repetition prompts with --seed, always")
	}
	return o.applyLoad()
}

// applyRecordFlags maps what the run records and sends beside its load:
// --label (the server's name), --metadata (notes, and the result's keys),
// --header, and the LoRA adapters and side probes (applyApart).
func (o *Bench) applyRecordFlags() error {
	v := &o.vllm
	if v.changed["label"] {
		if v.changed["name"] {
			return usageError("--label and --name: give one (--label is the server's name in the bundle)")
		}
		o.name = v.label
	}
	v.metadataPairs = nil
	for _, kv := range v.metadata {
		p, ok := metadataPair(kv)
		if !ok {
			return usageError("--metadata %q: want KEY=VALUE", kv)
		}
		v.metadataPairs = append(v.metadataPairs, p)
		v.notes = append(v.notes, fmt.Sprintf("metadata %s=%s", p.Key, p.Value))
	}
	if err := v.parseHeaders(); err != nil {
		return err
	}
	return o.applyApart()
}

// applyApart maps --lora-modules and --lora-assignment (each prompt's
// model, config.Workload.Models, a random assignment seeded with --seed)
// and --probe-request-rate (side probes, config.Workload.SideProbes, with
// vLLM's prompt and length; 0, vLLM's default, sends none). Their values
// are checked with the rest of the rehearsal (config.Rehearsal.Validate,
// named by flag in flagof.go); here only what flags say together.
func (o *Bench) applyApart() error {
	v := &o.vllm
	v.models, v.sideProbes = nil, nil
	if a := v.loraAssignment; a != workload.AssignRandom && a != workload.AssignRoundRobin {
		return usageError("--lora-assignment %q: want %s or %s", a, workload.AssignRandom, workload.AssignRoundRobin)
	}
	if v.changed["lora-modules"] {
		v.models = &config.Models{Names: v.loraModules, Assignment: v.loraAssignment, Seed: o.seed}
	}
	if !v.changed["probe-request-rate"] || v.probeRequestRate == 0 {
		return nil
	}
	if o.seg.segment != "" || o.seg.workers > 0 {
		return usageError("--probe-request-rate: a split plan's workers would each send probes: run them in one process (no --segment or --workers)")
	}
	v.sideProbes = &config.SideProbes{RateRPS: v.probeRequestRate, Prompt: config.VLLMProbePrompt, MaxTokens: config.VLLMProbeMaxTokens}
	return nil
}

// applyBackend sets the endpoint of --backend (or --endpoint-type) and
// checks that --endpoint, when given too, is of its API.
func (o *Bench) applyBackend() error {
	v := &o.vllm
	backend, flag := v.backend, "--backend"
	if v.changed["endpoint-type"] {
		if v.changed["backend"] && v.endpointType != v.backend {
			return usageError("--backend %s and --endpoint-type %s: give one", v.backend, v.endpointType)
		}
		backend, flag = v.endpointType, "--endpoint-type"
	}
	if !v.changed["backend"] && !v.changed["endpoint-type"] {
		flag = "vLLM's default --backend"
	}
	var completions bool
	switch backend {
	case "":
		return nil
	case "openai", "vllm":
		completions = true
	case "openai-chat":
	default:
		if slices.Contains(vllmBackends, backend) {
			return usageError("%s %s: rehearse rehearses text generation over the completions or chat API: use openai (or vllm) or openai-chat", flag, backend)
		}
		return usageError("%s %q: want openai or vllm (the completions API) or openai-chat (chat completions)", flag, backend)
	}
	if !v.changed["endpoint"] {
		o.endpoint = endpoint.Default
		if completions {
			o.endpoint = endpoint.Completions
		}
		return nil
	}
	if endpoint.IsCompletions(o.endpoint) != completions {
		return usageError("%s %s sends the %s API, and --endpoint %s is a %s path: use %s", flag, backend,
			map[bool]string{true: "completions", false: "chat"}[completions], o.endpoint, endpoint.API(o.endpoint),
			map[bool]string{true: "--backend openai-chat for chat, or --endpoint /v1/completions", false: "--backend openai for completions, or --endpoint /v1/chat/completions"}[completions])
	}
	return nil
}

// applyLengths maps --input-len and --output-len onto the flags of the
// dataset, and --custom-output-len and --sharegpt-output-len onto
// max_tokens, as vLLM does.
func (o *Bench) applyLengths() error {
	v, d := &o.vllm, &o.dataset
	if v.changed["input-len"] {
		if d.name != datasetRandom {
			return usageError("--input-len applies to --dataset-name random (it is --random-input-len)")
		}
		d.inputLen = v.inputLen
	}
	if v.changed["output-len"] {
		switch d.name {
		case datasetRandom:
			d.outputLen = v.outputLen
		case datasetPrefix:
			d.prefixOutputLen = v.outputLen
		case datasetShareGPT:
			v.sharegptOutputLen, v.changed["sharegpt-output-len"] = v.outputLen, true
		case datasetCustom:
			v.customOutputLen, v.changed["custom-output-len"] = v.outputLen, true
		default:
			return usageError("--output-len applies to --dataset-name random, prefix_repetition, sharegpt or custom; otherwise use --max-tokens")
		}
	}
	for flag, dataset := range map[string]string{"custom-output-len": datasetCustom, "sharegpt-output-len": datasetShareGPT} {
		if !v.changed[flag] {
			continue
		}
		n := v.customOutputLen
		if flag == "sharegpt-output-len" {
			n = v.sharegptOutputLen
		}
		switch {
		case d.name != dataset:
			return usageError("--%s applies to --dataset-name %s", flag, dataset)
		case v.changed["max-tokens"]:
			return usageError("--%s and --max-tokens: give one", flag)
		case n < 1:
			return usageError("--%s %d: want at least 1", flag, n)
		}
		o.maxTokens = n
		d.fixedOutputLen = dataset == datasetShareGPT
		d.fixedOutputTokens = n
	}
	return nil
}

// applyLoad maps vLLM's load flags: --max-concurrency alone (no rate, ramp
// or trace) is the sustained closed loop, --request-rate inf alone releases every request at
// once, --num-prompts bounds an open-loop (or ramp-up) or sustained run
// given no other bound, --burstiness means gamma arrivals, --num-warmups is the sustained
// loop's warm-up.
func (o *Bench) applyLoad() error {
	v := &o.vllm
	shaped := o.ramp() || o.dataset.trace() // open-loop waves without --request-rate
	if v.changed["max-concurrency"] && len(o.requestRates) == 0 && !o.closedSet && !shaped {
		if o.maxConcurrency < 1 {
			return usageError("--max-concurrency %d: want at least 1, the clients of the sustained closed loop", o.maxConcurrency)
		}
		// vLLM's --request-rate is inf by default.
		o.requestRates = []float64{math.Inf(1)}
	}
	if v.changed["burstiness"] && !(o.burstiness > 0) {
		return usageError("--burstiness %v: want a positive gamma shape (1: Poisson, below 1 burstier)", o.burstiness)
	}
	bound := o.numRequests
	if bound == 0 && o.duration == 0 && o.dataset.numPrompts > 0 {
		bound = o.dataset.numPrompts
	}
	if o.sustained() && !v.changed["max-concurrency"] && len(o.requestRates) == 1 && !o.closedSet {
		// vLLM: every request at time 0 — one closed wave of them all.
		if o.duration > 0 {
			return usageError("--request-rate inf without --max-concurrency sends every request at once: --duration does not apply (bound it with --num-prompts)")
		}
		if bound < 1 {
			return usageError("--request-rate inf without --max-concurrency sends --num-prompts requests at once: give --num-prompts N (at least 1)")
		}
		o.requestRates, o.concurrencies, o.closedSet = nil, []int{bound}, true
		v.consumed["num-requests"], v.bounded = true, true
	}
	if (len(o.requestRates) > 0 || o.ramp()) && o.numRequests == 0 && o.duration == 0 {
		o.numRequests = bound
		v.bounded = true
	}
	if v.bounded && o.dataset.name == datasetCustom {
		// Here --num-prompts is the run's bound, as in vLLM, not a count
		// of the file's prompts.
		o.dataset.numPromptsSet = false
	}
	if v.bounded && !v.changed["repeats"] {
		// vLLM's run is --num-prompts requests in all: one wave of them.
		o.repeats = 1
	}
	if v.changed["burstiness"] && !v.changed["arrival"] && !o.sustained() {
		o.arrival = "gamma"
	}
	if v.changed["num-warmups"] {
		switch {
		case v.numWarmups < 0:
			return usageError("--num-warmups %d: want 0 or more", v.numWarmups)
		case v.numWarmups > 0 && (o.warmupWaves > 0 || o.warmupRequestsSet):
			return usageError("--num-warmups and --warmup-waves/--warmup-requests: give one")
		case v.numWarmups > 0 && o.dataset.multiTurn:
			return usageError("--num-warmups: multi-turn sessions warm up with --warmup-waves")
		}
		o.numWarmups = v.numWarmups
	}
	return o.serveLoad()
}

// recordRate keeps --request-rate and --burstiness as given, for vLLM's
// result file: vLLM takes one rate.
func (o *Bench) recordRate() error {
	v := &o.vllm
	v.requestRate, v.burstiness = math.Inf(1), o.burstiness
	switch {
	case len(o.requestRates) == 1:
		v.requestRate = o.requestRates[0]
	case len(o.requestRates) > 1 && v.serve:
		return usageError("--request-rate: vllm bench serve takes one rate (rehearse bench takes several, comma-separated)")
	}
	if v.serve && !(o.burstiness > 0) {
		return usageError("--burstiness %v: want a positive gamma shape (1: Poisson, below 1 burstier, inf: evenly spaced)", o.burstiness)
	}
	return nil
}

// parseHeaders splits --header's KEY=VALUE pairs as vLLM does (at the
// first =, both sides trimmed). An error names the pair by its position
// and key, never its value.
func (v *vllmOptions) parseHeaders() error {
	v.headerPairs = nil
	for i, kv := range v.headers {
		k, val, ok := strings.Cut(kv, "=")
		k, val = strings.TrimSpace(k), strings.TrimSpace(val)
		if !ok || k == "" {
			return usageError("--header (value %d of %d): want KEY=VALUE (the value is not shown)", i+1, len(v.headers))
		}
		if _, err := stream.Prepare(stream.Request{BaseURL: "http://127.0.0.1", Headers: []stream.Header{{Name: k, Value: val}}}); err != nil {
			return usageError("--header: %v", err)
		}
		v.headerPairs = append(v.headerPairs, config.Header{Name: k, Value: val})
	}
	return nil
}

// sampling adds the sampling flags given to the request body, under
// extra (whose own keys win, as vLLM merges them).
func (v *vllmOptions) sampling(extra map[string]any, completions bool) map[string]any {
	fields := map[string]any{}
	for flag, val := range map[string]any{"top-p": v.topP, "top-k": v.topK, "min-p": v.minP,
		"frequency-penalty": v.frequencyPenalty, "presence-penalty": v.presencePenalty, "repetition-penalty": v.repetitionPenalty} {
		if v.changed[flag] {
			fields[strings.ReplaceAll(flag, "-", "_")] = val
		}
	}
	if v.serve && v.changed["temperature"] {
		// vLLM's body has no temperature of its own: its flag is a sampling field.
		fields["temperature"] = v.temperature
	}
	if v.serve && !completions {
		// vLLM's chat request sends no logprobs.
	} else if v.changed["logprobs"] {
		if completions {
			fields["logprobs"] = v.logprobs
		} else {
			fields["logprobs"], fields["top_logprobs"] = true, v.logprobs
		}
	}
	if len(fields) == 0 {
		return extra
	}
	for k, val := range extra {
		fields[k] = val
	}
	return fields
}

// goodputSLO turns vLLM's --goodput pairs (KEY:VALUE in ms, keys ttft,
// tpot, e2el) into --slo's objectives.
func goodputSLO(pairs []string) (string, error) {
	var objs []string
	for _, p := range pairs {
		k, val, ok := strings.Cut(p, ":")
		ms, err := strconv.ParseFloat(val, 64)
		if !ok || err != nil || strings.Contains(val, ":") {
			return "", usageError("--goodput %q: want KEY:VALUE with the value in milliseconds, e.g. ttft:500", p)
		}
		switch k {
		case "ttft", "tpot", "e2el":
		default:
			return "", usageError("--goodput %q: the key is ttft, tpot or e2el (as in vLLM; for itl use --slo 'itl<=50ms')", p)
		}
		if ms < 0 || math.IsInf(ms, 0) || math.IsNaN(ms) {
			return "", usageError("--goodput %q: want a non-negative number of milliseconds", p)
		}
		objs = append(objs, k+"<="+strconv.FormatFloat(ms, 'f', -1, 64)+"ms")
	}
	return strings.Join(objs, ","), nil
}

// parsePercentiles checks --percentile-metrics and --metric-percentiles.
func (v *vllmOptions) parsePercentiles() error {
	v.metrics, v.percentiles = nil, nil
	for _, m := range strings.Split(v.percentileMetrics, ",") {
		m = strings.TrimSpace(m)
		switch m {
		case "ttft", "tpot", "itl", "e2el":
			v.metrics = append(v.metrics, m)
		case "client_queue_time", "e2el_including_client_queue":
			return usageError("--percentile-metrics %s: not yet in rehearse (the records keep each request's intended and actual send times)", m)
		default:
			return usageError("--percentile-metrics %q: want ttft, tpot, itl or e2el, comma-separated", m)
		}
	}
	for _, s := range strings.Split(v.metricPercentiles, ",") {
		p, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || !(p > 0 && p <= 100) {
			return usageError("--metric-percentiles %q: want percentiles above 0 and at most 100, comma-separated, e.g. 50,90,99", v.metricPercentiles)
		}
		v.percentiles = append(v.percentiles, p)
	}
	return nil
}

// showPercentiles reports whether the summary prints the percentile block.
func (v *vllmOptions) showPercentiles() bool {
	return v.changed["percentile-metrics"] || v.changed["metric-percentiles"]
}

// metricTitle is vLLM's name of each metric in its summary.
var metricTitle = map[string]string{"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "e2el": "E2EL"}

// printPercentiles prints, per load of res, the mean, median and each
// percentile of the metrics chosen, in ms, over the load's successful
// requests, as vllm bench serve's summary names them.
func printPercentiles(w io.Writer, res *bundle.Results, metrics []string, percentiles []float64) {
	for _, a := range res.Aggregates {
		l := contract.PooledLatencies(res.Waves, res.Records, a.Key())
		fmt.Fprintf(w, "\n---- %s, %s: latencies (ms) over %d ok requests ----\n", a.Server, a.LoadLabel(), len(l.E2E))
		for _, m := range metrics {
			xs := map[string][]float64{"ttft": l.TTFT, "tpot": l.TPOT, "itl": l.ITL, "e2el": l.E2E}[m]
			sorted := slices.Clone(xs)
			slices.Sort(sorted)
			row := func(name string, v *float64) {
				s := "—"
				if v != nil {
					s = strconv.FormatFloat(*v*1000, 'f', 2, 64)
				}
				fmt.Fprintf(w, "%-40s %s\n", name+" "+metricTitle[m]+" (ms):", s)
			}
			var mean *float64
			if len(xs) > 0 {
				s := 0.0
				for _, x := range xs {
					s += x
				}
				s /= float64(len(xs))
				mean = &s
			}
			row("Mean", mean)
			row("Median", contract.Percentile(sorted, 0.5))
			for _, p := range percentiles {
				row("P"+strconv.FormatFloat(p, 'f', -1, 64), contract.Percentile(sorted, p/100))
			}
		}
	}
}
