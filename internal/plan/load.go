package plan

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/stream"
	"github.com/rehearse/rehearse/internal/workload"
)

// Load is what each request of a wave sends (package drive sends it).
type Load struct {
	// Prompts are assigned round-robin: client (or request) i sends
	// Prompts[workload.PromptIndex(i, len(Prompts))].
	Prompts     []string
	MaxTokens   int
	Temperature float64
	// Timeout bounds each request from send to end of stream.
	Timeout time.Duration
	// PromptMaxTokens is each prompt's own max_tokens, aligned with
	// Prompts (0 or absent: MaxTokens).
	PromptMaxTokens []int
	// InputTokens is each prompt counted with the pinned tokenizer,
	// aligned with Prompts (nil: not counted); the runner counts them
	// (drive.CountInputs).
	InputTokens []int
	// Messages is each prompt's whole conversation, aligned with Prompts
	// (nil or absent: Prompts[i] as one user message).
	Messages [][]stream.Message
	// Arrivals, where the prompts come from a trace, is when request i of
	// an open-loop wave of arrival trace is sent (prompt i, once each),
	// from the wave's release; aligned with Prompts.
	Arrivals []time.Duration
	// Sessions, when set, make each client go through multi-turn sessions
	// of these prompts instead of single prompts.
	Sessions []workload.Session
	// Think is the pause before each later turn of a session.
	Think workload.ThinkTime
	// Style is the request body's shape (endpoint.StyleVLLM or rehearse's).
	Style string
	// RequestIDPrefix, when set, sends prompt i's requests with the
	// x-request-id prefix + i (vLLM's --request-id-prefix).
	RequestIDPrefix string
	// Models, when set, is the model name prompt i's requests ask for
	// (a LoRA adapter; workload.AssignModels), aligned with Prompts; nil:
	// the server's model.
	Models []string
}

// ModelFor is the model prompt i's requests ask for ("" for the server's).
func (l Load) ModelFor(i int) string {
	if i >= 0 && i < len(l.Models) {
		return l.Models[i]
	}
	return ""
}

// RequestID is the x-request-id of prompt i's requests ("" for none).
func (l Load) RequestID(i int) string {
	if l.RequestIDPrefix == "" {
		return ""
	}
	return l.RequestIDPrefix + strconv.Itoa(i)
}

// MaxTokensFor is the max_tokens of prompt i.
func (l Load) MaxTokensFor(i int) int {
	if i < len(l.PromptMaxTokens) && l.PromptMaxTokens[i] > 0 {
		return l.PromptMaxTokens[i]
	}
	return l.MaxTokens
}

// MessagesFor is the conversation of prompt i (nil: its text alone).
func (l Load) MessagesFor(i int) []stream.Message {
	if i < len(l.Messages) {
		return l.Messages[i]
	}
	return nil
}

// Stamp sets what r's prompt asked for: its max_tokens, its model where
// it has its own and, where counted, its input tokens.
func (l Load) Stamp(r *contract.Record) {
	if r.Prompt < 0 || r.Prompt >= len(l.Prompts) {
		return
	}
	r.MaxTokens = l.MaxTokensFor(r.Prompt)
	r.Model = l.ModelFor(r.Prompt)
	if r.Prompt < len(l.InputTokens) {
		n := l.InputTokens[r.Prompt]
		r.InputTokens = &n
	}
}

// Validate says what makes l unfit to send, or nil.
func (l Load) Validate() error {
	if len(l.Prompts) == 0 {
		return errors.New("no prompts")
	}
	if l.MaxTokens <= 0 {
		return fmt.Errorf("max_tokens %d: want a positive number", l.MaxTokens)
	}
	if n := len(l.PromptMaxTokens); n != 0 && n != len(l.Prompts) {
		return fmt.Errorf("%d prompt max_tokens for %d prompts", n, len(l.Prompts))
	}
	if n := len(l.Messages); n != 0 && n != len(l.Prompts) {
		return fmt.Errorf("%d prompt conversations for %d prompts", n, len(l.Prompts))
	}
	if n := len(l.Arrivals); n != 0 && n != len(l.Prompts) {
		return fmt.Errorf("%d traced arrivals for %d prompts", n, len(l.Prompts))
	}
	if n := len(l.InputTokens); n != 0 && n != len(l.Prompts) {
		return fmt.Errorf("%d prompt input token counts for %d prompts", n, len(l.Prompts))
	}
	if n := len(l.Models); n != 0 && n != len(l.Prompts) {
		return fmt.Errorf("%d prompt models for %d prompts", n, len(l.Prompts))
	}
	if l.Timeout < 0 {
		return fmt.Errorf("timeout %v: want a positive duration", l.Timeout)
	}
	return l.validateSessions()
}

// validateSessions checks that every turn of l's sessions is a prompt.
func (l Load) validateSessions() error {
	for s, sess := range l.Sessions {
		if len(sess.Turns) == 0 {
			return fmt.Errorf("session %d has no turns", s)
		}
		for t, p := range sess.Turns {
			if p < 0 || p >= len(l.Prompts) {
				return fmt.Errorf("session %d, turn %d: prompt %d of %d", s, t+1, p, len(l.Prompts))
			}
		}
	}
	if err := l.Think.Check(); err != nil {
		return fmt.Errorf("think time %w", err)
	}
	return nil
}
