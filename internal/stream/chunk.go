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
}

type choice struct {
	Delta struct {
		Content *string `json:"content"`
	} `json:"delta"`
	// Text is the content field of the legacy completions stream.
	Text         *string `json:"text"`
	FinishReason *string `json:"finish_reason"`
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
	// its choices list is reused.
	c chunk
}

var doneMarker = []byte("[DONE]")

// handle applies one event to the result: content is appended and its
// arrival stamped; finish_reason and usage are kept; an error event or data
// that is not a chunk ends the stream as a failure.
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
	c.Choices, c.Usage, c.Error = c.Choices[:0], nil, nil
	if !parseChunkFast(data, c) {
		*c = chunk{}
		if err := json.Unmarshal(data, c); err != nil {
			s.fail = contract.ErrStreamMalformed
			s.failMsg = fmt.Sprintf("unparseable data %q: %v", cut(string(data)), err)
			return
		}
	}
	if len(c.Error) > 0 && string(c.Error) != "null" {
		s.fail, s.failMsg = contract.ErrServerError, "in-band error: "+errorMessage(data)
		return
	}
	if c.Usage != nil {
		if c.Usage.CompletionTokens != nil {
			v := *c.Usage.CompletionTokens
			res.UsageCompletionTokens = &v
		}
		if c.Usage.PromptTokens != nil {
			v := *c.Usage.PromptTokens
			res.UsagePromptTokens = &v
		}
	}
	content := false
	for _, ch := range c.Choices {
		piece := ch.Delta.Content
		if piece == nil {
			piece = ch.Text
		}
		if piece != nil && *piece != "" {
			text.WriteString(*piece)
			content = true
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			res.FinishReason = *ch.FinishReason
		}
	}
	if content {
		if res.FirstContent.IsZero() {
			res.FirstContent = now
		}
		res.ChunkTimes = append(res.ChunkTimes, now)
	}
}
