// Package endpoint is the vocabulary of which API an OpenAI-compatible
// endpoint speaks: its default paths, and which request body a path is
// sent. The client (package stream), the config's checks, readiness and
// the exports all ask it, so none of them need the HTTP client to know.
package endpoint

import "strings"

// Default is the chat-completions path appended to a base URL.
const Default = "/v1/chat/completions"

// Completions is the path of the (legacy) completions API, which takes a
// prompt and streams choices[0].text.
const Completions = "/v1/completions"

// IsCompletions reports whether endpoint is the completions API rather than
// chat completions: a path ending in /completions that is not
// /chat/completions (vLLM's own rule for its openai and openai-chat
// backends). Every other path is sent chat bodies.
func IsCompletions(endpoint string) bool {
	p := strings.TrimRight(endpoint, "/")
	return strings.HasSuffix(p, "/completions") && !strings.HasSuffix(p, "/chat/completions")
}

// API names the request body an endpoint is sent: "completions" or "chat".
func API(endpoint string) string {
	if IsCompletions(endpoint) {
		return "completions"
	}
	return "chat"
}

// Body styles of a request: the shape of the JSON body a workload sends.
const (
	// StyleRehearse is rehearse's body: model, temperature, stream,
	// stream_options, the prompt (completions) or messages (chat), and
	// max_tokens.
	StyleRehearse = ""
	// StyleVLLM is the body of vllm bench serve (vllm/benchmarks/lib/
	// endpoint_request_func.py): no temperature (sampling fields come in
	// ExtraBody), completions with repetition_penalty 1.0 and logprobs
	// null, chat with max_completion_tokens and the prompt as one text
	// part of the user's content.
	StyleVLLM = "vllm"
)
