package engine

import "strings"

// Counter counts the tokens of text exactly as the client will: the pinned
// tokenizer's Count (no special tokens added). *tokenizer.Tokenizer
// satisfies it.
type Counter interface {
	Count(text string) int
}

// Message is one message of a chat completions request.
type Message struct {
	Role    string
	Content string
}

// RenderChat renders messages the way the profile's chat template does,
// with the generation prompt: the text whose tokens a prompt costs.
func (p *Profile) RenderChat(msgs []Message) string {
	var b strings.Builder
	if p.DefaultSystemPrompt != "" && (len(msgs) == 0 || msgs[0].Role != "system") {
		b.WriteString("<|im_start|>system\n" + p.DefaultSystemPrompt + "<|im_end|>\n")
	}
	for _, m := range msgs {
		b.WriteString("<|im_start|>" + m.Role + "\n" + m.Content + "<|im_end|>\n")
	}
	b.WriteString("<|im_start|>assistant\n")
	return b.String()
}
