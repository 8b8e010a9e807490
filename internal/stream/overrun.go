package stream

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/rehearse/rehearse/internal/contract"
)

// OverrunFactor is how far past its max_tokens a stream may go: one that
// sends more than OverrunFactor × max_tokens chunks of generated text
// (content, reasoning or tool-call arguments) is cut there and recorded as
// stream_malformed, so a server that ignores max_tokens cannot grow a
// record, and the client, without limit. A server that honours max_tokens
// sends at most one such chunk a token; the factor leaves room for one
// that splits a token's text over several.
const OverrunFactor = 4

// MaxTokensCeiling is the max_tokens the bounds assume for a request that
// sets none, and the most they assume for any: 128 Ki tokens, a served
// model's longest outputs. A request of max_tokens above it is held to it
// (4 × 131,072 chunks still fit any output its context allows).
const MaxTokensCeiling = 1 << 17

// TokenTextBytes bounds the generated text a request keeps: at most
// TokenTextBytes × OverrunFactor × max_tokens bytes of content, reasoning
// and tool-call arguments together (at least MinTextBytes), far above any
// tokenizer's longest token. A stream that sends more, in however few
// chunks, is cut as an overrun before the excess is kept.
const TokenTextBytes = 64

// MinTextBytes is the least text bound, for a small max_tokens.
const MinTextBytes = 64 << 10

// EventSlack is the events without generated text (the role, the finish,
// usage, empty deltas) a stream may send beyond its OverrunFactor ×
// max_tokens chunks before it is cut as an overrun: events carry stamps
// (Result.AddedNS) that would grow without limit too.
const EventSlack = 64

// bounds are what one request's stream may send before it is an overrun.
type bounds struct {
	asked   int // the request's max_tokens (× n); 0 when it set none
	held    int // asked, or MaxTokensCeiling when none or more
	chunks  int // chunks of generated text
	events  int // data events in all
	textLen int // bytes of generated text
}

// boundsFor is the bounds of a request that asked for maxTokens (0: none).
func boundsFor(maxTokens int) bounds {
	b := bounds{asked: maxTokens, held: maxTokens}
	if b.held <= 0 || b.held > MaxTokensCeiling {
		b.held = MaxTokensCeiling
	}
	b.chunks = OverrunFactor * b.held
	b.events = b.chunks + EventSlack
	b.textLen = max(MinTextBytes, TokenTextBytes*b.chunks)
	return b
}

// what names the request's max_tokens in an overrun's error.
func (b bounds) what() string {
	switch {
	case b.asked <= 0:
		return fmt.Sprintf("a request without max_tokens (held to %d)", b.held)
	case b.asked > b.held:
		return fmt.Sprintf("max_tokens %d (held to %d)", b.asked, b.held)
	}
	return fmt.Sprintf("max_tokens %d", b.asked)
}

// overran checks one event's chunk c, the stream's events-th, against the
// bounds before any of its text is kept: within them it counts the chunk
// and returns false; past them it fails the stream as stream_malformed,
// naming the overrun. Unset bounds (a zero state) are the ceiling's.
func (s *state) overran(c *chunk, events int) bool {
	n, generated := 0, false
	for i := range c.Choices {
		cc := &c.Choices[i]
		piece := cc.Delta.Content
		if piece == nil {
			piece = cc.Text
		}
		if piece != nil {
			n += len(*piece)
		}
		if r := cc.Delta.reasoning(); r != nil {
			n += len(*r)
		}
		for _, tc := range cc.Delta.ToolCalls {
			if tc.Function != nil && tc.Function.Arguments != nil {
				n += len(*tc.Function.Arguments)
			}
		}
	}
	generated = n > 0
	b := &s.bounds
	if b.chunks == 0 {
		*b = boundsFor(0) // a state no stream set up: the ceiling's bounds
	}
	switch {
	case generated && s.generated >= b.chunks:
		s.failMsg = fmt.Sprintf("stream overran: %d chunks of generated text for %s (cut at %d×)", s.generated+1, b.what(), OverrunFactor)
	case s.textLen+n > b.textLen:
		s.failMsg = fmt.Sprintf("stream overran: %d bytes of generated text for %s (cut at %d bytes)", s.textLen+n, b.what(), b.textLen)
	case events > b.events:
		s.failMsg = fmt.Sprintf("stream overran: %d events for %s (cut at %d× + %d)", events, b.what(), OverrunFactor, EventSlack)
	default:
		if generated {
			s.generated++
		}
		s.textLen += n
		return false
	}
	s.fail = contract.ErrStreamMalformed
	return true
}

// outputLimit is the tokens a request body lets the server generate: the
// larger of its max_tokens and max_completion_tokens (either may come from
// ExtraBody), times its n; 0 when it sets neither as a positive number.
func outputLimit(body map[string]any) int {
	limit := max(positiveInt(body["max_tokens"]), positiveInt(body["max_completion_tokens"]))
	if n := positiveInt(body["n"]); n > 1 && limit > 0 {
		limit = int(min(int64(limit)*int64(n), math.MaxInt32))
	}
	return limit
}

// positiveInt reads a body value that is a positive whole number, as Go
// or a YAML or JSON decoder gives it; 0 for anything else.
func positiveInt(v any) int {
	var f float64
	switch x := v.(type) {
	case int:
		f = float64(x)
	case int64:
		f = float64(x)
	case uint64:
		f = float64(x)
	case float64:
		f = x
	case json.Number:
		var err error
		if f, err = x.Float64(); err != nil {
			return 0
		}
	default:
		return 0
	}
	if !(f >= 1) || f != math.Trunc(f) {
		return 0
	}
	return int(min(f, math.MaxInt32))
}
