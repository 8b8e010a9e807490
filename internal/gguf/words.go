package gguf

import "github.com/rehearse/rehearse/internal/tokenizer"

// minWords is the fewest whole-word tokens a vocabulary must have: a model
// that can only say a handful of words repeats itself, and engines cut a
// stream that repeats one token (ollama after 30).
const minWords = 256

// WordTokens marks the ids the model may emit: a token that is a space and
// one or more ASCII letters (" word", byte-level "Ġword") and that the
// tokenizer encodes back to itself alone. Text made of such tokens
// re-tokenizes to exactly those tokens: the pre-tokenizer of Qwen2, Llama 3
// and GPT-2 splits " one two" into " one" and " two" (a space and the
// letters after it are one piece), and each piece encodes to its one token.
func WordTokens(tok *tokenizer.Tokenizer, n int) (words []bool, count int) {
	words = make([]bool, n)
	for id := 0; id < min(n, tok.VocabSize()); id++ {
		b, ok := tok.TokenBytes(id)
		if !ok || !isWord(b) {
			continue
		}
		if ids := tok.Encode(string(b)); len(ids) == 1 && ids[0] == id {
			words[id] = true
			count++
		}
	}
	return words, count
}

// isWord reports whether b is a space and one or more ASCII letters.
func isWord(b []byte) bool {
	if len(b) < 2 || b[0] != ' ' {
		return false
	}
	for _, c := range b[1:] {
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') {
			return false
		}
	}
	return true
}
