package workload

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"
)

// Sessions asks a source for multi-turn sessions instead of single
// prompts: conversations of several user turns, each turn sent after the
// reply to the one before it ended, carrying the whole history.
type Sessions struct {
	// Turns is, for the synthetic source, the exact number of user turns
	// of every session (at least 1); for the sharegpt and chat_jsonl
	// sources, the most user turns a session keeps (0: all of them).
	Turns int
	// Think is the pause between a reply's end and the next turn's send.
	Think ThinkTime
}

// Session is one conversation: its user turns in order, each an index into
// Set.Prompts. The first turn's prompt may carry messages (a chat JSONL
// system prompt before the first user message); later turns' prompts are
// their user message alone.
type Session struct {
	Turns []int `json:"turns"`
}

// SessionSources are the sources that can give multi-turn sessions.
var SessionSources = []string{SourceShareGPT, SourceChatJSONL, SourceSynthetic}

// Think-time distributions.
const (
	ThinkFixed       = "fixed"       // always Mean
	ThinkExponential = "exponential" // exponential with mean Mean
	ThinkUniform     = "uniform"     // uniform over [0, 2·Mean]
)

// ThinkDistributions lists the think-time distributions.
var ThinkDistributions = []string{ThinkFixed, ThinkExponential, ThinkUniform}

// ThinkTime is the pause a session takes between a reply's end and its
// next turn's send: Mean (0: none), drawn from Distribution ("" is fixed)
// by a generator seeded with (Seed, the session's run, the turn), so a
// wave's pauses are the same whatever the server's speed.
type ThinkTime struct {
	Mean         time.Duration
	Distribution string
	Seed         int64
}

// Check says what is wrong with t, or nil.
func (t ThinkTime) Check() error {
	switch {
	case t.Mean < 0:
		return fmt.Errorf("%v: negative", t.Mean)
	case t.Distribution != "" && !contains(ThinkDistributions, t.Distribution):
		return fmt.Errorf("distribution %q: want one of %s", t.Distribution, strings.Join(ThinkDistributions, ", "))
	}
	return nil
}

// Draw is the pause before turn (1 for the first; turn 1 has none) of the
// given run of a session: run counts the sessions a wave started, in the
// order they started.
func (t ThinkTime) Draw(run, turn int) time.Duration {
	if t.Mean <= 0 || turn <= 1 {
		return 0
	}
	switch t.Distribution {
	case ThinkExponential:
		rng := rand.New(rand.NewPCG(uint64(t.Seed), uint64(run)<<20|uint64(turn)))
		return time.Duration(math.Round(rng.ExpFloat64() * float64(t.Mean)))
	case ThinkUniform:
		rng := rand.New(rand.NewPCG(uint64(t.Seed), uint64(run)<<20|uint64(turn)))
		return time.Duration(rng.Int64N(2*int64(t.Mean) + 1))
	}
	return t.Mean
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// addSession appends a session of the given turns to set.
func (s *Set) addSession(turns []Prompt) {
	sess := Session{Turns: make([]int, len(turns))}
	for j, p := range turns {
		sess.Turns[j] = len(s.Prompts)
		s.Prompts = append(s.Prompts, p)
	}
	s.Sessions = append(s.Sessions, sess)
}

// kept is how many entries of a dataset set keeps: its sessions, or its
// prompts.
func (s *Set) kept(spec Spec) int {
	if spec.Sessions != nil {
		return len(s.Sessions)
	}
	return len(s.Prompts)
}

// sessionParams records the sessions' parameters in a source's params.
func sessionParams(params map[string]any, spec Spec) map[string]any {
	if spec.Sessions == nil {
		return params
	}
	if params == nil {
		params = map[string]any{}
	}
	params["turns"] = spec.Sessions.Turns
	return params
}

// shareGPTSession is a ShareGPT conversation as a session: its human turns
// in order, up to max turns, stopping at an empty one. With use_output_len
// each turn's max_tokens is the token length of the reply after it, and the
// session stops before a turn without one; with max_model_len it stops
// before the turn whose history (the user turns and dataset replies before
// it, its own text and output) would exceed it. A conversation whose first
// turn is cut is skipped for the reason.
func shareGPTSession(e shareGPTEntry, ds Dataset, enc Encoder, maxTurns int) ([]Prompt, string) {
	conv := e.Conversations
	var out []Prompt
	history := 0
	for j, t := range conv {
		if t.From != "human" && t.From != "user" {
			continue
		}
		if maxTurns > 0 && len(out) >= maxTurns {
			break
		}
		if strings.TrimSpace(t.Value) == "" {
			break
		}
		hasReply := j+1 < len(conv) && strings.TrimSpace(conv[j+1].Value) != ""
		p := Prompt{Text: t.Value}
		if ds.UseOutputLen {
			if !hasReply {
				if len(out) == 0 {
					return nil, SkipNoReply
				}
				break
			}
			p.MaxTokens = max(1, enc.Count(conv[j+1].Value))
		}
		if ds.MaxModelLen > 0 {
			history += enc.Count(p.Text)
			if history+p.MaxTokens > ds.MaxModelLen {
				if len(out) == 0 {
					return nil, SkipTooLong
				}
				break
			}
			if hasReply {
				history += enc.Count(conv[j+1].Value)
			}
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, SkipEmpty
	}
	return out, ""
}

// chatSession is a chat JSONL line as a session: each user message is a
// turn, up to max turns. The first turn sends the messages up to and
// including the first user message (a system prompt, say); later turns send
// their user message after the history. The line's other messages (its
// assistant replies) are not sent: the server's own replies take their
// place. Every turn asks for the line's max_tokens. With max_model_len the
// session stops before the turn whose history (the line's messages up to
// it and its output) would exceed it; a line whose first turn is cut is
// skipped.
func chatSession(p Prompt, ds Dataset, enc Encoder, maxTurns int) ([]Prompt, string) {
	var out []Prompt
	history := 0
	first := -1
	for j, m := range p.Messages {
		if ds.MaxModelLen > 0 {
			history += enc.Count(m.Content)
		}
		if m.Role != "user" {
			continue
		}
		if maxTurns > 0 && len(out) >= maxTurns {
			break
		}
		if ds.MaxModelLen > 0 && history+p.MaxTokens > ds.MaxModelLen {
			if len(out) == 0 {
				return nil, SkipTooLong
			}
			break
		}
		turn := Prompt{Text: m.Content, MaxTokens: p.MaxTokens}
		if first < 0 {
			first = j
			if j > 0 {
				turn.Messages = append([]Message(nil), p.Messages[:j+1]...)
			}
		}
		out = append(out, turn)
	}
	return out, ""
}

// SyntheticSessions builds s.Count sessions of turns user turns each,
// session i from a generator seeded with (s.Seed, i): each turn in order
// draws its input length from s.InputLen, a text the tokenizer counts at
// exactly that length (as SyntheticPrompts builds them), then its
// max_tokens from s.OutputLen. A turn of more input tokens than env
// bounds (its max_model_len, else MaxSourceTokens) is refused before it is
// built.
func SyntheticSessions(s Synthetic, turns int, env Env) ([][]Prompt, error) {
	enc := env.Tokenizer
	pool, err := wordPool(enc)
	if err != nil {
		return nil, err
	}
	out := make([][]Prompt, s.Count)
	var b strings.Builder
	for i := range out {
		rng := rand.New(rand.NewPCG(uint64(s.Seed), uint64(i)))
		out[i] = make([]Prompt, turns)
		for j := range turns {
			n := s.InputLen.Draw(rng)
			if err := env.tokenBound().check("input_len", n); err != nil {
				return nil, fmt.Errorf("synthetic session %d, turn %d: %w", i, j+1, err)
			}
			text, err := exactText(&b, enc, pool, rng, n)
			if err != nil {
				return nil, fmt.Errorf("synthetic session %d, turn %d: %w", i, j+1, err)
			}
			out[i][j] = Prompt{Text: text, MaxTokens: s.OutputLen.Draw(rng)}
		}
	}
	return out, nil
}
