package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Options configures a simulated server.
type Options struct {
	// Engine is "serial" or "batching"; empty means the profile's engine.
	Engine string
	// Profile is the step-latency profile; nil means the built-in
	// t4-qwen2.5-1.5b profile of the engine.
	Profile *Profile
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
	Tokenizer Counter
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
	prof    *Profile
	model   string
	clk     *simClock
	engine  *engine
	counter Counter
	encoder Encoder // set when the engine caches prefixes
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
	if opts.Profile == nil {
		engine := opts.Engine
		if engine == "" {
			engine = EngineBatching
		}
		if engine != EngineSerial && engine != EngineBatching {
			return nil, fmt.Errorf("sim: engine %q: want %q or %q", opts.Engine, EngineSerial, EngineBatching)
		}
		p, err := BuiltinProfile("t4-qwen2.5-1.5b-" + engine)
		if err != nil {
			return nil, err
		}
		opts.Profile = p
	}
	prof := opts.Profile
	if err := prof.Validate(); err != nil {
		return nil, fmt.Errorf("sim: profile %s: %w", prof.Name, err)
	}
	if opts.Engine == "" {
		opts.Engine = prof.Engine
	}
	if opts.Engine != EngineSerial && opts.Engine != EngineBatching {
		return nil, fmt.Errorf("sim: engine %q: want %q or %q", opts.Engine, EngineSerial, EngineBatching)
	}
	if opts.Engine != prof.Engine {
		return nil, fmt.Errorf("sim: profile %s was fitted for the %s engine, not %s", prof.Name, prof.Engine, opts.Engine)
	}
	if opts.TimeScale == 0 {
		opts.TimeScale = 1
	}
	if !finite(opts.TimeScale) || opts.TimeScale <= 0 {
		return nil, fmt.Errorf("sim: time scale %g: want a positive number", opts.TimeScale)
	}
	if opts.Model == "" {
		opts.Model = prof.Model
	}
	maxSeqs, batchTokens, kv := prof.MaxNumSeqs, prof.MaxNumBatchedTokens, prof.KVTokenBudget
	if opts.MaxNumSeqs < 0 || opts.KVTokenBudget < 0 {
		return nil, fmt.Errorf("sim: max_num_seqs %d and kv_token_budget %d must not be negative", opts.MaxNumSeqs, opts.KVTokenBudget)
	}
	if opts.MaxNumSeqs > 0 {
		maxSeqs = opts.MaxNumSeqs
	}
	if opts.KVTokenBudget > 0 {
		kv = opts.KVTokenBudget
	}
	if opts.Engine == EngineSerial {
		if maxSeqs != 1 {
			return nil, fmt.Errorf("sim: the serial engine runs one sequence at a time; max_num_seqs %d is not 1", maxSeqs)
		}
		batchTokens = 0
	}
	for _, f := range opts.Faults {
		if _, err := ParseFault(f.String()); err != nil {
			return nil, err
		}
	}
	if opts.IdleTimeout < 0 {
		return nil, fmt.Errorf("sim: idle timeout %v: want 0 (none) or a positive duration", opts.IdleTimeout)
	}
	if opts.ReasoningTokens < 0 {
		return nil, fmt.Errorf("sim: reasoning tokens %d: want 0 (none) or more", opts.ReasoningTokens)
	}
	switch opts.ReasoningField {
	case "":
		opts.ReasoningField = ReasoningFieldReasoning
	case ReasoningFieldReasoning, ReasoningFieldContent:
	default:
		return nil, fmt.Errorf("sim: reasoning field %q: want %q or %q", opts.ReasoningField, ReasoningFieldReasoning, ReasoningFieldContent)
	}
	if opts.Tokenizer == nil {
		tk, err := defaultCounter()
		if err != nil {
			return nil, fmt.Errorf("sim: tokenizer: %w", err)
		}
		opts.Tokenizer = tk
	}
	if err := checkOutputWords(opts.Tokenizer); err != nil {
		return nil, err
	}
	var cache *prefixCache
	switch opts.PrefixCaching {
	case "":
		if prof.PrefixCaching {
			cache = newPrefixCache(kv)
		}
	case PrefixCachingOn:
		cache = newPrefixCache(kv)
	case PrefixCachingOff:
	default:
		return nil, fmt.Errorf("sim: prefix caching %q: want %q or %q", opts.PrefixCaching, PrefixCachingOn, PrefixCachingOff)
	}
	var enc Encoder
	if cache != nil {
		var ok bool
		if enc, ok = opts.Tokenizer.(Encoder); !ok {
			return nil, errors.New("sim: prefix caching needs a tokenizer that encodes token ids; this one only counts")
		}
	}
	clk := newSimClock(opts.TimeScale)
	s := &Server{
		opts:    opts,
		prof:    prof,
		model:   opts.Model,
		clk:     clk,
		engine:  newEngine(prof, clk, maxSeqs, batchTokens, kv, cache),
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

// Handler serves /v1/chat/completions, /v1/completions, /v1/models, /health
// and /metrics.
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
func (s *Server) PrefixCaching() bool { return s.engine.cache != nil }

// Engine is the engine kind in use.
func (s *Server) Engine() string { return s.opts.Engine }

// Profile is the profile in use.
func (s *Server) Profile() *Profile { return s.prof }

// Model is the served model id.
func (s *Server) Model() string { return s.model }

// Close aborts every request in the engine, releases stalled responses and
// stops the engine. It is safe to call more than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.closing)
		s.engine.close()
	})
}

func (s *Server) handleModels(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"object": "list",
		"data": []map[string]any{{
			"id": s.model, "object": "model", "created": s.created, "owned_by": "rehearse-sim",
			"root": s.model, "max_model_len": s.prof.MaxModelLen,
		}},
	})
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
	if req.Model != "" && req.Model != s.model {
		return nil, http.StatusNotFound, fmt.Errorf("the model `%s` does not exist (this server serves `%s`)", req.Model, s.model)
	}
	if req.N != nil && *req.N != 1 {
		return nil, http.StatusBadRequest, fmt.Errorf("n = %d: the simulator returns one choice", *req.N)
	}
	if req.Temperature != nil && (*req.Temperature < 0 || !finite(*req.Temperature)) {
		return nil, http.StatusBadRequest, fmt.Errorf("temperature = %g: want >= 0", *req.Temperature)
	}
	prompt, userText, err := s.promptOf(&req, completions)
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
		j.promptTokens, j.blocks = len(ids), blockHashes(ids)
	} else {
		j.promptTokens = s.counter.Count(prompt)
	}
	maxLen := s.prof.MaxModelLen
	if j.promptTokens >= maxLen {
		return nil, http.StatusBadRequest, fmt.Errorf("this model's maximum context length is %d tokens; the messages have %d", maxLen, j.promptTokens)
	}
	maxTokens := maxLen - j.promptTokens
	switch {
	case req.MaxCompletionTokens != nil:
		maxTokens = *req.MaxCompletionTokens
	case req.MaxTokens != nil:
		maxTokens = *req.MaxTokens
	}
	if maxTokens < 1 {
		return nil, http.StatusBadRequest, fmt.Errorf("max_tokens = %d: want >= 1", maxTokens)
	}
	if j.promptTokens+maxTokens > maxLen {
		return nil, http.StatusBadRequest, fmt.Errorf("this model's maximum context length is %d tokens; you requested %d (%d in the messages, %d in the completion)", maxLen, j.promptTokens+maxTokens, j.promptTokens, maxTokens)
	}
	if j.promptTokens+maxTokens > s.engine.kvBudget {
		return nil, http.StatusBadRequest, fmt.Errorf("the request needs %d KV-cache tokens, over the engine's budget of %d", j.promptTokens+maxTokens, s.engine.kvBudget)
	}
	if req.MinTokens < 0 || req.MinTokens > maxTokens {
		return nil, http.StatusBadRequest, fmt.Errorf("min_tokens = %d: want between 0 and max_tokens (%d)", req.MinTokens, maxTokens)
	}
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
	j.fault = planFault(s.opts.Faults, s.opts.Seed, reqN, n)
	return j, 0, nil
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
	msgs := make([]chatMessage, len(req.Messages))
	for i, m := range req.Messages {
		if m.Role == "" {
			return "", "", fmt.Errorf("messages[%d].role is empty", i)
		}
		text, err := messageText(m.Content)
		if err != nil {
			return "", "", fmt.Errorf("messages[%d].content: %v", i, err)
		}
		msgs[i] = chatMessage{Role: m.Role, Content: text}
	}
	return renderChat(s.prof, msgs), lastUserText(msgs), nil
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
func lastUserText(msgs []chatMessage) string {
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
	arrivalS := s.clk.now()
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
	if !s.clk.sleepUntil(r.Context(), s.frontendDone(arrivalS)) {
		out.note = "client went away before the engine saw the request"
		return
	}
	seq := &sequence{promptTokens: j.promptTokens, blocks: j.blocks, outputTokens: j.outputTokens, arrivalS: arrivalS, finishReason: j.finish}
	if err := s.engine.submit(seq); err != nil {
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
func (s *Server) stream(w http.ResponseWriter, r *http.Request, j *job, seq *sequence, out *outcome) {
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)

	model, _ := json.Marshal(s.model)
	object, piece, finish := "chat.completion.chunk", `{"index":0,"delta":{"content":`, `{"index":0,"delta":{},"logprobs":null,"finish_reason":%q}]}`
	if j.completions {
		object, piece, finish = "text_completion", `{"index":0,"text":`, `{"index":0,"text":"","logprobs":null,"finish_reason":%q}]}`
	}
	head := fmt.Appendf(nil, `data: {"id":%q,"object":%q,"created":%d,"model":%s,"choices":[`, j.id, object, time.Now().Unix(), model)
	// appendHead opens a chunk with h (head, or a prefix of it); with
	// StampSends it carries the send time of the write it is built for.
	var sentNS int64
	appendHead := func(buf, h []byte) []byte {
		if !s.opts.StampSends {
			return append(buf, h...)
		}
		buf = append(buf, `data: {"`+SentStampField+`":`...)
		buf = strconv.AppendInt(buf, sentNS, 10)
		buf = append(buf, ',')
		return append(buf, h[len(`data: {`):]...)
	}
	var buf []byte
	if !j.completions {
		// A chat stream opens with the assistant's role; a completions
		// stream has none.
		sentNS = time.Now().UnixNano()
		buf = appendHead(buf, head)
		buf = append(buf, `{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`+"\n\n"...)
	}
	reasoningDelta := `{"index":0,"delta":{"` + s.opts.ReasoningField + `":`
	if _, err := w.Write(buf); err != nil {
		s.engine.abandon(seq)
		out.clientLeft()
		return
	}
	rc.Flush()

	sent := 0
	defer func() { out.tokens = sent }()
	for {
		select {
		case <-seq.notify:
		case <-r.Context().Done():
			s.engine.abandon(seq)
			out.clientLeft()
			return
		}
		produced := int(seq.produced.Load())
		state := seq.state.Load()
		if sent == 0 && produced > 0 {
			out.firstS = seq.firstTokenS - out.arrivalS
		}
		buf = buf[:0]
		sentNS = time.Now().UnixNano()
		for sent < produced {
			if j.fault.kind != "" && j.fault.kind != FaultOverrun && sent == j.fault.atToken {
				if j.fault.kind == FaultMalformed {
					// One chunk of invalid JSON; the stream carries on.
					buf = appendHead(buf, head)
					buf = append(buf, piece+`" the`+"\n\n"...)
					out.note = noteMalformed
					j.fault.kind = ""
					continue
				}
				s.engine.abandon(seq)
				w.Write(buf)
				rc.Flush()
				s.streamFault(w, rc, r, j, out)
				return
			}
			buf = appendHead(buf, head)
			closing := `},"logprobs":null,"finish_reason":null}]}` + "\n\n"
			switch {
			case j.completions:
				buf = append(buf, piece...)
				closing = `,"logprobs":null,"finish_reason":null}]}` + "\n\n"
			case sent < j.reasoningTokens:
				buf = append(buf, reasoningDelta...)
			case j.toolCalls && sent == j.reasoningTokens:
				buf = fmt.Appendf(buf, `{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_%s","type":"function","function":{"name":%q,"arguments":`, j.id, ToolCallName)
				closing = `}}]` + closing
			case j.toolCalls:
				buf = append(buf, `{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":`...)
				closing = `}}]` + closing
			default:
				buf = append(buf, piece...)
			}
			buf = j.text.appendPieceJSON(buf, sent)
			buf = append(buf, closing...)
			sent++
		}
		if sent == j.outputTokens && j.fault.kind == FaultOverrun {
			closing := `},"logprobs":null,"finish_reason":null}]}` + "\n\n"
			if j.completions {
				closing = `,"logprobs":null,"finish_reason":null}]}` + "\n\n"
			}
			if !s.overrun(w, rc, j, buf, func(b []byte, i int) []byte {
				b = append(appendHead(b, head), piece...)
				return append(j.text.appendPieceJSON(b, i), closing...)
			}, out) {
				return
			}
			buf = buf[:0]
		}
		if sent == j.outputTokens {
			buf = appendHead(buf, head)
			buf = fmt.Appendf(buf, finish+"\n\n", j.finish)
			if j.includeUsage {
				buf = appendHead(buf, head[:len(head)-len(`"choices":[`)])
				buf = fmt.Appendf(buf, `"choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`+"\n\n",
					j.promptTokens, sent, j.promptTokens+sent)
			}
			buf = append(buf, "data: [DONE]\n\n"...)
			w.Write(buf)
			rc.Flush()
			out.finish = j.finish
			return
		}
		if state == seqAborted {
			buf = append(buf, `data: {"error":{"message":"the simulated engine shut down before the request finished","type":"InternalServerError","param":null,"code":500}}`+"\n\n"...)
			buf = append(buf, "data: [DONE]\n\n"...)
			w.Write(buf)
			rc.Flush()
			out.note = "aborted: server shutting down"
			return
		}
		if len(buf) > 0 {
			if _, err := w.Write(buf); err != nil {
				s.engine.abandon(seq)
				out.clientLeft()
				return
			}
			rc.Flush()
		}
	}
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
func (s *Server) complete(w http.ResponseWriter, r *http.Request, j *job, seq *sequence, out *outcome) {
	faultAt := -1
	if j.fault.kind != "" && j.fault.kind != FaultOverrun {
		faultAt = j.fault.atToken
	}
	for {
		select {
		case <-seq.notify:
		case <-r.Context().Done():
			s.engine.abandon(seq)
			out.note = "client went away"
			return
		}
		produced := int(seq.produced.Load())
		if out.firstS < 0 && produced > 0 {
			out.firstS = seq.firstTokenS - out.arrivalS
		}
		if faultAt >= 0 && produced >= faultAt {
			s.engine.abandon(seq)
			s.completeFault(w, r, j, out)
			return
		}
		if produced >= j.outputTokens {
			break
		}
		if seq.state.Load() == seqAborted {
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
		line += fmt.Sprintf(" sim_e2e_s=%.3f", s.clk.now()-out.arrivalS)
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
