package bundle

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/search"
	"github.com/rehearse/rehearse/internal/vllmcli"
)

// Schema is the version string of results.json this package reads and writes.
const Schema = "rehearse/results/v1"

// File names inside a bundle.
const (
	ResultsFile = "results.json"
	JournalFile = "journal.jsonl"
	SumsFile    = "SHA256SUMS"
	ReadmeFile  = "README.md"
)

// Results is the content of results.json (SPEC §4a). Field names are a public
// interface: more may be added, none renamed.
type Results struct {
	Schema         string               `json:"schema"`
	Provenance     Provenance           `json:"provenance"`
	Workload       Workload             `json:"workload"`
	Baseline       *string              `json:"baseline"`
	Servers        []Server             `json:"servers"`
	Waves          []contract.Wave      `json:"waves"`
	Records        []contract.Record    `json:"records"`
	Aggregates     []contract.Aggregate `json:"aggregates"`
	MechanismCheck *MechanismCheck      `json:"mechanism_check"`
	Notes          []string             `json:"notes"`
	// SLO is the rehearsal's objectives and attainment target (SPEC §3);
	// when set, every aggregate carries its slo field. Absent when the
	// rehearsal has none.
	SLO *contract.SLO `json:"slo,omitempty"`
	// Capacity is each searched server's capacity under SLO (SPEC §8),
	// written as the search goes; absent when no search ran.
	Capacity []search.Capacity `json:"capacity,omitempty"`
	// Cost prices the capacity answers and aggregates at provenance.cost
	// (cost per million output tokens); absent without it. Recomputed.
	Cost *Cost `json:"cost,omitempty"`
	// OperatorNotes is markdown written by a person about the figures
	// (what differs from another run, what they show, limitations), set
	// by `rehearse annotate`; it derives from nothing and verify leaves it
	// alone.
	OperatorNotes string `json:"operator_notes,omitempty"`

	// stored holds the keys the decoded results.json carried (nil for
	// results built in memory).
	stored *storedKeys
	// recordSums are, where the stream decoder read the records, a keyed
	// hash of each record's bytes as results.json holds them, less the
	// space between tokens (recordSum): what compareJournal compares the
	// journal's record lines with before it marshals anything.
	recordSums []recordSum
	// lean: the records are lean (LeanRecord, ReadReport);
	// generatedText is then whether any streamed reasoning or tool-call
	// text (HasGeneratedText).
	lean, generatedText bool
}

// storedKeys are the keys of each wave and aggregate of a decoded
// results.json. SPEC §4a lets a file carry only the fields it lists: verify
// checks a field beyond that list only where it was stored.
type storedKeys struct {
	waves, aggregates []map[string]bool
}

// waveHas reports whether waves[i] carried key; true where nothing is known.
func (r *Results) waveHas(i int, key string) bool {
	return r.stored == nil || i >= len(r.stored.waves) || r.stored.waves[i][key]
}

// aggregateHas reports whether aggregates[i] carried key; true where nothing
// is known.
func (r *Results) aggregateHas(i int, key string) bool {
	return r.stored == nil || i >= len(r.stored.aggregates) || r.stored.aggregates[i][key]
}

// Provenance says what produced the figures: tool, time, machine, model,
// tokenizer and, for simulated servers, the simulation.
type Provenance struct {
	Tool       Tool      `json:"tool"`
	Command    []string  `json:"command,omitempty"`
	StartedAt  string    `json:"started_at"`
	FinishedAt string    `json:"finished_at"`
	Host       Host      `json:"host"`
	GPUs       []GPU     `json:"gpus"`
	Runtimes   []Runtime `json:"runtimes,omitempty"`
	Model      Model     `json:"model"`
	Tokenizer  Tokenizer `json:"tokenizer"`
	// OutputTokensSource says what output_tokens counts: "tokenizer" (the
	// text re-tokenized) or "usage" (the server's own completion_tokens).
	OutputTokensSource string      `json:"output_tokens_source"`
	Simulation         *Simulation `json:"simulation,omitempty"`
	// Cost is the hardware's price as given (--gpu-hour-cost, --gpus),
	// the basis of the cost block; absent when none was given.
	Cost *CostBasis `json:"cost,omitempty"`
	// Worker is the load-generator worker that wrote this bundle, when the
	// plan was split into segments (SPEC §10); absent otherwise.
	Worker *Worker `json:"worker,omitempty"`
	// Workers, on a bundle merged from segments, is every segment's
	// worker, by index.
	Workers []Worker `json:"workers,omitempty"`
}

// Worker is one worker of a split plan: segment Index of Count, the
// digest of the plan it ran (rehearsal.PlanDigest: segments of different
// plans do not merge), its clock's measured offset from the coordinator's
// (coordinator − worker, seconds) with that measurement's uncertainty
// (half the least round trip), and the coordinator it followed ("" when
// it ran one wave at --start-at without one).
type Worker struct {
	Index              int     `json:"index"`
	Count              int     `json:"count"`
	PlanDigest         string  `json:"plan_digest"`
	ClockOffsetS       float64 `json:"clock_offset_s"`
	OffsetUncertaintyS float64 `json:"offset_uncertainty_s"`
	Coordinator        string  `json:"coordinator,omitempty"`
	StartAt            string  `json:"start_at,omitempty"`
	// Host is the worker's host name (set on a merged bundle's list).
	Host string `json:"host,omitempty"`
}

// Tool identifies the rehearse build, from its build info.
type Tool struct {
	Name      string `json:"name"`
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"go_version"`
	// Note says what the commit does not: that it is unknown (the binary
	// carries no VCS stamp) and how to get it recorded, or that the tree
	// had uncommitted changes.
	Note string `json:"note,omitempty"`
}

// UnmarshalJSON reads the object rehearse writes or, as other tools write
// provenance.tool, a string ("vllm-bench-convert 0.3"), kept as Name.
func (t *Tool) UnmarshalJSON(data []byte) error {
	if len(data) > 0 && data[0] == '"' {
		var name string
		if err := json.Unmarshal(data, &name); err != nil {
			return err
		}
		*t = Tool{Name: name}
		return nil
	}
	type object Tool
	return json.Unmarshal(data, (*object)(t))
}

// Host describes the machine the load generator ran on.
type Host struct {
	Hostname    string `json:"hostname"`
	OS          string `json:"os"`
	Arch        string `json:"arch"`
	CPU         string `json:"cpu,omitempty"`
	CPUs        int    `json:"cpus"`
	MemoryBytes uint64 `json:"memory_bytes,omitempty"`
	Kernel      string `json:"kernel,omitempty"`
}

// GPU is one accelerator as nvidia-smi reports it.
type GPU struct {
	Name      string `json:"name"`
	MemoryMiB int    `json:"memory_mib"`
	Driver    string `json:"driver"`
	CUDA      string `json:"cuda,omitempty"`
}

// Runtime is a named runtime component and its version (python, torch, vllm …).
type Runtime struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Server  string `json:"server,omitempty"`
}

// Model is the model under test, as the rehearsal file declares it.
type Model struct {
	ID            string `json:"id"`
	Revision      string `json:"revision,omitempty"`
	Dtype         string `json:"dtype,omitempty"`
	RandomWeights bool   `json:"random_weights,omitempty"`
	Note          string `json:"note,omitempty"`
}

// Tokenizer identifies the file that counted output tokens.
type Tokenizer struct {
	Name    string `json:"name"`
	Source  string `json:"source"`
	SHA256  string `json:"sha256"`
	Variant string `json:"variant,omitempty"`
}

// Simulation is present when servers were simulated: no figure of such a
// bundle is a GPU measurement.
type Simulation struct {
	TimeScale float64           `json:"time_scale"`
	Profiles  map[string]string `json:"profiles"`
	Note      string            `json:"note"`
}

// Workload is what was sent (SPEC §1).
type Workload struct {
	Kind          string   `json:"kind"`
	Concurrencies []int    `json:"concurrencies"`
	Repeats       int      `json:"repeats"`
	Prompts       []string `json:"prompts"`
	MaxTokens     int      `json:"max_tokens"`
	Temperature   float64  `json:"temperature"`
	TimeoutS      float64  `json:"timeout_s"`
	WarmupWaves   int      `json:"warmup_waves"`
	// WarmupConcurrency is the clients of each warm-up wave; 0 (absent)
	// means the first concurrency.
	WarmupConcurrency int `json:"warmup_concurrency,omitempty"`
	// WarmupWavesPerLoad is the unrecorded closed-loop waves at each
	// concurrency just before its recorded ones (0: none).
	WarmupWavesPerLoad int            `json:"warmup_waves_per_load,omitempty"`
	PercentileMethod   string         `json:"percentile_method"`
	Endpoint           string         `json:"endpoint,omitempty"`
	IncludeUsage       bool           `json:"include_usage"`
	ExtraBody          map[string]any `json:"extra_body,omitempty"`
	Open               *OpenLoop      `json:"open_loop,omitempty"`
	MechanismCheck     *MechanismSpec `json:"mechanism_check,omitempty"`
	// Sustained, when set, makes the waves at each concurrency sustained
	// closed loops (mode "sustained") instead of closed-loop waves.
	Sustained *Sustained `json:"sustained,omitempty"`
	// PromptMaxTokens is each prompt's own max_tokens, aligned with
	// Prompts (0: MaxTokens); absent when no prompt sets one.
	PromptMaxTokens []int `json:"prompt_max_tokens,omitempty"`
	// PromptMessages is each prompt's whole conversation where its source
	// gives one (chat JSONL), aligned with Prompts (null: Prompts[i] as one
	// user message); absent when no prompt has one.
	PromptMessages [][]Message `json:"prompt_messages,omitempty"`
	// ArrivalsS is when each prompt is sent, in seconds from its wave's
	// release, where the source is a trace replayed by open-loop waves of
	// arrival "trace" (aligned with Prompts); absent otherwise.
	ArrivalsS []float64 `json:"arrivals_s,omitempty"`
	// Sessions are the workload's multi-turn sessions, each a list of its
	// user turns in order as indices into Prompts; absent without
	// sessions. A record of a session's turn names it (record.session,
	// record.turn); the turn sends the first turn's messages, then for each
	// turn before it the reply its client received (that turn's
	// record.text) as an assistant message and the next user turn.
	Sessions []Session `json:"sessions,omitempty"`
	// ThinkTime is the pause before each later turn of a session; absent
	// without one.
	ThinkTime *ThinkTime `json:"think_time,omitempty"`
	// BodyStyle is absent for rehearse's request body, "vllm" for vllm
	// bench serve's (endpoint.StyleVLLM; Temperature is then unused, and a
	// temperature sent is extra_body's).
	BodyStyle string `json:"body_style,omitempty"`
	// RequestIDPrefix, when set, is the x-request-id of every recorded
	// request, followed by its prompt's index (vLLM's --request-id-prefix).
	RequestIDPrefix string `json:"request_id_prefix,omitempty"`
	// NumWarmups is the requests of one warm-up wave before the recorded
	// ones (vLLM's --num-warmups), at most WarmupConcurrency in flight;
	// absent when none.
	NumWarmups int `json:"num_warmups,omitempty"`
	// Models, when set, are the model names (LoRA adapters) the prompts
	// were assigned, and how (vLLM's --lora-modules, --lora-assignment);
	// absent when every request asked for the server's model.
	Models *Models `json:"models,omitempty"`
	// PromptModels is the model prompt i's recorded requests asked for
	// (their record.model), aligned with Prompts; absent without Models.
	PromptModels []string `json:"prompt_models,omitempty"`
	// SideProbes, when set, were sent beside every planned recorded wave
	// (vLLM's --probe-request-rate): their records are waves of kind
	// side_probe, and their figures each aggregate's side_probes.
	SideProbes *SideProbes `json:"side_probes,omitempty"`
	// VLLM is the vllm bench serve command line the workload came from,
	// as its result file records it; absent otherwise.
	VLLM *vllmcli.Run `json:"vllm,omitempty"`
	// PromptSource says where Prompts came from; absent in bundles
	// written before sources were recorded.
	PromptSource *PromptSource `json:"prompt_source,omitempty"`
	// Capacity is the capacity search each server gets after its planned
	// waves (each server's own, with its predicted bracket, is in
	// Results.Capacity); absent when none.
	Capacity *search.Spec `json:"capacity,omitempty"`
}

// Models are the model names a workload's prompts were assigned, the
// assignment (random or round-robin, workload.AssignModels) and the seed
// of a random one.
type Models struct {
	Names      []string `json:"names"`
	Assignment string   `json:"assignment"`
	Seed       int64    `json:"seed"`
}

// SideProbes are what each side probe sent (prompt, as one user message
// or the completions prompt, and max_tokens, to the server's model) and
// the rate: the next probe went 1/rate_rps seconds after the last ended.
// A side probe's record has prompt −1 (it sent this prompt, none of
// workload.prompts).
type SideProbes struct {
	RateRPS   float64 `json:"rate_rps"`
	Prompt    string  `json:"prompt"`
	MaxTokens int     `json:"max_tokens"`
}

// Session is one multi-turn session: its user turns, indices into
// workload.prompts.
type Session struct {
	Turns []int `json:"turns"`
}

// ThinkTime is the pause between a reply's end and the session's next
// turn: mean_s seconds, fixed or drawn (exponential; uniform over [0,
// 2·mean_s]) from a generator seeded with seed, the session's run and the
// turn.
type ThinkTime struct {
	MeanS        float64 `json:"mean_s"`
	Distribution string  `json:"distribution"`
	Seed         int64   `json:"seed,omitempty"`
}

// Message is one chat message of a prompt.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// PromptSource is the prompt source of a workload: its name, parameters,
// SHA-256 (of its file, or of the resolved prompts where there is none)
// and the dataset entries it skipped, by reason.
type PromptSource struct {
	Name    string         `json:"name"`
	Params  map[string]any `json:"params,omitempty"`
	SHA256  string         `json:"sha256"`
	Count   int            `json:"count"`
	Skipped map[string]int `json:"skipped,omitempty"`
}

// Sustained bounds each sustained closed-loop wave: num_requests measured
// requests, duration_s of the measured part, or both (whichever ends
// first), after warmup_requests requests of warm-up (a wave of their own).
type Sustained struct {
	NumRequests    int     `json:"num_requests,omitempty"`
	DurationS      float64 `json:"duration_s,omitempty"`
	WarmupRequests int     `json:"warmup_requests"`
}

// OpenLoop is the arrival schedule of open-loop waves.
type OpenLoop struct {
	RequestRatesRPS []float64 `json:"request_rates_rps"`
	Arrival         string    `json:"arrival"`
	Burstiness      float64   `json:"burstiness,omitempty"`
	Seed            int64     `json:"seed"`
	NumRequests     int       `json:"num_requests,omitempty"`
	DurationS       float64   `json:"duration_s,omitempty"`
	MaxConcurrency  int       `json:"max_concurrency,omitempty"`
	// Ramp, when set, makes each repeat one ramp-up wave (rate from
	// start_rps to end_rps) instead of a wave per rate; RequestRatesRPS is
	// then empty.
	Ramp *contract.Ramp `json:"ramp,omitempty"`
	// Pacing is absent for rehearse's arrival schedules, "vllm" for vllm
	// bench serve's (workload.PacingVLLM).
	Pacing string `json:"pacing,omitempty"`
}

// MechanismSpec is the configured mechanism check.
type MechanismSpec struct {
	Server      string  `json:"server"`
	Metric      string  `json:"metric"`
	Concurrency int     `json:"concurrency"`
	PeriodS     float64 `json:"period_s"`
	// Evidence is EvidenceClient where the rehearsal asked for no server
	// metric (the server has no metrics endpoint); absent: the metric.
	Evidence string `json:"evidence,omitempty"`
}

// What a mechanism check rests on (MechanismCheck.Evidence).
const (
	// EvidenceMetric: the server's metric, of which at least one sample
	// was read.
	EvidenceMetric = "metric"
	// EvidenceClient: no sample of a server metric was read (none was
	// asked for, or every scrape failed); the check rests on the client's
	// own records of the wave alone (MechanismCheck.Client).
	EvidenceClient = "client"
)

// Server is one server under test.
type Server struct {
	Name    string `json:"name"`
	BaseURL string `json:"base_url"`
	Model   string `json:"model,omitempty"`
	// LaunchArgv is empty for an endpoint that was already running.
	LaunchArgv []string `json:"launch_argv"`
	// Env holds the environment overrides, secrets redacted.
	Env map[string]string `json:"env,omitempty"`
	// Prepare are the commands run once the server answered, before the
	// rest of its readiness (ollama create), as the rehearsal file gives
	// them, secrets redacted; the log shows each as run.
	Prepare     [][]string `json:"prepare,omitempty"`
	Log         string     `json:"log,omitempty"`
	MetricsPath string     `json:"metrics_path,omitempty"`
	// Exit says how the launched process ended ("stopped by rehearse",
	// "exited with status 3 at 12:03:04Z during a wave", …).
	Exit      string `json:"exit,omitempty"`
	Simulated string `json:"simulated,omitempty"`
	// GPUs is the GPU set of each replica as the rehearsal file gave them
	// (absent: not said); the server's GPU count is their distinct GPUs.
	GPUs [][]int `json:"gpus,omitempty"`
	// Replicas are the processes of a server of several (SPEC §10), each
	// with its own address, argv, log and exit; absent for one process.
	Replicas []Replica `json:"replicas,omitempty"`
	// Router is the launched or named router the requests went to;
	// Balance the client's balancing over Replicas otherwise.
	Router  *Router `json:"router,omitempty"`
	Balance string  `json:"balance,omitempty"`
}

// Replica is one process of a server of several.
type Replica struct {
	Index      int      `json:"index"`
	BaseURL    string   `json:"base_url"`
	LaunchArgv []string `json:"launch_argv"`
	GPUs       []int    `json:"gpus,omitempty"`
	Log        string   `json:"log,omitempty"`
	Exit       string   `json:"exit,omitempty"`
}

// Router is the router in front of a server's replicas.
type Router struct {
	BaseURL    string   `json:"base_url"`
	LaunchArgv []string `json:"launch_argv,omitempty"`
	Log        string   `json:"log,omitempty"`
	Exit       string   `json:"exit,omitempty"`
}

// MechanismCheck is the polled metric series of the mechanism-check wave.
type MechanismCheck struct {
	Server      string       `json:"server"`
	Metric      string       `json:"metric"`
	Concurrency int          `json:"concurrency"`
	PeriodS     float64      `json:"period_s"`
	Wave        int          `json:"wave"`
	Max         *float64     `json:"max"`
	Series      [][2]float64 `json:"series"`
	Errors      int          `json:"scrape_errors,omitempty"`
	// NonFinite counts scrapes that answered NaN or ±Inf; they are not in
	// Series (JSON cannot hold them).
	NonFinite int `json:"scrape_non_finite,omitempty"`
	// LabelSets is the metric per label set (vLLM's engine="0",
	// engine="1"), whose sum is Series, where the page had more than one.
	LabelSets []LabelSeries `json:"label_sets,omitempty"`
	// Replicas is the metric of each replica of a server of several,
	// each polled at the same ticks; Series is their sum at the ticks
	// every replica answered.
	Replicas []ReplicaSeries `json:"replicas,omitempty"`
	// Evidence is what the check rests on: EvidenceMetric or
	// EvidenceClient. Absent in bundles made before it: the metric.
	Evidence string `json:"evidence,omitempty"`
	// Client is what the wave's own records show of the server's
	// concurrency, read without any server metric; verify recomputes it
	// from the records of Wave. Absent in bundles made before it.
	Client *contract.ClientConcurrency `json:"client,omitempty"`
}

// RestsOnClient reports whether the check rests on the client's records
// alone: no sample of a server metric was read.
func (m *MechanismCheck) RestsOnClient() bool { return m.Evidence == EvidenceClient }

// Finding is what the check found, in a line: the metric's peak, or, where
// it rests on the client's records, theirs.
func (m *MechanismCheck) Finding() string {
	if m.RestsOnClient() {
		if m.Client == nil {
			return fmt.Sprintf("no server metric of %s read", m.Server)
		}
		return fmt.Sprintf("no server metric of %s read; the client's records: at most %d requests streaming at once, of %d in flight",
			m.Server, m.Client.StreamingMax, m.Client.InFlightMax)
	}
	max := "no sample"
	if m.Max != nil {
		max = strconv.FormatFloat(*m.Max, 'g', -1, 64)
	}
	return fmt.Sprintf("%s of %s peaked at %s over %d samples", m.Metric, m.Server, max, len(m.Series))
}

// LabelSeries is a metric's series for one label set.
type LabelSeries struct {
	Labels string       `json:"labels"`
	Max    *float64     `json:"max"`
	Series [][2]float64 `json:"series"`
}

// ReplicaSeries is one replica's series of the mechanism check's metric.
type ReplicaSeries struct {
	Replica   int           `json:"replica"`
	Max       *float64      `json:"max"`
	Series    [][2]float64  `json:"series"`
	Errors    int           `json:"scrape_errors,omitempty"`
	LabelSets []LabelSeries `json:"label_sets,omitempty"`
}

// Recompute sets Aggregates from Waves and Records by the contract, with
// each aggregate's slo field where the results have objectives.
func (r *Results) Recompute() {
	r.Aggregates = r.ComputeAggregates()
	for i, c := range r.Capacity {
		if want, err := RecomputeCapacity(r, c); err == nil {
			r.Capacity[i] = want
		}
	}
	r.Cost = r.ComputeCost()
}

// RecomputeCapacity is the capacity entry c of a server recomputed from the
// waves and records of r alone (its search, objectives and target are c's;
// that the server failed is known from c's stop reason only).
func RecomputeCapacity(r *Results, c search.Capacity) (search.Capacity, error) {
	slo := contract.SLO{Objectives: c.Objectives, AttainmentTarget: c.AttainmentTarget}
	return search.Recompute(c.Server, c.Search, slo, r.Waves, r.Records, c.StopReason == search.StopServerFailed)
}

// ComputeAggregates returns the aggregates of Waves and Records by the
// contract, with their slo fields against SLO when it is set.
func (r *Results) ComputeAggregates() []contract.Aggregate {
	aggs := contract.Aggregates(r.Waves, r.Records, r.ServerNames(), r.BaselineName())
	contract.ApplySLO(aggs, r.Waves, r.Records, r.SLO)
	contract.ApplyReplicas(aggs, r.Waves, r.Records, r.Shapes())
	contract.ApplyApart(aggs, r.Waves, r.Records)
	return aggs
}

// ServerNames lists the servers in the order the rehearsal named them.
func (r *Results) ServerNames() []string {
	names := make([]string, 0, len(r.Servers))
	for _, s := range r.Servers {
		names = append(names, s.Name)
	}
	return names
}

// BaselineName is the baseline server's name, or "".
func (r *Results) BaselineName() string {
	if r.Baseline == nil {
		return ""
	}
	return *r.Baseline
}
