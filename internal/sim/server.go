package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rehearse/rehearse/internal/sim/engine"
	"github.com/rehearse/rehearse/internal/tokenizer"
)

// Options configures a simulated server.
type Options struct {
	// Engine is "serial" or "batching"; empty means the profile's engine.
	Engine string
	// Profile is the step-latency profile; nil means the built-in
	// t4-qwen2.5-1.5b profile of the engine.
	Profile *engine.Profile
	// LoRAModules are adapter names served beside Model, as vLLM's
	// --lora-modules: listed in /v1/models with Model as their parent, and
	// answered as Model is (the simulator models no adapter's cost).
	LoRAModules []string
	// Model is the model id served in /v1/models and responses; empty means
	// the profile's model.
	Model string
	// TimeScale K: simulated time runs K times faster than wall time; 0
	// means 1.
	TimeScale float64
	// Seed drives output lengths, output text and fault draws.
	Seed int64
	// Faults are injected into a share of requests each.
	Faults []Fault
	// MaxNumSeqs and KVTokenBudget override the profile's when > 0. A serial
	// engine always runs one sequence at a time.
	MaxNumSeqs, KVTokenBudget int
	// PrefixCaching is "on" or "off" to override the profile's
	// prefix_caching; empty means the profile's. The cache holds up to the
	// KV budget's tokens of blocks.
	PrefixCaching string
	// Tokenizer counts prompt and output tokens; nil means the pinned
	// default tokenizer (tokenizer.Default).
	Tokenizer engine.Counter
	// Log receives one line per request and nothing else; nil means none.
	Log *log.Logger
	// OnCrash is called when a crash fault fires, before the connection is
	// dropped; rehearse sim makes it exit the process.
	OnCrash func()
	// IdleTimeout closes a connection that carries no request for this
	// long, new or kept alive, as uvicorn closes idle ones (5 s by
	// default) and proxies do; 0 closes only a new connection that sends
	// no request within DefaultHeaderTimeout. See HTTPServer.
	IdleTimeout time.Duration
	// ReasoningTokens, when > 0, makes every response think first: the
	// first ReasoningTokens generated tokens (fewer when max_tokens cuts
	// them) stream on the reasoning channel, then the content follows, as
	// a vLLM server with a reasoning parser does. max_tokens, min_tokens
	// and usage.completion_tokens count both, as vLLM's do.
	ReasoningTokens int
	// ReasoningField is the delta field the reasoning streams in:
	// ReasoningFieldReasoning (vLLM since v0.11.1, the default when empty)
	// or ReasoningFieldContent (vLLM before it, and DeepSeek's API).
	ReasoningField string
	// ToolCalls makes every response call a tool instead of answering: the
	// tokens after the reasoning stream as the arguments of one
	// delta.tool_calls entry (function ToolCallName), and a response that
	// ends on its own ends with finish_reason tool_calls, as vLLM's tool
	// parsers stream it. usage counts the arguments' tokens.
	ToolCalls bool
	// StampSends adds "rehearse_sent_ns" to every chunk of a stream: the
	// wall-clock time (Unix nanoseconds) its write was built, just before
	// it went to the connection, so that a client on the same host can
	// measure what it adds between the server's send and its own stamp.
	// Off, the wire format is unchanged.
	StampSends bool
}

// SentStampField is the chunk field Options.StampSends writes.
const SentStampField = "rehearse_sent_ns"

// ToolCallName is the function a response calls with Options.ToolCalls.
const ToolCallName = "lookup"

// Values of Options.ReasoningField.
const (
	ReasoningFieldReasoning = "reasoning"
	ReasoningFieldContent   = "reasoning_content"
)

// DefaultHeaderTimeout is how long HTTPServer gives a connection to send a
// request's headers when Options.IdleTimeout is 0.
const DefaultHeaderTimeout = 10 * time.Second

// Server is a simulated OpenAI-compatible LLM server.
type Server struct {
	opts    Options
	prof    *engine.Profile
	model   string
	loras   []string
	clk     *engine.Clock
	engine  *engine.Engine
	counter engine.Counter
	encoder engine.Encoder // set when the engine caches prefixes
	mux     *http.ServeMux
	created int64

	reqCount atomic.Uint64

	frontendMu   sync.Mutex
	frontendFree float64 // simulated time the frontend is next free
	closing      chan struct{}
	closeOnce    sync.Once
}

// New validates the options and starts the simulated engine.
func New(opts Options) (*Server, error) {
	if err := opts.resolveProfile(); err != nil {
		return nil, err
	}
	if opts.TimeScale == 0 {
		opts.TimeScale = 1
	}
	if !finite(opts.TimeScale) || opts.TimeScale <= 0 {
		return nil, fmt.Errorf("sim: time scale %g: want a positive number", opts.TimeScale)
	}
	if opts.Model == "" {
		opts.Model = opts.Profile.Model
	}
	limits, err := opts.limits()
	if err != nil {
		return nil, err
	}
	if err := opts.checkResponses(); err != nil {
		return nil, err
	}
	if err := opts.resolveTokenizer(); err != nil {
		return nil, err
	}
	cache, enc, err := opts.prefixCache(limits.KVBudget)
	if err != nil {
		return nil, err
	}
	clk := engine.NewClock(opts.TimeScale)
	s := &Server{
		opts:    opts,
		prof:    opts.Profile,
		model:   opts.Model,
		loras:   opts.LoRAModules,
		clk:     clk,
		engine:  engine.Start(opts.Profile, clk, limits, cache),
		counter: opts.Tokenizer,
		encoder: enc,
		mux:     http.NewServeMux(),
		created: time.Now().Unix(),
		closing: make(chan struct{}),
	}
	s.mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	s.mux.HandleFunc("GET /v1/models", s.handleModels)
	s.mux.HandleFunc("GET /metrics", s.handleMetrics)
	s.mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) { s.handle(w, r, false) })
	s.mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) { s.handle(w, r, true) })
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "NotFoundError", fmt.Sprintf("no route %s %s", r.Method, r.URL.Path))
	})
	return s, nil
}

// resolveProfile checks the profile (the built-in T4 one of the engine
// when none is given) and the engine against it.
func (opts *Options) resolveProfile() error {
	if opts.Profile == nil {
		kind := opts.Engine
		if kind == "" {
			kind = engine.Batching
		}
		if kind != engine.Serial && kind != engine.Batching {
			return fmt.Errorf("sim: engine %q: want %q or %q", opts.Engine, engine.Serial, engine.Batching)
		}
		p, err := engine.BuiltinProfile("t4-qwen2.5-1.5b-" + kind)
		if err != nil {
			return err
		}
		opts.Profile = p
	}
	prof := opts.Profile
	if err := prof.Validate(); err != nil {
		return fmt.Errorf("sim: profile %s: %w", prof.Name, err)
	}
	if opts.Engine == "" {
		opts.Engine = prof.Engine
	}
	if opts.Engine != engine.Serial && opts.Engine != engine.Batching {
		return fmt.Errorf("sim: engine %q: want %q or %q", opts.Engine, engine.Serial, engine.Batching)
	}
	if opts.Engine != prof.Engine {
		return fmt.Errorf("sim: profile %s was fitted for the %s engine, not %s", prof.Name, prof.Engine, opts.Engine)
	}
	return nil
}

// limits are the engine's: the profile's, with the options' overrides.
func (opts *Options) limits() (engine.Limits, error) {
	prof := opts.Profile
	l := engine.Limits{MaxSeqs: prof.MaxNumSeqs, BatchTokens: prof.MaxNumBatchedTokens, KVBudget: prof.KVTokenBudget}
	if opts.MaxNumSeqs < 0 || opts.KVTokenBudget < 0 {
		return l, fmt.Errorf("sim: max_num_seqs %d and kv_token_budget %d must not be negative", opts.MaxNumSeqs, opts.KVTokenBudget)
	}
	if opts.MaxNumSeqs > 0 {
		l.MaxSeqs = opts.MaxNumSeqs
	}
	if opts.KVTokenBudget > 0 {
		l.KVBudget = opts.KVTokenBudget
	}
	if opts.Engine == engine.Serial {
		if l.MaxSeqs != 1 {
			return l, fmt.Errorf("sim: the serial engine runs one sequence at a time; max_num_seqs %d is not 1", l.MaxSeqs)
		}
		l.BatchTokens = 0
	}
	return l, nil
}

// checkResponses checks what shapes the responses: the faults, the idle
// timeout and the reasoning phase.
func (opts *Options) checkResponses() error {
	for _, f := range opts.Faults {
		if _, err := ParseFault(f.String()); err != nil {
			return err
		}
	}
	if opts.IdleTimeout < 0 {
		return fmt.Errorf("sim: idle timeout %v: want 0 (none) or a positive duration", opts.IdleTimeout)
	}
	if opts.ReasoningTokens < 0 {
		return fmt.Errorf("sim: reasoning tokens %d: want 0 (none) or more", opts.ReasoningTokens)
	}
	switch opts.ReasoningField {
	case "":
		opts.ReasoningField = ReasoningFieldReasoning
	case ReasoningFieldReasoning, ReasoningFieldContent:
	default:
		return fmt.Errorf("sim: reasoning field %q: want %q or %q", opts.ReasoningField, ReasoningFieldReasoning, ReasoningFieldContent)
	}
	return nil
}

// resolveTokenizer defaults the tokenizer to the pinned one and checks
// that every output piece is one token of it.
func (opts *Options) resolveTokenizer() error {
	if opts.Tokenizer == nil {
		tk, err := tokenizer.Default()
		if err != nil {
			return fmt.Errorf("sim: tokenizer: %w", err)
		}
		opts.Tokenizer = tk
	}
	return checkOutputWords(opts.Tokenizer)
}

// prefixCache is the engine's prefix cache of kv tokens as the options and
// the profile say (nil: none), and the encoder that hashes prompts for it.
func (opts *Options) prefixCache(kv int) (*engine.PrefixCache, engine.Encoder, error) {
	var cache *engine.PrefixCache
	switch opts.PrefixCaching {
	case "":
		if opts.Profile.PrefixCaching {
			cache = engine.NewPrefixCache(kv)
		}
	case PrefixCachingOn:
		cache = engine.NewPrefixCache(kv)
	case PrefixCachingOff:
	default:
		return nil, nil, fmt.Errorf("sim: prefix caching %q: want %q or %q", opts.PrefixCaching, PrefixCachingOn, PrefixCachingOff)
	}
	if cache == nil {
		return nil, nil, nil
	}
	enc, ok := opts.Tokenizer.(engine.Encoder)
	if !ok {
		return nil, nil, errors.New("sim: prefix caching needs a tokenizer that encodes token ids; this one only counts")
	}
	return cache, enc, nil
}

// Handler serves /v1/chat/completions, /v1/completions, /v1/models, /health
// and /metrics. A test helper (tests serve it with httptest); the binary
// serves the same mux through HTTPServer.
func (s *Server) Handler() http.Handler { return s.mux }

// HTTPServer returns an http.Server for Handler that closes idle
// connections as Options.IdleTimeout says: a new connection that sends no
// request, and one kept alive after a response, are closed after it. Errors
// of the server go to errorLog (nil: the log package's).
func (s *Server) HTTPServer(errorLog *log.Logger) *http.Server {
	hs := &http.Server{Handler: s.mux, ReadHeaderTimeout: DefaultHeaderTimeout, ErrorLog: errorLog}
	if d := s.opts.IdleTimeout; d > 0 {
		hs.ReadHeaderTimeout, hs.IdleTimeout = d, d
	}
	return hs
}

// Values of Options.PrefixCaching.
const (
	PrefixCachingOn  = "on"
	PrefixCachingOff = "off"
)

// PrefixCaching reports whether the engine caches prompt prefixes.
func (s *Server) PrefixCaching() bool { return s.engine.Caching() }

// Engine is the engine kind in use.
func (s *Server) Engine() string { return s.opts.Engine }

// Profile is the profile in use.
func (s *Server) Profile() *engine.Profile { return s.prof }

// Model is the served model id.
func (s *Server) Model() string { return s.model }

// Close aborts every request in the engine, releases stalled responses and
// stops the engine. It is safe to call more than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.closing)
		s.engine.Close()
	})
}

func (s *Server) handleModels(w http.ResponseWriter, _ *http.Request) {
	data := []map[string]any{{
		"id": s.model, "object": "model", "created": s.created, "owned_by": "rehearse-sim",
		"root": s.model, "max_model_len": s.prof.MaxModelLen,
	}}
	for _, name := range s.loras {
		// vLLM lists an adapter with its path as root and the base model
		// as parent.
		data = append(data, map[string]any{
			"id": name, "object": "model", "created": s.created, "owned_by": "rehearse-sim",
			"root": name, "parent": s.model, "max_model_len": s.prof.MaxModelLen,
		})
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

// serves reports whether model is one the server answers: its own, or one
// of its adapters.
func (s *Server) serves(model string) bool {
	return model == s.model || slices.Contains(s.loras, model)
}

func (s *Server) handleMetrics(w http.ResponseWriter, _ *http.Request) {
	var buf bytes.Buffer
	if err := s.writeMetrics(&buf); err != nil {
		writeError(w, http.StatusInternalServerError, "InternalServerError", err.Error())
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Write(buf.Bytes())
}

// chatRequest is the part of an OpenAI chat completions request the
// simulator reads.
type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	// Prompt is the completions API's prompt: a string, or an array of
	// one string.
	Prompt        json.RawMessage `json:"prompt"`
	Stream        bool            `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens           *int     `json:"max_tokens"`
	MaxCompletionTokens *int     `json:"max_completion_tokens"`
	MinTokens           int      `json:"min_tokens"`
	IgnoreEOS           bool     `json:"ignore_eos"`
	N                   *int     `json:"n"`
	Temperature         *float64 `json:"temperature"`
}

// job is one accepted chat request, fully decided before it reaches the
// engine.
type job struct {
	id string
	// completions says the request came to /v1/completions: its answer is
	// choices[].text, not a chat message.
	completions  bool
	stream       bool
	includeUsage bool
	promptTokens int
	blocks       []uint64 // the prompt's block hash chain, with a prefix cache
	outputTokens int
	// reasoningTokens is how many of the outputTokens come first, on the
	// reasoning channel.
	reasoningTokens int
	// toolCalls: the content phase streams as one tool call (--tool-calls,
	// chat API only).
	toolCalls bool
	finish    string
	text      textSource
	fault     faultPlan
	// maxTokens is the output limit the request set (or the context's
	// room): what FaultOverrun ignores.
	maxTokens int
}

const maxRequestBytes = 8 << 20

// parseChat reads a chat completions request, or with completions a
// completions request (a prompt, sent as it is: no chat template).
func (s *Server) parseChat(r *http.Request, completions bool) (*job, int, error) {
	req, status, err := s.readChat(r, completions)
	if err != nil {
		return nil, status, err
	}
	prompt, userText, err := s.promptOf(req, completions)
	if err != nil {
		return nil, http.StatusBadRequest, err
	}
	reqN := s.reqCount.Add(1)
	id := fmt.Sprintf("chatcmpl-sim-%d", reqN)
	if completions {
		id = fmt.Sprintf("cmpl-sim-%d", reqN)
	}
	j := &job{
		id:           id,
		completions:  completions,
		stream:       req.Stream,
		includeUsage: req.Stream && req.StreamOptions != nil && req.StreamOptions.IncludeUsage,
		text:         newTextSource(s.opts.Seed, prompt),
	}
	if s.encoder != nil {
		ids := s.encoder.Encode(prompt)
		j.promptTokens, j.blocks = len(ids), engine.BlockHashes(ids)
	} else {
		j.promptTokens = s.counter.Count(prompt)
	}
	maxTokens, err := s.maxTokensOf(req, j.promptTokens)
	if err != nil {
		return nil, http.StatusBadRequest, err
	}
	s.planOutput(j, req, userText, maxTokens)
	j.fault = planFault(s.opts.Faults, s.opts.Seed, reqN, j.outputTokens)
	return j, 0, nil
}

// readChat reads and decodes the request body and refuses what the
// simulator does not serve: another model, several choices, a negative
// temperature. The status goes with the error.
func (s *Server) readChat(r *http.Request, completions bool) (*chatRequest, int, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBytes+1))
	if err != nil {
		return nil, http.StatusBadRequest, fmt.Errorf("reading the request body: %v", err)
	}
	if len(body) > maxRequestBytes {
		return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("request body over %d bytes", maxRequestBytes)
	}
	var req chatRequest
	api := "chat completions"
	if completions {
		api = "completions"
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, http.StatusBadRequest, fmt.Errorf("request body is not a %s request: %v", api, err)
	}
	if req.Model != "" && !s.serves(req.Model) {
		return nil, http.StatusNotFound, fmt.Errorf("the model `%s` does not exist (this server serves `%s`)", req.Model, s.model)
	}
	if req.N != nil && *req.N != 1 {
		return nil, http.StatusBadRequest, fmt.Errorf("n = %d: the simulator returns one choice", *req.N)
	}
	if req.Temperature != nil && (*req.Temperature < 0 || !finite(*req.Temperature)) {
		return nil, http.StatusBadRequest, fmt.Errorf("temperature = %g: want >= 0", *req.Temperature)
	}
	return &req, 0, nil
}

// maxTokensOf is the output limit of a request of promptTokens: its
// max_completion_tokens or max_tokens, else the context's room; it must
// fit the context and the KV budget, and min_tokens must fit it.
func (s *Server) maxTokensOf(req *chatRequest, promptTokens int) (int, error) {
	maxLen := s.prof.MaxModelLen
	if promptTokens >= maxLen {
		return 0, fmt.Errorf("this model's maximum context length is %d tokens; the messages have %d", maxLen, promptTokens)
	}
	maxTokens := maxLen - promptTokens
	switch {
	case req.MaxCompletionTokens != nil:
		maxTokens = *req.MaxCompletionTokens
	case req.MaxTokens != nil:
		maxTokens = *req.MaxTokens
	}
	if maxTokens < 1 {
		return 0, fmt.Errorf("max_tokens = %d: want >= 1", maxTokens)
	}
	if promptTokens+maxTokens > maxLen {
		return 0, fmt.Errorf("this model's maximum context length is %d tokens; you requested %d (%d in the messages, %d in the completion)", maxLen, promptTokens+maxTokens, promptTokens, maxTokens)
	}
	if promptTokens+maxTokens > s.engine.KVBudget() {
		return 0, fmt.Errorf("the request needs %d KV-cache tokens, over the engine's budget of %d", promptTokens+maxTokens, s.engine.KVBudget())
	}
	if req.MinTokens < 0 || req.MinTokens > maxTokens {
		return 0, fmt.Errorf("min_tokens = %d: want between 0 and max_tokens (%d)", req.MinTokens, maxTokens)
	}
	return maxTokens, nil
}

// planOutput decides the job's output: its length (the reasoning, then
// the profile's natural length of the user's text, within min_tokens and
// maxTokens, or maxTokens under ignore_eos), its reasoning share, tool
// calls and finish reason.
func (s *Server) planOutput(j *job, req *chatRequest, userText string, maxTokens int) {
	// The completions API has no reasoning channel and no tool calls.
	reasoning := s.opts.ReasoningTokens
	j.toolCalls = s.opts.ToolCalls
	if j.completions {
		reasoning, j.toolCalls = 0, false
	}
	natural := s.prof.NaturalOutputTokens(s.opts.Seed, userText)
	n := max(reasoning+natural, req.MinTokens)
	if req.IgnoreEOS {
		n = maxTokens
	}
	j.finish = "stop"
	if n >= maxTokens {
		n, j.finish = maxTokens, "length"
	}
	j.outputTokens, j.maxTokens = n, maxTokens
	j.reasoningTokens = min(reasoning, n)
	if j.toolCalls && j.finish == "stop" {
		j.finish = "tool_calls"
	}
}

// promptOf is the text the engine sees of req and the user's own text:
// with completions its prompt as sent (what a chat request carries as
// messages is refused, and so is no prompt), else its messages through the
// profile's chat template.
func (s *Server) promptOf(req *chatRequest, completions bool) (prompt, user string, err error) {
	if completions {
		if len(req.Messages) > 0 {
			return "", "", errors.New("messages: the completions API takes a prompt (send messages to /v1/chat/completions)")
		}
		p, err := promptText(req.Prompt)
		if err != nil {
			return "", "", err
		}
		return p, p, nil
	}
	if len(req.Messages) == 0 {
		if len(req.Prompt) > 0 {
			return "", "", errors.New("messages is empty: the chat API takes messages (send a prompt to /v1/completions)")
		}
		return "", "", errors.New("messages is empty")
	}
	msgs := make([]engine.Message, len(req.Messages))
	for i, m := range req.Messages {
		if m.Role == "" {
			return "", "", fmt.Errorf("messages[%d].role is empty", i)
		}
		text, err := messageText(m.Content)
		if err != nil {
			return "", "", fmt.Errorf("messages[%d].content: %v", i, err)
		}
		msgs[i] = engine.Message{Role: m.Role, Content: text}
	}
	return s.prof.RenderChat(msgs), lastUserText(msgs), nil
}

// promptText reads a completions prompt: a string or an array of one
// string (the simulator returns one choice).
func promptText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", errors.New("prompt is missing")
	}
	var p string
	if err := json.Unmarshal(raw, &p); err == nil {
		return p, nil
	}
	var ps []string
	if err := json.Unmarshal(raw, &ps); err == nil && len(ps) == 1 {
		return ps[0], nil
	}
	return "", errors.New("prompt: want a string or an array of one string (the simulator reads no token ids)")
}

// lastUserText is the text of the last user message, the prompt a rehearsal
// sends; "" when there is none.
func lastUserText(msgs []engine.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			return msgs[i].Content
		}
	}
	return ""
}

// messageText reads a message's content: a string, an array of content
// parts whose text parts are concatenated, or null.
func messageText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errors.New("want a string or an array of content parts")
	}
	var b bytes.Buffer
	for i, p := range parts {
		if p.Type != "text" {
			return "", fmt.Errorf("part %d has type %q; the simulator reads text parts only", i, p.Type)
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

// outcome is what the request log line reports.
type outcome struct {
	status    int
	tokens    int
	finish    string
	firstS    float64 // simulated TTFT, -1 when no token came
	note      string
	arrivalS  float64
	streaming bool
}

// noteMalformed is the log note of a stream the malformed fault broke.
const noteMalformed = "fault malformed: sent a chunk of invalid JSON mid-stream"

// clientLeft notes that the client hung up before the response ended:
// after the malformed fault's chunk that is the client refusing a broken
// stream, as it should, and the note keeps naming the fault.
func (o *outcome) clientLeft() {
	if o.note == noteMalformed {
		o.note = noteMalformed + "; the client then hung up"
		return
	}
	o.note = "client went away"
}

// handle serves one chat completions request, or with completions one
// completions request.
func (s *Server) handle(w http.ResponseWriter, r *http.Request, completions bool) {
	arrivalS := s.clk.Now()
	out := outcome{status: http.StatusOK, firstS: -1, arrivalS: arrivalS}
	var j *job
	defer func() { s.logRequest(r, j, &out) }()

	j, status, err := s.parseChat(r, completions)
	if err != nil {
		out.status, out.note = status, err.Error()
		writeError(w, status, errorType(status), err.Error())
		return
	}
	out.streaming = j.stream
	switch j.fault.kind {
	case FaultHTTP500:
		out.status, out.note = http.StatusInternalServerError, "fault http500"
		writeError(w, http.StatusInternalServerError, "InternalServerError", "simulated internal server error (fault http500)")
		return
	case FaultHTTP429:
		out.status, out.note = http.StatusTooManyRequests, "fault http429"
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, "RateLimitError", "simulated rate limit (fault http429)")
		return
	}
	if !s.clk.SleepUntil(r.Context(), s.frontendDone(arrivalS)) {
		out.note = "client went away before the engine saw the request"
		return
	}
	seq := &engine.Sequence{PromptTokens: j.promptTokens, Blocks: j.blocks, OutputTokens: j.outputTokens, ArrivalS: arrivalS, FinishReason: j.finish}
	if err := s.engine.Submit(seq); err != nil {
		out.status, out.note = http.StatusServiceUnavailable, err.Error()
		writeError(w, http.StatusServiceUnavailable, "ServiceUnavailableError", err.Error())
		return
	}
	if j.stream {
		s.stream(w, r, j, seq, &out)
	} else {
		s.complete(w, r, j, seq, &out)
	}
}

// frontendDone is when a request arriving at arrivalS reaches the engine:
// after the parallel request overhead, then its turn through the serial
// frontend.
func (s *Server) frontendDone(arrivalS float64) float64 {
	ready := arrivalS + s.prof.RequestOverheadS
	if s.prof.FrontendSPerRequest == 0 {
		return ready
	}
	s.frontendMu.Lock()
	defer s.frontendMu.Unlock()
	end := max(ready, s.frontendFree) + s.prof.FrontendSPerRequest
	s.frontendFree = end
	return end
}

// stream writes the response as server-sent events: a role chunk, one
// chunk per token, a finish chunk, a usage chunk when asked, then [DONE].
func (s *Server) stream(w http.ResponseWriter, r *http.Request, j *job, seq *engine.Sequence, out *outcome) {
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)

	c := s.newChunker(j)
	var buf []byte
	if !j.completions {
		// A chat stream opens with the assistant's role; a completions
		// stream has none.
		c.sentNS = time.Now().UnixNano()
		buf = c.appendHead(buf, c.head)
		buf = append(buf, `{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`+"\n\n"...)
	}
	if _, err := w.Write(buf); err != nil {
		s.engine.Abandon(seq)
		out.clientLeft()
		return
	}
	rc.Flush()

	sent := 0
	defer func() { out.tokens = sent }()
	for {
		select {
		case <-seq.Notify():
		case <-r.Context().Done():
			s.engine.Abandon(seq)
			out.clientLeft()
			return
		}
		produced := seq.Produced()
		aborted := seq.Aborted()
		if sent == 0 && produced > 0 {
			out.firstS = seq.FirstTokenS() - out.arrivalS
		}
		buf = buf[:0]
		c.sentNS = time.Now().UnixNano()
		var faulted bool
		if buf, sent, faulted = c.appendTokens(buf, sent, produced, out); faulted {
			s.engine.Abandon(seq)
			w.Write(buf)
			rc.Flush()
			s.streamFault(w, rc, r, j, out)
			return
		}
		if sent == j.outputTokens && j.fault.kind == FaultOverrun {
			if !s.overrun(w, rc, j, buf, c.appendOverrun, out) {
				return
			}
			buf = buf[:0]
		}
		if sent == j.outputTokens {
			buf = c.appendEnd(buf, sent)
			w.Write(buf)
			rc.Flush()
			out.finish = j.finish
			return
		}
		if aborted {
			buf = append(buf, `data: {"error":{"message":"the simulated engine shut down before the request finished","type":"InternalServerError","param":null,"code":500}}`+"\n\n"...)
			buf = append(buf, "data: [DONE]\n\n"...)
			w.Write(buf)
			rc.Flush()
			out.note = "aborted: server shutting down"
			return
		}
		if len(buf) > 0 {
			if _, err := w.Write(buf); err != nil {
				s.engine.Abandon(seq)
				out.clientLeft()
				return
			}
			rc.Flush()
		}
	}
}

// chunker builds the chunks of one streamed response, chat or
// completions, in the wire format vLLM's server writes.
type chunker struct {
	j *job
	// head opens every chunk: data: {"id":…,"object":…,"created":…,
	// "model":…,"choices":[ .
	head []byte
	// piece opens a content piece's choice, reasoningDelta a reasoning
	// piece's; finish is the finish chunk's choice, a format of the finish
	// reason.
	piece, reasoningDelta, finish string
	// stamp says whether chunks carry SentStampField, and sentNS is the
	// send time of the write being built.
	stamp  bool
	sentNS int64
}

func (s *Server) newChunker(j *job) *chunker {
	model, _ := json.Marshal(s.model)
	object, piece, finish := "chat.completion.chunk", `{"index":0,"delta":{"content":`, `{"index":0,"delta":{},"logprobs":null,"finish_reason":%q}]}`
	if j.completions {
		object, piece, finish = "text_completion", `{"index":0,"text":`, `{"index":0,"text":"","logprobs":null,"finish_reason":%q}]}`
	}
	return &chunker{
		j:              j,
		head:           fmt.Appendf(nil, `data: {"id":%q,"object":%q,"created":%d,"model":%s,"choices":[`, j.id, object, time.Now().Unix(), model),
		piece:          piece,
		reasoningDelta: `{"index":0,"delta":{"` + s.opts.ReasoningField + `":`,
		finish:         finish,
		stamp:          s.opts.StampSends,
	}
}

// appendHead opens a chunk with h (head, or a prefix of it); with
// StampSends it carries the send time of the write it is built for.
func (c *chunker) appendHead(buf, h []byte) []byte {
	if !c.stamp {
		return append(buf, h...)
	}
	buf = append(buf, `data: {"`+SentStampField+`":`...)
	buf = strconv.AppendInt(buf, c.sentNS, 10)
	buf = append(buf, ',')
	return append(buf, h[len(`data: {`):]...)
}

// appendToken appends the chunk of output token i: text, reasoning, the
// opening of the tool call or its arguments, or content.
func (c *chunker) appendToken(buf []byte, i int) []byte {
	j := c.j
	buf = c.appendHead(buf, c.head)
	closing := `},"logprobs":null,"finish_reason":null}]}` + "\n\n"
	switch {
	case j.completions:
		buf = append(buf, c.piece...)
		closing = `,"logprobs":null,"finish_reason":null}]}` + "\n\n"
	case i < j.reasoningTokens:
		buf = append(buf, c.reasoningDelta...)
	case j.toolCalls && i == j.reasoningTokens:
		buf = fmt.Appendf(buf, `{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_%s","type":"function","function":{"name":%q,"arguments":`, j.id, ToolCallName)
		closing = `}}]` + closing
	case j.toolCalls:
		buf = append(buf, `{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":`...)
		closing = `}}]` + closing
	default:
		buf = append(buf, c.piece...)
	}
	buf = j.text.appendPieceJSON(buf, i)
	return append(buf, closing...)
}

// appendTokens appends the chunks of output tokens sent to produced−1 and
// returns the tokens then sent. A malformed fault at one of them sends a
// chunk of invalid JSON in its place, once, and the stream carries on;
// any other mid-stream fault stops at its token (faulted).
func (c *chunker) appendTokens(buf []byte, sent, produced int, out *outcome) (_ []byte, _ int, faulted bool) {
	j := c.j
	for sent < produced {
		if j.fault.kind != "" && j.fault.kind != FaultOverrun && sent == j.fault.atToken {
			if j.fault.kind != FaultMalformed {
				return buf, sent, true
			}
			// One chunk of invalid JSON; the stream carries on.
			buf = c.appendHead(buf, c.head)
			buf = append(buf, c.piece+`" the`+"\n\n"...)
			out.note = noteMalformed
			j.fault.kind = ""
			continue
		}
		buf = c.appendToken(buf, sent)
		sent++
	}
	return buf, sent, false
}

// appendOverrun appends content chunk i past the output, as FaultOverrun
// streams it.
func (c *chunker) appendOverrun(buf []byte, i int) []byte {
	closing := `},"logprobs":null,"finish_reason":null}]}` + "\n\n"
	if c.j.completions {
		closing = `,"logprobs":null,"finish_reason":null}]}` + "\n\n"
	}
	buf = append(c.appendHead(buf, c.head), c.piece...)
	return append(c.j.text.appendPieceJSON(buf, i), closing...)
}

// appendEnd appends the finish chunk, the usage chunk when asked (sent
// completion tokens), and [DONE].
func (c *chunker) appendEnd(buf []byte, sent int) []byte {
	j := c.j
	buf = c.appendHead(buf, c.head)
	buf = fmt.Appendf(buf, c.finish+"\n\n", j.finish)
	if j.includeUsage {
		buf = c.appendHead(buf, c.head[:len(c.head)-len(`"choices":[`)])
		buf = fmt.Appendf(buf, `"choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`+"\n\n",
			j.promptTokens, sent, j.promptTokens+sent)
	}
	return append(buf, "data: [DONE]\n\n"...)
}

// overrun acts out FaultOverrun once the engine's output (buf holds what
// is not yet written of it) is done: content chunks (appendChunk appends
// the i-th) up to OverrunTimes × the request's max_tokens, as fast as the
// client reads. It reports whether the client read them all (the stream then
// finishes as usual).
func (s *Server) overrun(w http.ResponseWriter, rc *http.ResponseController, j *job, buf []byte, appendChunk func([]byte, int) []byte, out *outcome) bool {
	const batch = 64
	total := OverrunTimes * j.maxTokens
	out.note = fmt.Sprintf("fault overrun: streamed past max_tokens %d, to %d content chunks", j.maxTokens, total)
	for i := j.outputTokens; i < total; {
		for end := min(i+batch, total); i < end; i++ {
			buf = appendChunk(buf, i)
		}
		if _, err := w.Write(buf); err != nil {
			out.note = fmt.Sprintf("fault overrun: streamed past max_tokens %d, %d content chunks when the client hung up", j.maxTokens, i)
			return false
		}
		rc.Flush()
		buf = buf[:0]
	}
	return true
}

// streamFault acts out a mid-stream fault whose sequence has already left
// the engine.
func (s *Server) streamFault(w http.ResponseWriter, rc *http.ResponseController, r *http.Request, j *job, out *outcome) {
	out.note = "fault " + string(j.fault.kind)
	switch j.fault.kind {
	case FaultErrorEvent:
		w.Write([]byte(`data: {"error":{"message":"simulated engine error (fault error_event)","type":"InternalServerError","param":null,"code":500}}` + "\n\n" + "data: [DONE]\n\n"))
		rc.Flush()
	case FaultTruncate:
		// The body ends here, without finish_reason or [DONE].
	case FaultStall:
		s.stall(r)
	case FaultCrash:
		s.crash()
	}
}

// stall holds a response open until the client gives up or the server
// closes.
func (s *Server) stall(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-s.closing:
	}
}

// crash calls the crash hook, then drops the connection without ending the
// response.
func (s *Server) crash() {
	if s.opts.OnCrash != nil {
		s.opts.OnCrash()
	}
	panic(http.ErrAbortHandler)
}

// complete waits for the whole output and writes one chat.completion.
func (s *Server) complete(w http.ResponseWriter, r *http.Request, j *job, seq *engine.Sequence, out *outcome) {
	faultAt := -1
	if j.fault.kind != "" && j.fault.kind != FaultOverrun {
		faultAt = j.fault.atToken
	}
	for {
		select {
		case <-seq.Notify():
		case <-r.Context().Done():
			s.engine.Abandon(seq)
			out.note = "client went away"
			return
		}
		produced := seq.Produced()
		if out.firstS < 0 && produced > 0 {
			out.firstS = seq.FirstTokenS() - out.arrivalS
		}
		if faultAt >= 0 && produced >= faultAt {
			s.engine.Abandon(seq)
			s.completeFault(w, r, j, out)
			return
		}
		if produced >= j.outputTokens {
			break
		}
		if seq.Aborted() {
			out.status, out.note = http.StatusServiceUnavailable, "aborted: server shutting down"
			writeError(w, http.StatusServiceUnavailable, "ServiceUnavailableError", "the simulated engine shut down before the request finished")
			return
		}
	}
	out.tokens, out.finish = j.outputTokens, j.finish
	writeJSON(w, http.StatusOK, s.completion(j))
}

func (s *Server) completion(j *job) map[string]any {
	if j.completions {
		return map[string]any{
			"id": j.id, "object": "text_completion", "created": time.Now().Unix(), "model": s.model,
			"choices": []map[string]any{{
				"index": 0, "text": j.text.text(j.outputTokens), "logprobs": nil, "finish_reason": j.finish,
			}},
			"usage": map[string]int{"prompt_tokens": j.promptTokens, "completion_tokens": j.outputTokens, "total_tokens": j.promptTokens + j.outputTokens},
		}
	}
	msg := map[string]any{"role": "assistant", "content": j.text.textRange(j.reasoningTokens, j.outputTokens)}
	if j.toolCalls {
		msg["content"] = nil
		msg["tool_calls"] = []map[string]any{{"id": "call_" + j.id, "type": "function",
			"function": map[string]any{"name": ToolCallName, "arguments": j.text.textRange(j.reasoningTokens, j.outputTokens)}}}
	}
	if j.reasoningTokens > 0 {
		msg[s.opts.ReasoningField] = j.text.textRange(0, j.reasoningTokens)
	}
	return map[string]any{
		"id": j.id, "object": "chat.completion", "created": time.Now().Unix(), "model": s.model,
		"choices": []map[string]any{{
			"index":         0,
			"message":       msg,
			"logprobs":      nil,
			"finish_reason": j.finish,
		}},
		"usage": map[string]int{"prompt_tokens": j.promptTokens, "completion_tokens": j.outputTokens, "total_tokens": j.promptTokens + j.outputTokens},
	}
}

// completeFault acts out a fault on a non-streaming response.
func (s *Server) completeFault(w http.ResponseWriter, r *http.Request, j *job, out *outcome) {
	out.note = "fault " + string(j.fault.kind)
	switch j.fault.kind {
	case FaultErrorEvent:
		out.status = http.StatusInternalServerError
		writeError(w, http.StatusInternalServerError, "InternalServerError", "simulated engine error (fault error_event)")
	case FaultTruncate:
		body, _ := json.Marshal(s.completion(j))
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusOK)
		w.Write(body[:len(body)/2])
		http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler)
	case FaultMalformed:
		body, _ := json.Marshal(s.completion(j))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.Write(body[:len(body)-2])
	case FaultStall:
		s.stall(r)
	case FaultCrash:
		s.crash()
	}
}

func (s *Server) logRequest(r *http.Request, j *job, out *outcome) {
	if s.opts.Log == nil {
		return
	}
	line := fmt.Sprintf("%s %s %s %d", r.RemoteAddr, r.Method, r.URL.Path, out.status)
	if j != nil {
		mode := "complete"
		if j.stream {
			mode = "stream"
		}
		line += fmt.Sprintf(" id=%s %s prompt_tokens=%d completion_tokens=%d", j.id, mode, j.promptTokens, out.tokens)
		if j.reasoningTokens > 0 {
			line += fmt.Sprintf(" reasoning_tokens=%d", min(j.reasoningTokens, out.tokens))
		}
		if out.finish != "" {
			line += " finish=" + out.finish
		}
		if out.firstS >= 0 {
			line += fmt.Sprintf(" sim_ttft_s=%.3f", out.firstS)
		}
		line += fmt.Sprintf(" sim_e2e_s=%.3f", s.clk.Now()-out.arrivalS)
	}
	if out.note != "" {
		line += " (" + out.note + ")"
	}
	s.opts.Log.Print(line)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body = []byte(`{"error":{"message":"encoding the response failed","type":"InternalServerError","param":null,"code":500}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
}

// writeError writes an OpenAI-style error body.
func writeError(w http.ResponseWriter, status int, kind, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": kind, "param": nil, "code": status}})
}

func errorType(status int) string {
	switch status {
	case http.StatusNotFound:
		return "NotFoundError"
	case http.StatusServiceUnavailable:
		return "ServiceUnavailableError"
	default:
		return "BadRequestError"
	}
}
