package benchcmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/chattemplate"
	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/endpoint"
	"github.com/rehearse/rehearse/internal/exitcode"
	"github.com/rehearse/rehearse/internal/rehearsal"
	"github.com/rehearse/rehearse/internal/secret"
	"github.com/rehearse/rehearse/internal/tokenizer"
	"github.com/rehearse/rehearse/internal/workload"
)

type Bench struct {
	baseURL string
	// baseURLs are --base-url as given: several are the replicas of one
	// server, balanced by the client as balance says.
	baseURLs      []string
	balance       string
	endpoint      string
	model         string
	name          string
	apiKeyEnv     string
	concurrencies []int
	repeats       int
	warmupWaves   int
	warmupPerLoad int
	warmupClients int
	promptsPath   string
	maxTokens     int
	timeout       time.Duration
	extraBody     string
	includeUsage  bool
	followRedirs  bool
	tokenizer     string
	out           string

	requestRates   []float64
	arrival        string
	burstiness     float64
	seed           int64
	numRequests    int
	duration       time.Duration
	maxConcurrency int
	warmupRequests int

	// pacing is the open loop's (workload.PacingVLLM for bench serve).
	pacing string
	// numWarmups is --num-warmups: one warm-up wave of that many requests.
	numWarmups int

	rampStrategy string
	rampStartRPS float64
	rampEndRPS   float64
	// rampSet are the --ramp-up-* flags that were given.
	rampSet []string

	ready        string
	readyTimeout time.Duration

	closedSet bool     // --concurrency was given
	openSet   []string // open-loop flags that were given
	// warmupRequestsSet is whether --warmup-requests was given.
	warmupRequestsSet bool
	progress          string

	dataset datasetOptions
	slo     SLO
	cost    costOptions
	save    saveResultOptions // --save-result and its flags (saveresult.go)
	// vllm are vllm bench serve's flags that map onto the others.
	vllm vllmOptions
	seg  Segment
	// workerArgs is a worker's command line for --workers.
	workerArgs []string
	env        Env
}

// New is the options of rehearse bench, or, serve, rehearse bench serve:
// the same flags with the same meanings, bench serve taking vLLM's
// defaults for those not given (applyServeDefaults).
func New(env Env, serve bool) *Bench {
	o := &Bench{env: env}
	o.vllm.serve, o.save.here = serve, serve
	return o
}

// FromFlags takes what the flags of f (parsed) say beyond their values:
// which were given, vLLM's meaning and bench serve's defaults. workerArgs
// is a worker's command line, for --workers (WorkerArgs).
func (o *Bench) FromFlags(f *pflag.FlagSet, workerArgs []string) error {
	if err := CheckRefused(f); err != nil {
		return err
	}
	o.closedSet = f.Changed("concurrency")
	o.dataset.markChanged(f)
	for _, name := range []string{"ramp-up-strategy", "ramp-up-start-rps", "ramp-up-end-rps"} {
		if f.Changed(name) {
			o.rampSet = append(o.rampSet, name)
		}
	}
	o.warmupRequestsSet = f.Changed("warmup-requests")
	o.slo.NoteChanged(f)
	o.cost.noteChanged(f)
	if err := o.save.validate(o.env, f.Changed, o.out); err != nil {
		return err
	}
	if err := o.applyServeDefaults(f); err != nil {
		return err
	}
	if err := o.applyVLLM(f); err != nil {
		return err
	}
	for _, name := range []string{"arrival", "burstiness", "seed", "num-requests", "duration", "max-concurrency"} {
		// --seed also seeds the random and prefix_repetition datasets, as in vLLM,
		// and a trace's texts.
		if f.Changed(name) && !o.vllm.consumed[name] && (name != "seed" || (o.dataset.name != datasetRandom && o.dataset.name != datasetPrefix && !o.dataset.trace())) {
			o.openSet = append(o.openSet, name)
		}
	}
	o.workerArgs = workerArgs
	return nil
}

// Flags binds bench's flags to o.
func (o *Bench) Flags(f *pflag.FlagSet) {
	endpointFlags(f, o, "bench")
	f.IntSliceVar(&o.concurrencies, "concurrency", config.DefaultConcurrencies, "clients per closed-loop wave, comma-separated")
	f.IntVar(&o.repeats, "repeats", config.DefaultRepeats, "recorded waves per concurrency (and per request rate)")
	f.IntVar(&o.warmupWaves, "warmup-waves", 0, "unrecorded warm-up waves before the recorded ones")
	f.IntVar(&o.warmupClients, "warmup-concurrency", 0, "clients per warm-up wave (default: the first --concurrency)")
	f.IntVar(&o.warmupPerLoad, "warmup-waves-per-load", 0, "unrecorded warm-up waves at each --concurrency, just before its recorded ones")
	f.Float64SliceVar(&o.requestRates, "request-rate", nil, "open-loop request rates in requests per second, comma-separated; inf with --max-concurrency C: the sustained closed loop at C")
	f.StringVar(&o.arrival, "arrival", config.DefaultArrival, "open-loop arrival process: fixed, poisson or gamma")
	f.Float64Var(&o.burstiness, "burstiness", 0, "gamma shape: 1 is Poisson, below 1 burstier (gamma arrivals only)")
	f.IntVar(&o.numRequests, "num-requests", 0, "requests per open-loop or sustained wave (0: bounded by --duration; neither: by --num-prompts)")
	f.DurationVar(&o.duration, "duration", 0, "length of an open-loop wave's schedule, or of a sustained wave's measured part (0: bounded by --num-requests only)")
	f.IntVar(&o.maxConcurrency, "max-concurrency", 0, "cap on open-loop requests in flight (0: none), waits counted; with --request-rate inf the clients of the sustained closed loop")
	f.StringVar(&o.rampStrategy, "ramp-up-strategy", "", "open-loop ramp-up instead of --request-rate: linear or exponential, from --ramp-up-start-rps to --ramp-up-end-rps over each wave")
	f.Float64Var(&o.rampStartRPS, "ramp-up-start-rps", 0, "request rate at the start of a ramp-up wave")
	f.Float64Var(&o.rampEndRPS, "ramp-up-end-rps", 0, "request rate at the end of a ramp-up wave (--duration, or the time --num-requests are expected to take)")
	f.IntVar(&o.warmupRequests, "warmup-requests", config.DefaultSustainedWarmupRequests, "requests of warm-up at the start of each sustained wave, kept out of the figures (--request-rate inf only)")
	datasetFlags(f, &o.dataset)
	o.slo.Flags(f, false)
	vllmFlags(f, &o.vllm)
	costFlags(f, &o.cost)
	saveResultFlags(f, &o.save)
	o.seg.Flags(f)
}

// endpointFlags are the flags of bench and capacity alike: the endpoint,
// the request, the tokenizer, the bundle, the progress view and readiness.
func endpointFlags(f *pflag.FlagSet, o *Bench, command string) {
	f.StringSliceVar(&o.baseURLs, "base-url", nil, "base URL of the running server (required), e.g. http://127.0.0.1:8000; repeat it (or give a comma list) for the replicas of one server, balanced by the client (--balance)")
	f.StringVar(&o.balance, "balance", "", "with several --base-url: the client's balancing over them, round-robin (default) or least-outstanding; sessions keep to one replica")
	f.StringVar(&o.endpoint, "endpoint", config.DefaultEndpoint, "API path: chat completions, or the completions API when it ends in /completions but not /chat/completions (e.g. /v1/completions)")
	f.StringVar(&o.model, "model", "", "model name to request (default: the first model of GET /v1/models)")
	f.StringVar(&o.name, "name", config.DefaultServerName, "server label in the bundle")
	f.StringVar(&o.apiKeyEnv, "api-key-env", "", "environment variable holding the API key (sent as a bearer token, never stored)")
	f.StringVar(&o.promptsPath, "prompts", "", "prompts file: .jsonl with a \"prompt\" field per line, or .txt with one prompt per line (default: eight built-in prompts)")
	f.IntVar(&o.maxTokens, "max-tokens", config.DefaultMaxTokens, "max_tokens of every request")
	f.DurationVar(&o.timeout, "timeout", config.DefaultTimeout, "per-request timeout, from send to the end of the stream")
	f.StringVar(&o.extraBody, "extra-body", "", "JSON object merged into every request body, e.g. '{\"ignore_eos\":true}'")
	f.BoolVar(&o.includeUsage, "include-usage", true, "send stream_options.include_usage (--include-usage=false for servers that reject it)")
	f.BoolVar(&o.followRedirs, "follow-redirects", false, "follow a 3xx answer (default: a redirect is the request's outcome, http_status, never another host's stream)")
	f.StringVar(&o.tokenizer, "tokenizer", "", "tokenizer.json path or a model's folder, ORG/NAME[@REV] (that model's own), qwen3, qwen2.5, or usage")
	f.StringVarP(&o.out, "output", "o", "", "bundle directory (default rehearse-"+command+"-<UTC time>)")
	f.Int64Var(&o.seed, "seed", 0, "seed of the arrival schedule (repeat r uses seed+r-1), and of --dataset-name random and prefix_repetition")
	ProgressFlag(f, &o.progress)
	f.StringVar(&o.ready, "ready", config.DefaultBenchReady, "readiness check: answer (any HTTP answer from /v1/models or /health), models (GET /v1/models lists the model; for hosted APIs with no /health), full (/health, /v1/models, one tiny request)")
	f.DurationVar(&o.readyTimeout, "ready-timeout", config.DefaultReachTimeout, "how long the endpoint has to pass the readiness check")
}

// CommandLine is the invocation as provenance records it: the command's
// path (cobra's CommandPath) and the flags of f that were set, in the
// order f lists them.
func CommandLine(path string, f *pflag.FlagSet) []string {
	out := strings.Fields(path)
	f.Visit(func(f *pflag.Flag) {
		if f.Name == "header" {
			// A header's value is a secret: its name alone is kept.
			for _, kv := range f.Value.(pflag.SliceValue).GetSlice() {
				k, _, _ := strings.Cut(kv, "=")
				out = append(out, "--header="+strings.TrimSpace(k)+"="+secret.Redacted)
			}
			return
		}
		v := f.Value.String()
		if t := f.Value.Type(); strings.HasSuffix(t, "Slice") || strings.HasSuffix(t, "Array") {
			v = strings.TrimSuffix(strings.TrimPrefix(v, "["), "]")
		}
		out = append(out, "--"+f.Name+"="+config.RedactURL(v))
	})
	return out
}

// checkFlags checks what the flags say together, before a rehearsal is
// made of them: which were given with which (a ramp replaces
// --request-rate, --request-rate inf is the sustained closed loop), and
// what only a command line has (--progress, the API key's variable, the
// dataset flags). Every value the rehearsal holds is checked once, by the
// rule a rehearsal file is held to (checkConfig); errors name the flag.
func (o *Bench) checkFlags() error {
	if len(o.baseURLs) > 0 {
		o.baseURL = o.baseURLs[0]
	}
	if o.baseURL == "" {
		return usageError("--base-url is required (or vllm bench serve's --host and --port)")
	}
	if o.balance != "" && len(o.endpoints()) < 2 {
		return usageError("--balance %s: give several --base-url to balance over", o.balance)
	}
	if n := len(o.endpoints()); o.cost.gpusSet && o.cost.gpus%n != 0 {
		return usageError("--gpus %d over %d endpoints: give a multiple of %d (each replica the same number of GPUs)", o.cost.gpus, n, n)
	}
	if err := o.cost.check(); err != nil {
		return err
	}
	if err := o.validateSustained(); err != nil {
		return err
	}
	if err := o.validateShaped(); err != nil {
		return err
	}
	if o.apiKeyEnv != "" {
		if _, err := config.APIKey(o.apiKeyEnv); err != nil {
			return usageError("--api-key-env %s: %v", o.apiKeyEnv, err)
		}
	}
	if err := CheckProgress(o.progress); err != nil {
		return err
	}
	if err := o.dataset.validate(o.promptsPath); err != nil {
		return err
	}
	open := (len(o.requestRates) > 0 && !o.sustained()) || o.ramp() || o.dataset.trace()
	if !open && !o.sustained() && len(o.openSet) > 0 {
		return usageError("--%s applies to open-loop waves: add --request-rate", o.openSet[0])
	}
	return nil
}

// checkConfig holds the rehearsal the flags made to the rules a rehearsal
// file is held to (config.Rehearsal.Validate: one validation for every
// config), naming the first problem by the flag that set its field. The
// model is not yet known without --model: the server names it next.
func (o *Bench) checkConfig(cfg *config.Rehearsal) error {
	err := cfg.Validate()
	var probs *config.Problems
	if !errors.As(err, &probs) {
		return err
	}
	for _, p := range probs.Items {
		if p.Path == "servers[0].model" && o.model == "" {
			continue
		}
		flag := o.flagOf(p.Path)
		if o.dataset.name == datasetRandom && strings.HasPrefix(p.Msg, "range_ratio") {
			flag = "--random-range-ratio" // a length's spread, set by its own flag
		}
		return usageError("%s: %s", flag, p.Msg)
	}
	return nil
}

// ramp reports whether the flags ask for ramp-up waves.
func (o *Bench) ramp() bool { return len(o.rampSet) > 0 }

// validateShaped checks the flags of ramp-up waves and of trace replays
// against the others: a ramp replaces --request-rate, and a trace gives
// its own times.
func (o *Bench) validateShaped() error {
	if o.ramp() {
		switch {
		case o.rampStrategy == "":
			return usageError("--%s needs --ramp-up-strategy (linear or exponential)", o.rampSet[0])
		case len(o.requestRates) > 0:
			return usageError("--ramp-up-strategy replaces --request-rate: the rate goes from --ramp-up-start-rps to --ramp-up-end-rps (give one of them)")
		case o.dataset.trace():
			return usageError("--ramp-up-strategy: --dataset-name %s replays the trace's own arrival times", o.dataset.name)
		}
	}
	if o.dataset.trace() {
		if len(o.requestRates) > 0 {
			return usageError("--request-rate: --dataset-name %s replays the trace's own arrival times (scale them with --trace-time-scale)", o.dataset.name)
		}
		for _, name := range o.openSet {
			if name == "arrival" || name == "burstiness" {
				return usageError("--%s: --dataset-name %s replays the trace's own arrival times", name, o.dataset.name)
			}
		}
	}
	return nil
}

// sustained reports whether the flags ask for the sustained closed loop:
// --request-rate inf (vllm bench serve's meaning with --max-concurrency).
func (o *Bench) sustained() bool {
	for _, r := range o.requestRates {
		if math.IsInf(r, 1) {
			return true
		}
	}
	return false
}

// validateSustained checks the flags of the sustained closed loop, and
// that --warmup-requests is not given without it.
func (o *Bench) validateSustained() error {
	if !o.sustained() {
		if o.warmupRequestsSet {
			return usageError("--warmup-requests applies to the sustained closed loop: add --request-rate inf --max-concurrency C")
		}
		return nil
	}
	switch {
	case len(o.requestRates) > 1:
		return usageError("--request-rate inf is the sustained closed loop: give it alone, not with other rates")
	case o.maxConcurrency < 1:
		return usageError("--request-rate inf needs --max-concurrency C: the clients of the sustained closed loop")
	case o.closedSet:
		return usageError("--concurrency does not apply with --request-rate inf: the clients are --max-concurrency")
	}
	for _, name := range o.openSet {
		switch name {
		case "arrival", "burstiness":
			return usageError("--%s applies to open-loop arrivals, not to --request-rate inf", name)
		}
	}
	return nil
}

func (o *Bench) parseExtraBody() (map[string]any, error) {
	if strings.TrimSpace(o.extraBody) == "" {
		return nil, nil
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(o.extraBody), &m); err != nil || m == nil {
		return nil, usageError("--extra-body %q: want a JSON object such as '{\"ignore_eos\":true}'", o.extraBody)
	}
	for _, e := range config.CheckExtraBody(m) {
		if e.Key == "temperature" && o.vllm.serve {
			continue // vLLM's extra body may set the temperature
		}
		return nil, usageError("--extra-body: %v", e)
	}
	return m, nil
}

// Run is bench's run of the options the flags filled: the flags checked,
// the rehearsal made of them (the model asked of the server where none
// was given), its tokenizer opened and its prompts resolved, then the one
// runner (rehearsal.Perform), or fleet.Run for --workers; argv is the
// command line as provenance records it (CommandLine).
func (o *Bench) Run(ctx context.Context, argv []string) error {
	if err := o.checkFlags(); err != nil {
		return err
	}
	if err := o.seg.check(); err != nil {
		return err // before the model is asked of the server
	}
	cfg, notes, err := o.rehearsal(ctx)
	if err != nil {
		return err
	}
	if err := o.seg.Apply(cfg); err != nil {
		return err
	}
	// Opened before the workers start: a model whose tokenizer is not at
	// hand stops here once, and one the Hub gives is in the cache for them.
	opened, err := openTokenizer(ctx, cfg)
	if err != nil {
		return err
	}
	dir := o.dir("bench")
	if o.seg.workers > 0 {
		return RunWorkers(ctx, o.env, WorkersJob{Seg: &o.seg, Args: o.workerArgs, Dir: dir, QuietFlag: "--progress=never",
			Summary: func(res *bundle.Results) { o.printSummary(o.env.Stdout, res) },
			After:   func(res *bundle.Results) error { return o.save.write(o.env, res, dir) }})
	}
	prompts, err := o.prompts(cfg, opened)
	if err != nil {
		return err
	}
	pb := NewWaveBar(o.env.Stderr, o.progress, false)
	job := rehearsal.Job{
		Rehearsal: cfg, Dir: dir, Command: argv, Notes: notes, Prompts: &prompts, Tokenizer: &opened,
		WaveEvents: pb.Event, WavesDone: pb.Close, Coordination: o.seg.Coordination(), Progress: rehearsal.WarnLines(o.env.Stderr),
		Fail: func(err error) error {
			if de := (*rehearsal.DescriptorError)(nil); errors.As(err, &de) {
				return usageError("bench: %v", err)
			}
			return usageError("--tokenizer: %v", err)
		},
	}
	return rehearsal.Perform(ctx, job, rehearsal.Ending{Stdout: o.env.Stdout, Stderr: o.env.Stderr, Summary: o.printSummary,
		Verified: func(res *bundle.Results) error { return o.save.write(o.env, res, dir) }})
}

// openTokenizer opens the rehearsal's tokenizer through the one resolver:
// a model whose tokenizer is not at hand stops with what to pass.
func openTokenizer(ctx context.Context, cfg *config.Rehearsal) (rehearsal.OpenedTokenizer, error) {
	opened, err := rehearsal.OpenTokenizer(ctx, cfg)
	if stop := rehearsal.TokenizerStop(err, ""); stop != nil {
		return opened, stop
	} else if err != nil {
		return opened, usageError("--tokenizer: %v", err)
	}
	return opened, nil
}

// prompts resolves the rehearsal's prompts, a refusal named by the flag
// that gave them: the dataset (or --prompts), --max-model-len or the
// server's limit for a prompt too long, --skip-chat-template for a
// template that cannot render.
func (o *Bench) prompts(cfg *config.Rehearsal, opened rehearsal.OpenedTokenizer) (workload.Set, error) {
	prompts, err := rehearsal.Prompts(cfg, opened.Tokenizer)
	if ce := (*chattemplate.Error)(nil); errors.As(err, &ce) {
		return prompts, usageError("--dataset-name custom: %v; pass --skip-chat-template to send the prompts as they are", err)
	}
	if err == nil {
		return prompts, nil
	}
	flag := "--prompts"
	if o.dataset.name != "" {
		flag = "--dataset-name " + o.dataset.name
	}
	if tl := (*workload.TooLongError)(nil); errors.As(err, &tl) {
		flag = fmt.Sprintf("--max-model-len %d", o.dataset.maxModelLen)
		if !o.dataset.changed["max-model-len"] {
			flag = "the server's /v1/models"
		}
	}
	return prompts, usageError("%s: %v", flag, err)
}

// dir is the bundle's folder: -o, or rehearse-COMMAND-TIME.
func (o *Bench) dir(command string) string {
	if o.out != "" {
		return o.out
	}
	return "rehearse-" + command + "-" + time.Now().UTC().Format("20060102T150405Z")
}

// rehearsal is bench's rehearsal: one server already running at
// --base-url, the workload of the flags, no mechanism check; held to the
// one validation before the server is asked anything. Without --model the
// server's first listed model is taken, and a note says so.
func (o *Bench) rehearsal(ctx context.Context) (*config.Rehearsal, []string, error) {
	cfg, err := o.config()
	if err != nil {
		return nil, nil, err
	}
	if err := o.checkConfig(cfg); err != nil {
		return nil, nil, err
	}
	notes, err := o.firstModel(ctx, slices.Clone(o.vllm.notes))
	if err != nil {
		return nil, nil, err
	}
	o.setModel(cfg)
	return cfg, notes, nil
}

// setModel puts the model of the flags (or the one the server named) into
// cfg: the model requested, its max_model_len, the result file's run.
func (o *Bench) setModel(cfg *config.Rehearsal) {
	modelID := o.model
	if o.vllm.modelID != "" {
		modelID = o.vllm.modelID // --served-model-name is what the requests ask for
	}
	cfg.Model.ID, cfg.VLLM = modelID, o.vllmRun(modelID)
	cfg.Servers[0].Model, cfg.Servers[0].MaxModelLen = o.model, o.dataset.maxModelLen
}

// config is the rehearsal the flags make, before the server is asked for
// its model.
func (o *Bench) config() (*config.Rehearsal, error) {
	extra, err := o.parseExtraBody()
	if err != nil {
		return nil, err
	}
	if o.dataset.ignoreEOS {
		extra = maps.Clone(extra)
		if extra == nil {
			extra = map[string]any{}
		}
		extra["ignore_eos"] = true
	}
	extra = o.vllm.sampling(extra, endpoint.IsCompletions(o.endpoint))
	tok, err := o.tokenizerConfig()
	if err != nil {
		return nil, err
	}
	temperature, includeUsage := 0.0, o.includeUsage
	if o.vllm.changed["temperature"] && !o.vllm.serve {
		temperature = o.vllm.temperature // bench serve sends it as a sampling field, as vLLM
	}
	w := config.Workload{
		Concurrencies: o.concurrencies, Repeats: o.repeats, Prompts: o.dataset.prompts(o.promptsPath, o.seed),
		MaxTokens: o.maxTokens, Temperature: &temperature, Timeout: config.Duration(o.timeout),
		WarmupWaves: o.warmupWaves, WarmupConcurrency: o.warmupClients, WarmupWavesPerLoad: o.warmupPerLoad,
		Endpoint: o.endpoint, IncludeUsage: &includeUsage, ExtraBody: extra,
		Sessions: o.dataset.sessions(), RequestIDPrefix: o.vllm.requestIDPrefix, NumWarmups: o.numWarmups, Models: o.vllm.models, SideProbes: o.vllm.sideProbes,
	}
	if o.vllm.serve {
		w.BodyStyle = endpoint.StyleVLLM
	}
	if o.numWarmups > 0 && o.maxConcurrency > 0 {
		w.WarmupConcurrency = min(o.numWarmups, o.maxConcurrency) // vLLM's warm-ups share its gate
	}
	w.Mode = config.DefaultMode
	switch {
	case o.sustained():
		n := o.numRequests
		if n == 0 && o.duration == 0 {
			n = config.DefaultSustainedNumRequests
		}
		w.Concurrencies, w.Mode = []int{o.maxConcurrency}, config.ModeSustained
		w.Sustained = &config.Sustained{NumRequests: n, Duration: config.Duration(o.duration), WarmupRequests: o.warmupRequests}
	case len(o.requestRates) > 0 || o.ramp() || o.dataset.trace():
		if !o.closedSet {
			w.Concurrencies = []int{}
		}
		w.OpenLoop = &config.OpenLoop{
			RequestRatesRPS: o.requestRates, Arrival: o.arrival, Burstiness: o.burstiness, Seed: o.seed,
			NumRequests: o.numRequests, Duration: config.Duration(o.duration), MaxConcurrency: o.maxConcurrency,
			Pacing: o.pacing,
		}
		switch {
		case o.ramp():
			w.OpenLoop.Ramp = &config.Ramp{Strategy: o.rampStrategy, StartRPS: o.rampStartRPS, EndRPS: o.rampEndRPS}
		case o.dataset.trace():
			w.OpenLoop.Arrival, w.OpenLoop.Seed = workload.ArrivalTrace, 0
		}
	}
	cfg := &config.Rehearsal{
		Servers: []config.Server{{
			Name: o.name, BaseURL: strings.TrimRight(o.baseURL, "/"), APIKeyEnv: o.apiKeyEnv,
			FollowRedirects: o.followRedirs, StopGrace: config.Duration(config.DefaultStopGrace),
			Ready:   config.Ready{Path: config.DefaultReadyPath, Timeout: config.Duration(o.readyTimeout), Mode: o.ready},
			Metrics: config.Metrics{Path: config.DefaultMetricsPath, Metric: config.DefaultMetric},
		}},
		Workload:        w,
		Tokenizer:       tok,
		OnServerFailure: config.OnFailureStop,
	}
	o.setModel(cfg)
	cfg.Servers[0].Headers, cfg.Servers[0].InsecureTLS = o.vllm.headerPairs, o.vllm.insecure
	o.replicas(&cfg.Servers[0])
	if err := o.slo.Apply(cfg); err != nil {
		return nil, err
	}
	cfg.Cost = o.cost.config()
	return cfg, nil
}

// firstModel takes, without --model, the server's first listed model (and
// its max_model_len, where it lists one) and says so in notes.
func (o *Bench) firstModel(ctx context.Context, notes []string) ([]string, error) {
	if o.model != "" {
		return notes, nil
	}
	apiKey := ""
	if o.apiKeyEnv != "" {
		apiKey = os.Getenv(o.apiKeyEnv)
	}
	m, err := rehearsal.FirstModel(ctx, o.baseURL, apiKey, o.vllm.insecure)
	if err != nil {
		// The server failed to answer, not the user: exit 1.
		return nil, &exitcode.Error{Code: 1, Err: fmt.Errorf("--model not given, and the server did not name one: %v", config.RedactURL(err.Error()))}
	}
	o.model = m.ID
	notes = append(notes, fmt.Sprintf("model %q was taken from the server's /v1/models", o.model))
	switch {
	case o.dataset.maxModelLen == 0 && m.MaxModelLen > 0 && o.tokenizer == rehearsal.VariantUsage:
		// Nothing counts the prompts: the server's limit cannot be
		// checked, and a limit the user did not give refuses nothing.
		notes = append(notes, fmt.Sprintf("the server's max_model_len %d was not checked: --tokenizer usage counts no prompt", m.MaxModelLen))
	case o.dataset.maxModelLen == 0 && m.MaxModelLen > 0:
		// The same answer tells vLLM's context length: checked as --max-model-len is.
		o.dataset.maxModelLen = m.MaxModelLen
		notes = append(notes, fmt.Sprintf("max_model_len %d was taken from the server's /v1/models", m.MaxModelLen))
	}
	return notes, nil
}

// tokenizerConfig turns --tokenizer into the rehearsal's tokenizer choice:
// a tokenizer.json path or a model's folder (as vllm bench serve's
// --tokenizer takes it), ORG/NAME[@REV] whose own tokenizer.json the one
// resolver finds, an embedded variant, or usage; empty leaves the choice to
// the resolver (the --model's own tokenizer, or a stop saying what to pass).
func (o *Bench) tokenizerConfig() (config.Tokenizer, error) {
	spec := o.tokenizer
	_, statErr := os.Stat(spec)
	switch {
	case spec == "":
		return config.Tokenizer{}, nil
	case spec == rehearsal.VariantUsage || spec == tokenizer.VariantQwen3 || spec == tokenizer.VariantQwen25:
		return config.Tokenizer{Variant: spec}, nil
	case statErr == nil:
		return config.Tokenizer{Path: spec}, nil
	case strings.Contains(spec, "/") && !strings.HasSuffix(spec, ".json"):
		id, rev, _ := strings.Cut(spec, "@")
		return config.Tokenizer{Model: id, Revision: rev}, nil
	}
	return config.Tokenizer{}, usageError("--tokenizer %q: no such file, and not ORG/NAME[@REV], qwen3, qwen2.5 or usage", spec)
}

// endpoints are the server's addresses: each --base-url (trimmed of a
// trailing /), or the one of --host/--port.
func (o *Bench) endpoints() []string {
	if len(o.baseURLs) == 0 {
		return []string{strings.TrimRight(o.baseURL, "/")}
	}
	out := make([]string, len(o.baseURLs))
	for i, b := range o.baseURLs {
		out[i] = strings.TrimRight(b, "/")
	}
	return out
}

// replicas makes s the server of several --base-url (replicas already
// running, balanced by the client; SPEC §10) and gives it --gpus's GPUs,
// split evenly over its replicas, for the per-GPU figures. The GPU
// indices are labels 0 to N-1: rehearse sets no device of a server it
// did not launch.
func (o *Bench) replicas(s *config.Server) {
	urls := o.endpoints()
	if len(urls) > 1 {
		s.BaseURLs, s.Replicas, s.Balance = urls, len(urls), o.balance
		if s.Balance == "" {
			s.Balance = config.BalanceRoundRobin
		}
	}
	if !o.cost.gpusSet {
		return
	}
	per := o.cost.gpus / len(urls)
	s.GPUs = make([][]int, len(urls))
	for j := range s.GPUs {
		for g := range per {
			s.GPUs[j] = append(s.GPUs[j], j*per+g)
		}
	}
}
