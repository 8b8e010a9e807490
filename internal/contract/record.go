package contract

import (
	"sort"
	"strconv"
)

// Wave kinds. Only records of recorded waves enter aggregates.
const (
	KindRecorded       = "recorded"
	KindWarmup         = "warmup"
	KindMechanismCheck = "mechanism_check"
	// KindSideProbe is the wave of side probes sent beside a recorded
	// wave (vLLM's --probe-request-rate): one small request at a time,
	// never in the recorded wave's aggregates; its figures are the
	// aggregate's side_probes (Wave.Beside names the recorded wave).
	KindSideProbe = "side_probe"
)

// Load modes of a wave.
const (
	ModeClosed = "closed" // N clients released together, one request each
	ModeOpen   = "open"   // requests sent on an arrival schedule
	// ModeSustained is the sustained closed loop: Concurrency clients, each
	// sending its next request as soon as its last one ended, until a
	// number of requests or a duration. Its warm-up requests are a wave of
	// kind warmup of their own (mode sustained), released at the first
	// warm-up send; the measured requests are the recorded wave, released at
	// the first measured send. Records of either are ordinary records:
	// client is which of the Concurrency clients sent it.
	ModeSustained = "sustained"
)

// IsClosed reports whether mode is the closed-loop wave of N clients
// released together ("" is closed, as older bundles wrote it).
func IsClosed(mode string) bool { return mode == "" || mode == ModeClosed }

// Failure kinds (SPEC §2).
const (
	ErrTimeout         = "timeout"
	ErrConnect         = "connect"
	ErrHTTPStatus      = "http_status"
	ErrStreamTruncated = "stream_truncated"
	ErrStreamMalformed = "stream_malformed"
	ErrServerError     = "server_error"
	ErrCanceled        = "canceled"
	// ErrClient is a failure the load generator caused (out of file
	// descriptors or ephemeral ports, a request it could not build): never
	// the server's.
	ErrClient = "client"
)

// ErrorKinds lists every failure kind a record may carry.
var ErrorKinds = []string{ErrTimeout, ErrConnect, ErrHTTPStatus, ErrStreamTruncated, ErrStreamMalformed, ErrServerError, ErrCanceled, ErrClient}

// IsErrorKind reports whether kind is one of ErrorKinds.
func IsErrorKind(kind string) bool {
	for _, k := range ErrorKinds {
		if k == kind {
			return true
		}
	}
	return false
}

// Record is one request attempt (SPEC §2). Times are seconds on the
// monotonic clock relative to the release of the record's wave.
type Record struct {
	Kind        string `json:"kind"`
	Server      string `json:"server"`
	Concurrency int    `json:"concurrency"`
	Repeat      int    `json:"repeat"`
	// Wave is the id of the record's wave in Results.Waves.
	Wave   int `json:"wave"`
	Client int `json:"client"`
	// Prompt is the index into workload.prompts.
	Prompt int `json:"prompt"`

	IntendedStartS float64 `json:"intended_start_s"`
	StartS         float64 `json:"start_s"`
	EndS           float64 `json:"end_s"`
	// FirstContentS is the arrival of the first chunk with non-empty
	// content; kept on failed records too, nil when none arrived.
	FirstContentS *float64  `json:"first_content_s"`
	ChunkTimesS   []float64 `json:"chunk_times_s"`
	// FirstTokenS is the arrival of the first chunk carrying any generated
	// text: content, reasoning or tool-call arguments (FirstContentS or
	// earlier); kept on failed records too, absent (null) when none arrived
	// or the bundle predates it.
	FirstTokenS *float64 `json:"first_token_s,omitempty"`

	OK         bool   `json:"ok"`
	ErrorKind  string `json:"error_kind,omitempty"`
	Error      string `json:"error,omitempty"`
	HTTPStatus int    `json:"http_status,omitempty"`
	// RetryAfterS is the server's Retry-After on an HTTP 429 or 503, in
	// seconds (from either form, delay-seconds or an HTTP date); nil
	// (absent) when the server sent none.
	RetryAfterS *float64 `json:"retry_after_s,omitempty"`
	// Redacted is true when a secret was scrubbed from this record's text
	// or error; OutputTokens was counted before the scrub, so verify skips
	// its re-count.
	Redacted bool `json:"redacted,omitempty"`

	Text string `json:"text"`
	// OutputTokens is Text re-tokenized with the pinned tokenizer.
	OutputTokens          int    `json:"output_tokens"`
	UsageCompletionTokens *int   `json:"usage_completion_tokens"`
	UsagePromptTokens     *int   `json:"usage_prompt_tokens"`
	FinishReason          string `json:"finish_reason,omitempty"`
	// ReasoningText is the reasoning channel's text (delta.reasoning, or
	// delta.reasoning_content), kept apart from Text; "" when the server
	// streamed none. It is stored so that verify can re-count
	// ReasoningTokens as it re-counts OutputTokens.
	ReasoningText string `json:"reasoning_text,omitempty"`
	// ReasoningTokens is ReasoningText re-tokenized with the pinned
	// tokenizer, kept apart from OutputTokens (goodput stays content
	// tokens); nil (absent) when no reasoning text arrived, or when no
	// tokenizer counted it (output_tokens_source usage).
	ReasoningTokens *int `json:"reasoning_tokens,omitempty"`
	// ToolCallText is the arguments text of the stream's delta.tool_calls,
	// concatenated in arrival order; "" when none came. It is kept, not
	// counted: the tokens a tool call cost also spell its name and syntax,
	// which the server's parser took out (usage_completion_tokens has the
	// server's count of everything generated).
	ToolCallText string `json:"tool_call_text,omitempty"`
	// Retried says why the request was sent a second time on a fresh
	// connection, which is only done when no byte of the first attempt
	// reached the server (e.g. "stale connection: closed by the server
	// while idle"); "" when it was sent once.
	Retried string `json:"retried,omitempty"`
	// InputTokens is the prompt's message content counted by the client
	// with the pinned tokenizer (the server's template adds its own, seen
	// in UsagePromptTokens); nil where no tokenizer counted it.
	InputTokens *int `json:"input_tokens,omitempty"`
	// MaxTokens is the output limit this request asked for.
	MaxTokens int `json:"max_tokens,omitempty"`
	// Model is the model name the request's body asked for where the
	// plan gives each prompt its own (a LoRA adapter of vLLM's
	// --lora-modules: workload.prompt_models[prompt]); "" (absent) where
	// it asked for the server's model.
	Model string `json:"model,omitempty"`
	// Session is the index into workload.sessions of the conversation this
	// request is a turn of; nil for a request that is no session's turn.
	Session *int `json:"session,omitempty"`
	// Turn is which turn of its session the request is, 1 for the first;
	// 0 (absent) for a request that is no session's turn. Turn t+1 is sent
	// after turn t ended, by the same client, carrying the user turns so
	// far and the replies (text) of the turns before it.
	Turn int `json:"turn,omitempty"`
	// Replica is the index of the replica of a server of several that the
	// client sent this request to (client balancing, SPEC §10); nil for a
	// single-process server and for one behind a router.
	Replica *int `json:"replica,omitempty"`
	// ClientAddedS summarizes, over the events of the stream that carried
	// the server's send stamp (rehearse sim --stamp-sends), the client's
	// receive stamp minus the server's send stamp on the same host's wall
	// clock: the latency loopback, the kernel and (where the client stamps
	// its reads itself rather than taking the kernel's receive stamp) the
	// client's own queue added to the times above. nil (absent) when the
	// server sent no stamps.
	ClientAddedS *ClientAdded `json:"client_added_s,omitempty"`
	// Worker is which load-generator worker sent the request, when the
	// plan was split into segments (SPEC §10); nil (absent) otherwise. Its
	// client (or request) index stays the one of the whole plan.
	Worker *int `json:"worker,omitempty"`
	// Request is the request's place in its sustained wave's send order
	// (0 first; of a worker's share, in a split plan): a capacity probe's
	// verdict is taken on the first requests sent (SPEC §8), and verify
	// checks that every place up to the last is recorded once. nil (absent)
	// on other waves and in bundles made before it was recorded.
	Request *int `json:"request,omitempty"`
}

// ClientAdded is a record's client-added latency: how many stamped events
// it covers and their p50 (type 7), p99 (type 7) and largest value, in
// seconds.
type ClientAdded struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// SummarizeAdded summarizes per-event client-added latencies in
// nanoseconds; nil when there are none.
func SummarizeAdded(ns []int64) *ClientAdded {
	if len(ns) == 0 {
		return nil
	}
	xs := make([]float64, len(ns))
	for i, v := range ns {
		xs[i] = float64(v) / 1e9
	}
	sort.Float64s(xs)
	return &ClientAdded{N: len(xs), P50: *Percentile(xs, 0.5), P99: *Percentile(xs, 0.99), Max: xs[len(xs)-1]}
}

// RequiredRecordFields are the JSON keys every record must carry; a decoder
// that meets a record without one of them rejects it by name.
var RequiredRecordFields = []string{
	"kind", "server", "concurrency", "repeat", "wave", "client", "prompt",
	"intended_start_s", "start_s", "end_s", "first_content_s", "chunk_times_s",
	"ok", "text", "output_tokens",
}

// Wave is one release of load against one server: a closed-loop wave of
// Concurrency clients, or an open-loop run of arrivals.
type Wave struct {
	ID          int    `json:"id"`
	Server      string `json:"server"`
	Concurrency int    `json:"concurrency"`
	Repeat      int    `json:"repeat"`
	Kind        string `json:"kind"`
	Mode        string `json:"mode"`
	// StartedAt is the wall-clock anchor of the release, RFC 3339 UTC.
	StartedAt string `json:"started_at"`
	// WallS is the largest end_s among the wave's records (every mode; a
	// sustained wave's goodput is over WaveWindowS instead).
	WallS float64 `json:"wall_s"`
	Cold  bool    `json:"cold"`
	// ReleaseSpreadS is the last start_s minus the first (closed loop only).
	ReleaseSpreadS float64 `json:"release_spread_s"`

	// Open-loop schedule, zero for closed waves.
	RequestRateRPS float64 `json:"request_rate_rps,omitempty"`
	Arrival        string  `json:"arrival,omitempty"`
	Burstiness     float64 `json:"burstiness,omitempty"`
	Seed           int64   `json:"seed,omitempty"`
	MaxConcurrency int     `json:"max_concurrency,omitempty"`
	// Ramp, when set, is the ramp-up of an open-loop wave whose rate moved
	// from a start to an end rate (RequestRateRPS is then 0).
	Ramp *Ramp `json:"ramp,omitempty"`
	// Waited counts requests that found the max_concurrency cap full and
	// had to wait for a slot; NotSent counts scheduled requests never sent
	// (the run was bounded or canceled first).
	Waited  int `json:"waited,omitempty"`
	NotSent int `json:"not_sent,omitempty"`
	// Stopped says why a wave ended early ("canceled: ...", "server died"), or "".
	Stopped string `json:"stopped,omitempty"`
	// ClientCPUS is the CPU time (user + system) the rehearse process used
	// during the wave, so a reader can see when the load generator was busy.
	ClientCPUS float64 `json:"client_cpu_s,omitempty"`
	// Beside, on a wave of kind side_probe, is the id of the recorded
	// wave its probes were sent beside: released at that wave's release
	// (so their times share its origin) and stopped once its requests
	// had ended. 0 (absent) on every other wave.
	Beside int `json:"beside,omitempty"`
	// Probe marks a capacity search's probe wave (SPEC §8) with its kind:
	// search, retry (the re-probe of an unresolved point) or repeat (a
	// re-run of a final point); "" for every other wave.
	Probe string `json:"probe,omitempty"`
	// EndedBy says why a sustained wave's measured part stopped sending
	// (EndedUntil, EndedNumRequests, EndedDuration, EndedCanceled); "" on
	// other waves and in bundles made before it was recorded. Look is the
	// look that ended it, with EndedUntil only.
	EndedBy string `json:"ended_by,omitempty"`
	Look    *Look  `json:"look,omitempty"`
	// ClientStalls is how late the load generator's own runtime woke a
	// ticker during the wave (host honesty: a stalled client delays the
	// reading of tokens and so bends the figures); nil where not measured.
	ClientStalls *Stalls `json:"client_stalls,omitempty"`
	// ServerSlip is how late a simulated server's engine steps ran against
	// their simulated schedule during the wave, scraped from its /metrics;
	// nil for every server that is not rehearse's simulator.
	ServerSlip *ServerSlip `json:"server_slip,omitempty"`

	// ReleaseAt is the release instant the workers of a split plan agreed
	// on (RFC 3339, the coordinator's clock); the wave's record times are
	// from it. "" for a wave released as soon as it was ready.
	ReleaseAt string `json:"release_at,omitempty"`
	// ReleaseLateS is how long after ReleaseAt (on this worker's clock,
	// corrected by its measured offset) the wave was let go; absent where
	// no instant was agreed.
	ReleaseLateS *float64 `json:"release_late_s,omitempty"`
	// Workers, on a wave merged from segments, is each worker's release of
	// it; WorkerReleaseSpreadS the latest of their releases minus the
	// earliest (coordinator clock), beside OffsetUncertaintyS, the largest
	// clock-offset uncertainty of those workers, which bounds how well the
	// spread is known.
	//
	// On a worker's own wave, ClockOffsetS and OffsetUncertaintyS are its
	// clock offset against the coordinator (the coordinator's clock minus
	// its own) and that offset's uncertainty, measured afresh at the
	// wave's barrier; merge rejoins the wave with them.
	Workers              []WorkerRelease `json:"workers,omitempty"`
	WorkerReleaseSpreadS *float64        `json:"worker_release_spread_s,omitempty"`
	ClockOffsetS         *float64        `json:"clock_offset_s,omitempty"`
	OffsetUncertaintyS   *float64        `json:"offset_uncertainty_s,omitempty"`
}

// Why a sustained wave's measured part stopped sending (Wave.EndedBy).
const (
	// EndedUntil: its Until predicate, at a look (Wave.Look).
	EndedUntil = "until"
	// EndedNumRequests: it sent its num_requests.
	EndedNumRequests = "num_requests"
	// EndedDuration: one of its requests ended at or after its duration.
	EndedDuration = "duration"
	// EndedCanceled: the run was canceled.
	EndedCanceled = "canceled"
)

// Look is the look at which a sustained wave's Until predicate ended its
// measured part: Ended of its requests had ended and Sent had been sent,
// and none was sent after it. Prefix, on a wave whose records carry their
// place in the send order (Record.Request), is the look's population: the
// first Prefix requests sent, all ended; the Sent − Prefix others are
// measured but outside it. 0 (absent) on a look of the rule before it,
// which judged the Ended records with the Sent − Ended in flight pending.
type Look struct {
	Prefix int `json:"prefix,omitempty"`
	Ended  int `json:"ended"`
	Sent   int `json:"sent"`
}

// WorkerRelease is one worker's release of a merged wave: its index, its
// wave's started_at on its own clock, its release on the coordinator's
// clock relative to the merged wave's start (ReleaseS, seconds), and the
// records it sent.
type WorkerRelease struct {
	Worker    int     `json:"worker"`
	StartedAt string  `json:"started_at"`
	ReleaseS  float64 `json:"release_s"`
	Records   int     `json:"records"`
}

// StallThresholdS is the lateness from which a wake-up counts as a stall.
const StallThresholdS = 0.020

// Stalls summarizes a ticker's lateness: it asked to be woken every
// PeriodS and was woken Ticks times, at most MaxS late, P99S late at the
// 99th percentile, Over more than StallThresholdS late.
type Stalls struct {
	PeriodS float64 `json:"period_s"`
	Ticks   int     `json:"ticks"`
	MaxS    float64 `json:"max_s"`
	P99S    float64 `json:"p99_s"`
	Over    int     `json:"over_20ms"`
}

// ServerSlip is what the simulator's /metrics said of its own clock over
// one wave: Steps engine steps ran, Late of them more than
// StallThresholdS (wall) behind schedule, the latest by at most MaxS (the
// upper bound of its lateness bucket); SlipS simulated seconds were lost
// outright (the schedule moved on).
type ServerSlip struct {
	Steps int     `json:"steps"`
	Late  int     `json:"late_over_20ms"`
	MaxS  float64 `json:"max_s"`
	SlipS float64 `json:"slip_s"`
}

// Ramp-up strategies of Ramp.
const (
	RampLinear      = "linear"
	RampExponential = "exponential"
)

// ArrivalTrace is the arrival of an open-loop wave that replays a trace:
// request i is sent at the trace's i-th offset (workload.arrivals_s).
const ArrivalTrace = "trace"

// Ramp is the ramp-up of an open-loop wave: its rate moved from StartRPS
// to EndRPS, linearly or exponentially, over the wave's duration (or,
// bounded by its count alone, over the time its count of requests is
// expected to take).
type Ramp struct {
	Strategy string  `json:"strategy"`
	StartRPS float64 `json:"start_rps"`
	EndRPS   float64 `json:"end_rps"`
}

// Label names the ramp's load: "ramp 1→20 req/s", with ", exponential"
// for an exponential ramp.
func (r Ramp) Label() string {
	l := "ramp " + formatRate(r.StartRPS) + "→" + formatRate(r.EndRPS) + " req/s"
	if r.Strategy == RampExponential {
		l += ", exponential"
	}
	return l
}

// TraceLabel names the load of a trace replay.
const TraceLabel = "trace replay"

// Key identifies the population an aggregate is computed over.
type Key struct {
	Server         string
	Mode           string
	Concurrency    int
	RequestRateRPS float64
	// Shape names an open-loop load that no single rate names: a ramp's
	// label or TraceLabel; "" for the others.
	Shape string
}

// KeyOf returns the aggregate key of a wave.
func KeyOf(w Wave) Key {
	return makeKey(w.Server, w.Mode, w.Concurrency, w.RequestRateRPS, OpenShape(w.Ramp, w.Arrival))
}

// OpenShape is the Key.Shape of an open-loop wave with this ramp and
// arrival: the ramp's label, TraceLabel, or "" for a constant rate.
func OpenShape(ramp *Ramp, arrival string) string {
	switch {
	case ramp != nil:
		return ramp.Label()
	case arrival == ArrivalTrace:
		return TraceLabel
	}
	return ""
}

// makeKey keys a population: closed loop (the default mode) and the
// sustained closed loop by concurrency, open loop by request rate (and
// shape).
func makeKey(server, mode string, concurrency int, rateRPS float64, shape string) Key {
	if mode == "" {
		mode = ModeClosed
	}
	k := Key{Server: server, Mode: mode}
	if mode == ModeOpen {
		k.RequestRateRPS, k.Shape = rateRPS, shape
	} else {
		k.Concurrency = concurrency
	}
	return k
}

func formatRate(r float64) string { return strconv.FormatFloat(r, 'g', 6, 64) }

// LoadLabel names the load of the population: "64 clients" (closed loop),
// "16 clients, sustained" (the sustained closed loop), "2.5 req/s" (open
// loop), "ramp 1→20 req/s" (a ramp) or "trace replay". Every output that
// names a load uses it.
func (k Key) LoadLabel() string {
	switch {
	case k.Mode == ModeOpen && k.Shape != "":
		return k.Shape
	case k.Mode == ModeOpen:
		return formatRate(k.RequestRateRPS) + " req/s"
	case k.Mode == ModeSustained:
		return SustainedLabel(k.Concurrency)
	}
	return ClientsLabel(k.Concurrency)
}

// ClientsLabel names a closed-loop load of n clients: "1 client", "64
// clients".
func ClientsLabel(n int) string {
	if n == 1 {
		return "1 client"
	}
	return strconv.Itoa(n) + " clients"
}

// SustainedLabel names a sustained closed loop of n clients: "16 clients,
// sustained".
func SustainedLabel(n int) string { return ClientsLabel(n) + ", sustained" }
