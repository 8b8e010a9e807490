package stream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/rehearse/rehearse/internal/contract"
)

// chunk is the part of a chat.completion.chunk the client reads.
type chunk struct {
	Choices []choice        `json:"choices"`
	Usage   *usage          `json:"usage"`
	Error   json.RawMessage `json:"error"`
	// SentNS is the server's send stamp (wall-clock Unix nanoseconds), a
	// field only rehearse sim --stamp-sends writes; 0 when absent.
	SentNS int64 `json:"rehearse_sent_ns"`
}

type choice struct {
	Delta delta `json:"delta"`
	// Text is the content field of the legacy completions stream.
	Text         *string `json:"text"`
	FinishReason *string `json:"finish_reason"`
}

// delta is the part of a choice's delta the client reads: content, the
// reasoning channel under either of its names (vLLM wrote
// reasoning_content, the DeepSeek name, until it moved to reasoning in
// v0.11.1 and dropped the old name in 2026; DeepSeek's API still writes
// it), and tool-call arguments.
type delta struct {
	Content          *string    `json:"content"`
	Reasoning        *string    `json:"reasoning"`
	ReasoningContent *string    `json:"reasoning_content"`
	ToolCalls        []toolCall `json:"tool_calls"`
}

// toolCall is one entry of delta.tool_calls; only its arguments text is
// read (the name and id are syntax the server's parser took out of the
// generated text, not text the model streamed as such).
type toolCall struct {
	Function *struct {
		Arguments *string `json:"arguments"`
	} `json:"function"`
}

// reasoning returns the delta's reasoning text: reasoning, else
// reasoning_content. vLLM versions between the rename and the removal send
// both with the same text, which must count once.
func (d *delta) reasoning() *string {
	if d.Reasoning != nil {
		return d.Reasoning
	}
	return d.ReasoningContent
}

type usage struct {
	PromptTokens     *int `json:"prompt_tokens"`
	CompletionTokens *int `json:"completion_tokens"`
}

// state is the in-band outcome of a stream so far.
type state struct {
	done    bool   // "[DONE]" arrived
	fail    string // an error kind decided in-band (server_error, stream_malformed)
	failMsg string
	// c is the chunk every event is read into, reset each time, so that
	// its choices list is reused. Its strings point into the event's data
	// (parseChunkInto) and are cleared once the event is handled: what the
	// result keeps is copied.
	c chunk
	// arena holds the string pointers of c's fields.
	arena []string
	// reasoning and toolCalls collect the text of the channels beside
	// content: reasoning, and tool-call arguments.
	reasoning, toolCalls strings.Builder
	// bounds are what the stream may send (boundsFor); generated and
	// textLen count its chunks and bytes of generated text so far.
	bounds             bounds
	generated, textLen int
}

var doneMarker = []byte("[DONE]")

// handle applies one event to the result: content is appended and its
// arrival stamped; finish_reason and usage are kept; an error event or data
// that is not a chunk ends the stream as a failure.
//
// Reasoning and tool-call argument text go to s.reasoning and s.toolCalls;
// generated text of any channel stamps FirstToken.
//
// A chunk past the stream's bounds (overran) ends it as stream_malformed
// before any of its text is kept.
func (s *state) handle(ev Event, now time.Time, res *Result, text *strings.Builder) {
	data := bytes.TrimSpace(ev.Data)
	if bytes.Equal(data, doneMarker) {
		s.done = true
		return
	}
	if ev.Name == "error" {
		s.fail, s.failMsg = contract.ErrServerError, "error event: "+errorMessage(data)
		return
	}
	c := &s.c
	c.Choices, c.Usage, c.Error, c.SentNS = c.Choices[:0], nil, nil, 0
	if s.arena == nil {
		s.arena = make([]string, 0, 8)
	}
	s.arena = s.arena[:0]
	defer s.forget()
	if !parseChunkInto(data, c, &s.arena) {
		*c = chunk{}
		if err := json.Unmarshal(data, c); err != nil {
			s.fail = contract.ErrStreamMalformed
			s.failMsg = fmt.Sprintf("unparseable data %q: %v", cut(string(data)), err)
			return
		}
	}
	if s.overran(c, res.Chunks) {
		return
	}
	if c.SentNS != 0 {
		res.AddedNS = append(res.AddedNS, now.UnixNano()-c.SentNS)
		res.LagNS = append(res.LagNS, int64(time.Since(now)))
	}
	if len(c.Error) > 0 && string(c.Error) != "null" {
		s.fail, s.failMsg = contract.ErrServerError, "in-band error: "+errorMessage(data)
		return
	}
	if c.Usage != nil {
		c.Usage.takeInto(res)
	}
	content, other := s.takeChoices(c.Choices, res, text)
	if (content || other) && res.FirstToken.IsZero() {
		res.FirstToken = now
	}
	if content {
		if res.FirstContent.IsZero() {
			res.FirstContent = now
		}
		res.ChunkTimes = append(res.ChunkTimes, now)
	}
}

// takeInto copies the usage's token counts (those present) into res.
func (u *usage) takeInto(res *Result) {
	if u.CompletionTokens != nil {
		v := *u.CompletionTokens
		res.UsageCompletionTokens = &v
	}
	if u.PromptTokens != nil {
		v := *u.PromptTokens
		res.UsagePromptTokens = &v
	}
}

// takeChoices adds a chunk's choices' pieces: content (the delta's, or a
// completion's text) to text, reasoning and tool-call arguments to s's, a
// finish reason to res; it reports whether there was content and whether
// there was another piece.
func (s *state) takeChoices(choices []choice, res *Result, text *strings.Builder) (content, other bool) {
	for i := range choices {
		cc := &choices[i]
		piece := cc.Delta.Content
		if piece == nil {
			piece = cc.Text
		}
		if piece != nil && *piece != "" {
			text.WriteString(*piece)
			content = true
		}
		if r := cc.Delta.reasoning(); r != nil && *r != "" {
			other = true
			s.reasoning.WriteString(*r)
		}
		for _, tc := range cc.Delta.ToolCalls {
			if tc.Function != nil && tc.Function.Arguments != nil && *tc.Function.Arguments != "" {
				other = true
				s.toolCalls.WriteString(*tc.Function.Arguments)
			}
		}
		if cc.FinishReason != nil && *cc.FinishReason != "" && *cc.FinishReason != res.FinishReason {
			res.FinishReason = strings.Clone(*cc.FinishReason)
		}
	}
	return content, other
}

// forget drops the chunk's pointers into the event's data, which the
// decoder reuses for the next event.
func (s *state) forget() {
	clear(s.c.Choices)
	clear(s.arena)
}
