package config

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/rehearse/rehearse/internal/endpoint"
	"github.com/rehearse/rehearse/internal/secret"
	"github.com/rehearse/rehearse/internal/vllmcli"
	"github.com/rehearse/rehearse/internal/workload"
)

// Rehearsal is a rehearsal file after defaults. Field names are the YAML keys.
type Rehearsal struct {
	Model    Model    `yaml:"model"`
	Baseline string   `yaml:"baseline"`
	Servers  []Server `yaml:"servers"`
	Workload Workload `yaml:"workload"`
	// MechanismCheck is nil when the rehearsal has none (disabled, or no
	// server to run it on).
	MechanismCheck *MechanismCheck `yaml:"mechanism_check"`
	Tokenizer      Tokenizer       `yaml:"tokenizer"`
	Output         Output          `yaml:"output"`
	// OnServerFailure is "continue" (go on with the next server) or "stop".
	OnServerFailure string `yaml:"on_server_failure"`
	// Notes are copied into the bundle's notes.
	Notes []string `yaml:"notes"`
	// SLO is nil when the rehearsal judges requests against no objective.
	SLO *SLO `yaml:"slo"`
	// Capacity, when set, searches each rehearsed server's capacity under
	// SLO after its planned waves.
	Capacity *Capacity `yaml:"capacity"`
	// Cost, when set, prices the results per million output tokens.
	Cost *Cost `yaml:"cost"`
	// SegmentSpec is the file's segment: "i/N" runs worker i's share of
	// every wave of a plan split among N workers (SPEC §10), "auto/N"
	// takes i from $REHEARSE_SEGMENT_INDEX; "" runs the whole plan. The
	// --segment flag overrides it.
	SegmentSpec string `yaml:"segment"`
	// Segment is SegmentSpec parsed (the zero value: the whole plan).
	Segment Segment `yaml:"-"`
	// VLLM is the vllm bench serve command line the rehearsal came from
	// (rehearse bench serve), recorded for vLLM's result file; nil
	// otherwise.
	VLLM *vllmcli.Run `yaml:"-"`

	// Path is the file the rehearsal was read from ("" for bytes).
	Path string `yaml:"-"`
	// Dir is the folder relative paths are resolved against.
	Dir string `yaml:"-"`
}

// Model is the model under test, as provenance records it.
type Model struct {
	ID            string `yaml:"id"`
	Revision      string `yaml:"revision"`
	Dtype         string `yaml:"dtype"`
	RandomWeights bool   `yaml:"random_weights"`
	Note          string `yaml:"note"`
}

// Server is one server under test: launched by argv, or already running at
// BaseURL when Launch is empty.
type Server struct {
	Name string `yaml:"name"`
	// Launch is the argv; placeholders {port}, {rehearse}, {config_dir},
	// {model}, {revision}, {dtype}, {replica}, {gpus} and {scratch_dir}
	// are substituted (see Argv and ReplicaLaunch), in Env's values and
	// Prepare too.
	Launch []string          `yaml:"launch"`
	Env    map[string]string `yaml:"env"`
	// Prepare are argvs run one after another, once the launched server
	// answers ready.path and before the rest of its readiness, each with
	// the server's environment and its output in the server's log: an
	// engine that must be told something by a client before it serves
	// (`ollama create NAME -f Modelfile`). One that fails is the server's
	// failure to become ready. See prepare.go.
	Prepare [][]string `yaml:"prepare"`
	// Port is the port a launched server listens on; 0 picks a free one.
	Port    int    `yaml:"port"`
	BaseURL string `yaml:"base_url"`
	// BaseURLs are the replicas of a server already running, one address
	// each, balanced by the client (Balance); replicas defaults to their
	// number and base_url to the first (see replicas.go).
	BaseURLs []string `yaml:"base_urls"`
	Ready    Ready    `yaml:"ready"`
	Metrics  Metrics  `yaml:"metrics"`
	// APIKeyEnv names the environment variable holding the API key; the
	// key itself is never written anywhere.
	APIKeyEnv string `yaml:"api_key_env"`
	// Model is the model name sent in requests (default: model.id).
	Model string `yaml:"model"`
	// StopGrace is how long SIGTERM has before SIGKILL.
	StopGrace Duration `yaml:"stop_grace"`
	// Simulated names the simulator profile when the server is a
	// `rehearse sim` process (set by the demo, or by hand).
	Simulated string `yaml:"simulated"`
	// FollowRedirects follows a 3xx answer to a request; by default the
	// 3xx is the request's outcome, so a redirect to another host is never
	// credited to this server.
	FollowRedirects bool `yaml:"follow_redirects"`
	// MaxModelLen is the server's context length (vLLM's --max-model-len);
	// when set, a prompt whose input tokens plus max_tokens exceed it is
	// refused before any request is sent (the dataset sources skip it and
	// count it instead). 0 is unknown.
	MaxModelLen int `yaml:"max_model_len"`
	// Replicas is how many processes of this server are launched, each
	// with its own port, log, readiness and GPU set (default: len(GPUs),
	// else 1); see replicas.go.
	Replicas int `yaml:"replicas"`
	// GPUs is one GPU set per replica (CUDA_VISIBLE_DEVICES and {gpus});
	// the server's GPU count is the number of distinct GPUs in it. For a
	// server already running it only says which GPUs it runs on, for the
	// per-GPU figures (rehearse sets nothing).
	GPUs [][]int `yaml:"gpus"`
	// Router, when set, is where the replicas' requests go (launched too
	// when it has an argv); without it requests are balanced by the
	// client as Balance says.
	Router *Router `yaml:"router"`
	// Balance is the client's balancing over replicas: round-robin (the
	// default with replicas > 1 and no router) or least-outstanding.
	Balance string `yaml:"balance"`
	// Headers are sent with every request to the server (vllm bench
	// serve's --header). Their values are secrets, scrubbed like an API
	// key and never written; they come from the command line only.
	Headers []Header `yaml:"-"`
	// InsecureTLS skips the verification of the server's TLS certificate
	// (vllm bench serve's --insecure), for servers with self-signed ones.
	InsecureTLS bool `yaml:"insecure_tls"`
}

// Header is one HTTP header every request carries; Value is a secret.
type Header struct{ Name, Value string }

// Launched reports whether rehearse starts this server itself.
func (s Server) Launched() bool { return len(s.Launch) > 0 }

// Ready is the readiness probe of a server.
type Ready struct {
	// Path is probed with GET until it answers 2xx (default /health).
	Path string `yaml:"path"`
	// Timeout bounds the whole readiness sequence (default 10m for a
	// launched server, 30s for one already running).
	Timeout Duration `yaml:"timeout"`
	// Mode is the sequence: full (the default: Path, /v1/models, one tiny
	// request), models (GET /v1/models alone, for hosted APIs with no
	// health route) or answer (one HTTP answer of any status from
	// /v1/models or Path: the server is reached). In every mode a
	// /v1/models model list must serve the model (supervise.Probe).
	Mode string `yaml:"mode"`
}

// Readiness modes (Ready.Mode).
const (
	ReadyFull   = "full"
	ReadyModels = "models"
	ReadyAnswer = "answer"
)

// Metrics is where a server exposes Prometheus metrics.
type Metrics struct {
	Path   string `yaml:"path"`
	Metric string `yaml:"metric"`
}

// Workload is what is sent: bench's knobs.
type Workload struct {
	Concurrencies []int   `yaml:"concurrencies"`
	Repeats       int     `yaml:"repeats"`
	Prompts       Prompts `yaml:"prompts"`
	MaxTokens     int     `yaml:"max_tokens"`
	// Temperature is nil until defaults are applied (then 0).
	Temperature *float64 `yaml:"temperature"`
	Timeout     Duration `yaml:"timeout"`
	WarmupWaves int      `yaml:"warmup_waves"`
	// WarmupConcurrency is the clients of each warm-up wave (0: the first
	// concurrency).
	WarmupConcurrency int `yaml:"warmup_concurrency"`
	// WarmupWavesPerLoad is unrecorded closed-loop waves at each
	// concurrency, just before its recorded ones (an engine that prepares
	// for each batch shape the first time it meets one, e.g. by capturing a
	// CUDA graph, then pays that in a warm-up and not in repeat 1).
	WarmupWavesPerLoad int            `yaml:"warmup_waves_per_load"`
	Endpoint           string         `yaml:"endpoint"`
	IncludeUsage       *bool          `yaml:"include_usage"`
	ExtraBody          map[string]any `yaml:"extra_body"`
	OpenLoop           *OpenLoop      `yaml:"open_loop"`
	// Mode is the load at each concurrency: closed (the default: waves of
	// N clients released together, one request each) or sustained (N
	// clients each sending its next request as soon as its last ended,
	// bounded by Sustained).
	Mode      string     `yaml:"mode"`
	Sustained *Sustained `yaml:"sustained"`
	// Sessions, when set, makes every client go through multi-turn
	// sessions of the prompt source (sharegpt, chat_jsonl or synthetic)
	// instead of single prompts.
	Sessions *Sessions `yaml:"sessions"`
	// BodyStyle is the request body's shape: "" for rehearse's, or "vllm"
	// for vllm bench serve's (endpoint.StyleVLLM): no temperature field
	// (extra_body may then carry one, as vLLM's sampling flags do),
	// completions with repetition_penalty 1.0 and logprobs null, chat with
	// max_completion_tokens and the prompt as a text part.
	BodyStyle string `yaml:"body_style"`
	// RequestIDPrefix, when set, sends every recorded request with the
	// header x-request-id: the prefix and its prompt's index, as vllm bench
	// serve's --request-id-prefix does (warm-up requests carry none).
	RequestIDPrefix string `yaml:"request_id_prefix"`
	// NumWarmups is vllm bench serve's --num-warmups: before the recorded
	// waves, one unrecorded warm-up wave of this many requests, at most
	// warmup_concurrency of them in flight (0: all at once).
	NumWarmups int `yaml:"num_warmups"`
	// Models, when set, gives each prompt its own model name (vllm bench
	// serve's --lora-modules and --lora-assignment): its recorded requests
	// ask for that model (a LoRA adapter) instead of the server's; warm-up
	// requests and side probes ask for the server's, as vLLM's do.
	Models *Models `yaml:"models"`
	// SideProbes, when set, sends side probes beside every planned
	// recorded wave (vllm bench serve's --probe-request-rate).
	SideProbes *SideProbes `yaml:"side_probes"`
}

// Models are the model names the prompts are assigned (LoRA adapters the
// server was launched with), and how: random (the default, drawn with
// Seed as vLLM draws them) or round-robin (workload.AssignModels).
type Models struct {
	Names      []string `yaml:"names"`
	Assignment string   `yaml:"assignment"`
	Seed       int64    `yaml:"seed"`
}

// SideProbes are small requests sent one at a time beside a recorded
// wave, from its release until its requests have ended, bypassing its
// concurrency cap, their latency reported apart (vLLM's probe requests):
// each sends Prompt with MaxTokens, then, once it ended, the next goes
// 1/RateRPS later.
type SideProbes struct {
	RateRPS   float64 `yaml:"rate_rps"`
	Prompt    string  `yaml:"prompt"`
	MaxTokens int     `yaml:"max_tokens"`
}

// Sessions are multi-turn sessions: conversations whose turn t+1 is sent
// after turn t's reply ended (and the think time), carrying the whole
// history with the server's actual replies.
type Sessions struct {
	// Turns is, for the synthetic source, every session's exact number of
	// user turns (required); for sharegpt and chat_jsonl, the most user
	// turns a conversation keeps (0: all).
	Turns int `yaml:"turns"`
	// ThinkTime is the pause before each later turn: a duration (fixed)
	// or {mean, distribution, seed}.
	ThinkTime ThinkTime `yaml:"think_time"`
}

// ThinkTime is a pause between a reply's end and the next turn: Mean,
// fixed or drawn from Distribution (workload.ThinkDistributions) by a
// generator seeded with Seed.
type ThinkTime struct {
	Mean         Duration
	Distribution string
	Seed         int64
}

// thinkTimeMapping is the mapping form of think_time.
type thinkTimeMapping struct {
	Mean         Duration `yaml:"mean"`
	Distribution string   `yaml:"distribution"`
	Seed         int64    `yaml:"seed"`
}

// UnmarshalYAML reads a duration ("500ms", 0.5) or {mean, distribution,
// seed}.
func (t *ThinkTime) UnmarshalYAML(b []byte) error {
	var v any
	if err := yaml.Unmarshal(b, &v); err != nil {
		return err
	}
	if _, ok := v.(map[string]any); ok {
		var m thinkTimeMapping
		if err := yaml.UnmarshalWithOptions(b, &m, yaml.DisallowUnknownField()); err != nil {
			return err
		}
		*t = ThinkTime(m)
		return nil
	}
	d, err := parseDuration(v)
	if err != nil {
		return err
	}
	*t = ThinkTime{Mean: d}
	return nil
}

// Think is the think time as package workload draws it.
func (t ThinkTime) Think() workload.ThinkTime {
	return workload.ThinkTime{Mean: t.Mean.D(), Distribution: t.Distribution, Seed: t.Seed}
}

// SessionsSpec is the sessions part of the prompt source's spec (nil
// without sessions).
func (w Workload) SessionsSpec() *workload.Sessions {
	if w.Sessions == nil {
		return nil
	}
	return &workload.Sessions{Turns: w.Sessions.Turns, Think: w.Sessions.ThinkTime.Think()}
}

// Workload modes (Workload.Mode).
const (
	ModeClosed    = "closed"
	ModeSustained = "sustained"
)

// Sustained bounds each sustained closed-loop wave: NumRequests measured
// requests, Duration of the measured part, or both (whichever ends
// first), after WarmupRequests requests of warm-up that are sent by the
// same clients and kept out of the aggregates.
type Sustained struct {
	NumRequests    int      `yaml:"num_requests"`
	Duration       Duration `yaml:"duration"`
	WarmupRequests int      `yaml:"warmup_requests"`
}

// OpenLoop describes open-loop waves run after the closed-loop ones.
type OpenLoop struct {
	RequestRatesRPS []float64 `yaml:"request_rates_rps"`
	Arrival         string    `yaml:"arrival"`
	Burstiness      float64   `yaml:"burstiness"`
	Seed            int64     `yaml:"seed"`
	NumRequests     int       `yaml:"num_requests"`
	Duration        Duration  `yaml:"duration"`
	MaxConcurrency  int       `yaml:"max_concurrency"`
	// Ramp, instead of RequestRatesRPS, makes each repeat one wave whose
	// rate moves from StartRPS to EndRPS over the wave.
	Ramp *Ramp `yaml:"ramp"`
	// Pacing is "" for rehearse's arrival schedules, or "vllm" for vllm
	// bench serve's (workload.PacingVLLM): every gap drawn, a constant
	// rate's rescaled to end at num_requests/rate, a ramp's rate by request
	// index; bounded by num_requests alone.
	Pacing string `yaml:"pacing"`
}

// Ramp is an open-loop ramp-up: the rate moves from StartRPS to EndRPS,
// linearly or exponentially, over the wave's duration (bounded by
// num_requests alone, over the time they are expected to take).
type Ramp struct {
	Strategy string  `yaml:"strategy"`
	StartRPS float64 `yaml:"start_rps"`
	EndRPS   float64 `yaml:"end_rps"`
}

// MechanismCheck is the separate, unrecorded wave during which a server's
// metric is polled.
type MechanismCheck struct {
	Server      string   `yaml:"server"`
	Metric      string   `yaml:"metric"`
	Concurrency int      `yaml:"concurrency"`
	Period      Duration `yaml:"period"`
	Disabled    bool     `yaml:"disabled"`
	// Evidence is what the check rests on: EvidenceMetric (the server's
	// metric, polled; the default) or EvidenceClient (no metric is read:
	// the client's own records of the wave, for a server with no metrics
	// endpoint, e.g. ollama).
	Evidence string `yaml:"evidence"`
}

// What a mechanism check rests on (MechanismCheck.Evidence).
const (
	EvidenceMetric = "metric"
	EvidenceClient = "client"
)

// Tokenizer chooses the tokenizer that counts output tokens: an explicit
// path (a tokenizer.json or a folder holding one), a model and revision
// whose own tokenizer.json the resolver finds, or an embedded variant (or
// usage); all empty, model.id's own (tokenizer.Resolve).
type Tokenizer struct {
	Path     string `yaml:"path"`
	Model    string `yaml:"model"`
	Revision string `yaml:"revision"`
	Variant  string `yaml:"variant"`
}

// Output says where the bundle goes.
type Output struct {
	Dir string `yaml:"dir"`
}

// Prompts is the workload's prompt source: an inline list, the path of a
// prompts file (.jsonl with "prompt", or .txt with one prompt per line), or
// a mapping naming a source (workload.Sources) and its parameters, e.g.
// {source: synthetic, input_len: {fixed: 1024}, output_len: {mean: 128,
// range_ratio: 0.5}, count: 1000, seed: 1}.
type Prompts struct {
	Inline []string
	File   string
	// Source is the named source of the mapping form ("" for the list
	// and file forms).
	Source string
	// Synthetic are the synthetic source's parameters.
	InputLen, OutputLen *Length
	Count               int
	Seed                int64
	IgnoreEOS           bool
	// Dataset sources' parameters (sharegpt, chat_jsonl).
	UseOutputLen bool
	MaxModelLen  int
	// Order is sharegpt's: "" (the file's order), or vllm bench serve's
	// sampling, "vllm" (shuffled with seed) or "vllm_unshuffled"
	// (workload.OrderVLLM); output_len {fixed: N} then is the fixed output
	// length vLLM checks lengths with.
	Order string
	// The trace source's parameters (count, seed and ignore_eos too).
	Format    string
	TimeScale float64
	BlockSize int
	// PrefixLen is the prefix_repetition source's prefix length, and the
	// synthetic source's common prefix (0: none).
	PrefixLen int
	// The prefix_repetition source's other parameters (with OutputLen,
	// Count, Seed and IgnoreEOS).
	NumPrefixes, SuffixLen int
	// ChatTemplate (chat_template: true; bench serve sets it for vLLM's
	// custom dataset) renders each prompt of a prompts file through the
	// tokenizer's chat template (chattemplate) before it is counted and
	// sent, with ChatTemplateKwargs (chat_template_kwargs;
	// --chat-template-kwargs) as extra template variables.
	ChatTemplate       bool
	ChatTemplateKwargs map[string]any
}

// Length is a token-length distribution of the synthetic source: fixed;
// mean with range_ratio (uniform over [mean·(1−r), mean·(1+r)]); or mean
// with sd (normal, clamped to at least 1).
type Length struct {
	Fixed      int     `yaml:"fixed"`
	Mean       float64 `yaml:"mean"`
	RangeRatio float64 `yaml:"range_ratio"`
	SD         float64 `yaml:"sd"`
}

// promptsMapping is the mapping form of workload.prompts.
type promptsMapping struct {
	Source    string  `yaml:"source"`
	Path      string  `yaml:"path"`
	InputLen  *Length `yaml:"input_len"`
	OutputLen *Length `yaml:"output_len"`
	Count     int     `yaml:"count"`
	Seed      int64   `yaml:"seed"`
	IgnoreEOS bool    `yaml:"ignore_eos"`

	UseOutputLen bool   `yaml:"use_output_len"`
	MaxModelLen  int    `yaml:"max_model_len"`
	Order        string `yaml:"order"`

	Format      string  `yaml:"format"`
	TimeScale   float64 `yaml:"time_scale"`
	BlockSize   int     `yaml:"block_size"`
	NumPrefixes int     `yaml:"num_prefixes"`
	PrefixLen   int     `yaml:"prefix_len"`
	SuffixLen   int     `yaml:"suffix_len"`

	ChatTemplate       bool           `yaml:"chat_template"`
	ChatTemplateKwargs map[string]any `yaml:"chat_template_kwargs"`
}

// UnmarshalYAML accepts a string (a file), a list of strings, or a
// mapping naming a source.
func (p *Prompts) UnmarshalYAML(b []byte) error {
	var v any
	if err := yaml.Unmarshal(b, &v); err != nil {
		return err
	}
	switch x := v.(type) {
	case nil:
		*p = Prompts{}
	case string:
		*p = Prompts{File: x}
	case []any:
		out := make([]string, len(x))
		for i, e := range x {
			s, ok := e.(string)
			if !ok {
				return fmt.Errorf("prompts[%d]: not a string", i)
			}
			out[i] = s
		}
		*p = Prompts{Inline: out}
	case map[string]any:
		var m promptsMapping
		if err := yaml.UnmarshalWithOptions(b, &m, yaml.DisallowUnknownField()); err != nil {
			return err
		}
		*p = Prompts{Source: m.Source, File: m.Path, InputLen: m.InputLen, OutputLen: m.OutputLen,
			Count: m.Count, Seed: m.Seed, IgnoreEOS: m.IgnoreEOS, UseOutputLen: m.UseOutputLen, MaxModelLen: m.MaxModelLen, Order: m.Order,
			Format: m.Format, TimeScale: m.TimeScale, BlockSize: m.BlockSize,
			NumPrefixes: m.NumPrefixes, PrefixLen: m.PrefixLen, SuffixLen: m.SuffixLen,
			ChatTemplate: m.ChatTemplate, ChatTemplateKwargs: m.ChatTemplateKwargs}
	default:
		return fmt.Errorf("prompts: want a file name, a list of strings or a mapping with a source")
	}
	return nil
}

// Duration is a time span written as a Go duration ("60s", "10m", "100ms")
// or a number of seconds.
type Duration time.Duration

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Seconds returns the duration in seconds.
func (d Duration) Seconds() float64 { return time.Duration(d).Seconds() }

// String formats like time.Duration.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalYAML writes the Go form.
func (d Duration) MarshalYAML() ([]byte, error) { return []byte(strconv.Quote(d.String())), nil }

// UnmarshalYAML reads "60s" or 60.
func (d *Duration) UnmarshalYAML(b []byte) error {
	var v any
	if err := yaml.Unmarshal(b, &v); err != nil {
		return err
	}
	x, err := parseDuration(v)
	if err != nil {
		return err
	}
	*d = x
	return nil
}

func parseDuration(v any) (Duration, error) {
	switch x := v.(type) {
	case nil:
		return 0, nil
	case string:
		dd, err := time.ParseDuration(strings.TrimSpace(x))
		if err != nil {
			return 0, fmt.Errorf("%q is not a duration (write 60s, 10m, 100ms, or a number of seconds)", x)
		}
		return Duration(dd), nil
	case uint64:
		return Duration(time.Duration(x) * time.Second), nil
	case int64:
		return Duration(time.Duration(x) * time.Second), nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return 0, fmt.Errorf("%v is not a duration", x)
		}
		return Duration(time.Duration(x * float64(time.Second))), nil
	}
	return 0, fmt.Errorf("%v is not a duration (write 60s, 10m, 100ms, or a number of seconds)", v)
}

// Defaults of bench's --dataset-name random, vLLM's.
const (
	DefaultNumPrompts      = 1000
	DefaultRandomInputLen  = 1024
	DefaultRandomOutputLen = 128
)

// Defaults of the canonical rehearsal (SPEC §1).
var (
	DefaultConcurrencies = []int{1, 8, 32, 64}
)

const (
	DefaultRepeats      = 3
	DefaultMaxTokens    = 128
	DefaultTimeout      = 60 * time.Second
	DefaultEndpoint     = endpoint.Default
	DefaultReadyPath    = "/health"
	DefaultReadyTimeout = 10 * time.Minute
	// DefaultRunningReadyTimeout is the readiness timeout of a server
	// rehearse did not launch (base_url only): it is up or it is not, and
	// one that is down should not be retried for ten minutes.
	DefaultRunningReadyTimeout = 30 * time.Second
	// DefaultReachTimeout is how long bench waits for the endpoint it was
	// pointed at to answer at all: it is up, or the rehearsal ends now.
	DefaultReachTimeout = 5 * time.Second
	// DefaultBenchReady is bench's readiness: one answer from the endpoint.
	DefaultBenchReady = ReadyAnswer
	DefaultServerName = "server"
	DefaultArrival    = workload.ArrivalPoisson
	// DefaultMode is the load at each concurrency: closed-loop waves.
	DefaultMode = ModeClosed
	// DefaultSustainedNumRequests bounds a sustained wave given neither
	// num_requests nor duration (vllm bench serve's --num-prompts).
	DefaultSustainedNumRequests = 1000
	// DefaultSustainedWarmupRequests is the warm-up of a sustained wave:
	// none, so its first wave is flagged cold unless warm-up waves run.
	DefaultSustainedWarmupRequests = 0
	DefaultMetricsPath             = "/metrics"
	DefaultMetric                  = "vllm:num_requests_running"
	DefaultMechanismEvery          = 100 * time.Millisecond
	DefaultStopGrace               = 15 * time.Second
	OnFailureContinue              = "continue"
	OnFailureStop                  = "stop"
	// DefaultProgress draws the live per-request view of bench, run and
	// demo only when stderr is a terminal.
	DefaultProgress = ProgressAuto
)

// Progress modes of the live view on stderr.
const (
	ProgressAuto   = "auto"
	ProgressAlways = "always"
	ProgressNever  = "never"
)

var (
	placeholderRE = regexp.MustCompile(`\{(port|rehearse|config_dir|model|revision|dtype|replica|gpus|replica_urls|scratch_dir)\}`)
	// secretWordRE matches one word of a name (split at - _ . and
	// lower-to-upper case changes) that marks a secret: HF_TOKEN, api-key,
	// apiKey, AUTHORIZATION, DB_PASSWORD; not TOKENIZERS_PARALLELISM or
	// --tokenizer-file.
	secretWordRE  = regexp.MustCompile(`(?i)^(.*(key|keys|token|tokens|secret|secrets|password|passwd|credential|credentials)|auth.*)$`)
	nameWordSepRE = regexp.MustCompile(`[-_.]+|([a-z0-9])([A-Z])`)
	serverNameRE  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	envNameRE     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// Argv returns the launch argv with placeholders substituted: {port} the
// chosen port, {rehearse} the rehearse executable, {config_dir} the folder
// of the rehearsal file, {model}, {revision} and {dtype} from model,
// {replica} 0 and {gpus} the first GPU set (see ReplicaArgv).
func (r *Rehearsal) Argv(s Server, port int, rehearseExe string) []string {
	return r.ReplicaArgv(s, 0, port, rehearseExe)
}

// ReplicaArgv is Argv for replica i of s: {replica} is i and {gpus} its
// GPU set as a comma list ("" without gpus).
func (r *Rehearsal) ReplicaArgv(s Server, replica, port int, rehearseExe string) []string {
	return r.substitute(s.Launch, placeholders{port: port, exe: rehearseExe, replica: replica, gpus: s.GPUList(replica)})
}

// placeholders are the values substituted into an argv.
type placeholders struct {
	port        int
	exe         string
	replica     int
	gpus        string
	replicaURLs string
	scratch     string
}

func (r *Rehearsal) substitute(argv []string, ph placeholders) []string {
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = placeholderRE.ReplaceAllStringFunc(a, func(m string) string {
			switch m {
			case "{port}":
				return strconv.Itoa(ph.port)
			case "{rehearse}":
				return ph.exe
			case "{config_dir}":
				return r.Dir
			case "{model}":
				return r.Model.ID
			case "{revision}":
				return r.Model.Revision
			case "{dtype}":
				return r.Model.Dtype
			case "{replica}":
				return strconv.Itoa(ph.replica)
			case "{gpus}":
				return ph.gpus
			case "{replica_urls}":
				return ph.replicaURLs
			case "{scratch_dir}":
				if ph.scratch == "" {
					return m
				}
				return ph.scratch
			}
			return m
		})
	}
	return out
}

// ShownArgv is the launch argv as the bundle, the server's log and the
// progress lines show it: Argv with secrets redacted and {rehearse} written
// as "rehearse", while Argv executes the real path. The path says nothing
// the tool record does not, differs between the parts of a rehearsal run
// from different checkouts, and under go run names a temporary file in the
// build cache that is gone once rehearse exits.
func (r *Rehearsal) ShownArgv(s Server, port int) []string {
	return RedactArgv(r.Argv(s, port, "rehearse"))
}

// IsSecretName reports whether an environment variable's name marks its
// value as a secret (key, token, secret, password, auth, credential).
func IsSecretName(name string) bool {
	for _, w := range strings.Fields(nameWordSepRE.ReplaceAllString(name, "$1 $2")) {
		if secretWordRE.MatchString(w) {
			return true
		}
	}
	return false
}

// urlUserinfoRE matches the scheme and userinfo of a URL ("http://user:pw@"),
// up to the last @ before the host ends (a password may hold an unescaped @).
var urlUserinfoRE = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.\-]*://)[^\s/?#"'<>]*@`)

// RedactURL replaces the userinfo of every URL in s ("http://user:pw@host",
// a base URL or a message that names one) with "[redacted]": the user name
// goes too, since a token is often written there. The rest is kept.
func RedactURL(s string) string {
	if !strings.Contains(s, "@") {
		return s
	}
	return urlUserinfoRE.ReplaceAllString(s, "${1}"+secret.Redacted+"@")
}

// secretEnv reports whether the variable name (of env, with apiKeyEnv
// naming the API key's) holds a secret.
func secretEnv(name, apiKeyEnv string) bool {
	return IsSecretName(name) || (apiKeyEnv != "" && name == apiKeyEnv)
}

// RedactEnv returns env with the values of secret-named variables and of
// apiKeyEnv replaced by "[redacted]". The input is not modified.
func RedactEnv(env map[string]string, apiKeyEnv string) map[string]string {
	if len(env) == 0 {
		return nil
	}
	out := make(map[string]string, len(env))
	for k, v := range env {
		if secretEnv(k, apiKeyEnv) {
			v = secret.Redacted
		}
		out[k] = v
	}
	return out
}

// RedactArgv replaces the value of a secret-named flag (--api-key X,
// --hf-token=X) or variable (HF_TOKEN=X), as its own item or inside a
// shell string (sh -c "… --api-key 'X'"), with "[redacted]".
func RedactArgv(argv []string) []string {
	out := append([]string(nil), argv...)
	redactSpans(out, secretSpans(argv))
	return out
}

// SecretValues returns the values RedactEnv and RedactArgv hide, for
// scrubbing text a server writes: the values of env's secret-named
// variables and of apiKeyEnv, and the values of argv's secret flags. env is
// the server's whole environment, inherited variables included; empty
// values are left out, and each value appears once.
func SecretValues(env map[string]string, apiKeyEnv string, argv []string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(v string) {
		if v != "" && !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if secretEnv(k, apiKeyEnv) {
			add(env[k])
		}
	}
	for _, sp := range secretSpans(argv) {
		add(sp.value)
		add(argv[sp.item][sp.start:sp.end]) // as written, where quoting changed it
	}
	return out
}
