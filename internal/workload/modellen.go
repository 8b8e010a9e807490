package workload

import "fmt"

// Counter counts the tokens of a text; Encoder and the pinned tokenizer
// satisfy it.
type Counter interface{ Count(text string) int }

// TooLongError is a prompt whose input tokens plus max_tokens exceed a
// server's max_model_len.
type TooLongError struct {
	// Index is the prompt's index in the resolved list (the bundle's
	// workload.prompts).
	Index       int
	InputTokens int
	MaxTokens   int
	MaxModelLen int
	// Server names the server whose limit it is.
	Server string
}

func (e *TooLongError) Error() string {
	return fmt.Sprintf("prompt %d: %d input tokens + max_tokens %d = %d, over max_model_len %d of server %s",
		e.Index, e.InputTokens, e.MaxTokens, e.InputTokens+e.MaxTokens, e.MaxModelLen, e.Server)
}

// CheckModelLen returns the first prompt of ps whose input tokens (its
// messages' contents, else its text, as enc counts them) plus its
// max_tokens (its own, else maxTokens) exceed limit, or nil when none
// does. The chat template's tokens are not counted: the check is a lower
// bound of what the server counts.
func CheckModelLen(ps []Prompt, maxTokens, limit int, server string, enc Counter) *TooLongError {
	for i, p := range ps {
		mt := maxTokens
		if p.MaxTokens > 0 {
			mt = p.MaxTokens
		}
		if in := inputTokens(p, enc); in+mt > limit {
			return &TooLongError{Index: i, InputTokens: in, MaxTokens: mt, MaxModelLen: limit, Server: server}
		}
	}
	return nil
}
