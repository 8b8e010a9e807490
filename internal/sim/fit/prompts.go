package fit

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/sim/engine"
	"github.com/rehearse/rehearse/internal/tokenizer"
)

// fitSystemPrompt decides whether prompts were rendered with Qwen's default
// system prompt, by counting each fitted prompt both ways against the
// server's usage_prompt_tokens.
func fitSystemPrompt(res *bundle.Results, recs []contract.Record, counter engine.Counter, p *engine.Profile) (string, string) {
	reported := map[int]int{}
	for _, r := range recs {
		if r.UsagePromptTokens != nil && r.Prompt >= 0 && r.Prompt < len(res.Workload.Prompts) {
			reported[r.Prompt] = *r.UsagePromptTokens
		}
	}
	if len(reported) == 0 {
		return "", "default system prompt: none (the server reported no prompt tokens to check one against)"
	}
	if counter == nil {
		c, err := tokenizer.Default()
		if err != nil {
			return "", fmt.Sprintf("default system prompt: none (no tokenizer to check one: %v)", err)
		}
		counter = c
	}
	for _, sys := range []string{qwenSystemPrompt, ""} {
		q := *p
		q.DefaultSystemPrompt = sys
		match := true
		for i, n := range reported {
			if counter.Count(q.RenderChat([]engine.Message{{Role: "user", Content: res.Workload.Prompts[i]}})) != n {
				match = false
				break
			}
		}
		if match {
			if sys == "" {
				return "", fmt.Sprintf("default system prompt: none; the chatml rendering without one counts the server's usage_prompt_tokens of all %d prompts sent", len(reported))
			}
			return sys, fmt.Sprintf("default system prompt: Qwen2.5's; the chatml rendering with it counts the server's usage_prompt_tokens of all %d prompts sent", len(reported))
		}
	}
	return "", "default system prompt: none; neither rendering counts the server's usage_prompt_tokens (prompt lengths only bound the KV budget here)"
}

// naturalLengths fits output lengths from requests that stopped on their
// own (below their prompt's max_tokens).
func naturalLengths(wl bundle.Workload, recs []contract.Record) ([]engine.PromptLength, int) {
	stopped := map[int][]float64{}
	reachedMax := map[int]bool{}
	for _, r := range recs {
		if !r.OK || r.Prompt < 0 || r.Prompt >= len(wl.Prompts) {
			continue
		}
		if g := generated(r); g < maxTokensOf(wl, r.Prompt) {
			stopped[r.Prompt] = append(stopped[r.Prompt], float64(g))
		} else {
			reachedMax[r.Prompt] = true
		}
	}
	var out []engine.PromptLength
	var all []float64
	for i, text := range wl.Prompts {
		n := 0
		switch {
		case len(stopped[i]) > 0:
			n = max(1, int(math.Round(*contract.Median(stopped[i]))))
		case reachedMax[i]:
			n = 1 << 20 // never stopped within max_tokens
		default:
			continue
		}
		all = append(all, float64(n))
		begin := text
		if len(begin) > 40 {
			begin = begin[:40]
		}
		out = append(out, engine.PromptLength{PromptSHA256: sha256Hex(text), Prompt: begin, Tokens: n})
	}
	fallback := wl.MaxTokens
	if len(all) > 0 {
		fallback = max(1, int(math.Round(*contract.Median(all))))
	}
	return out, fallback
}

// sha256Hex is the hex SHA-256 of s, as profiles key prompts.
func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// maxTokensOf is the max_tokens prompt i of the workload is sent with: its
// own, or the workload's.
func maxTokensOf(wl bundle.Workload, i int) int {
	if i < len(wl.PromptMaxTokens) && wl.PromptMaxTokens[i] > 0 {
		return wl.PromptMaxTokens[i]
	}
	return wl.MaxTokens
}
