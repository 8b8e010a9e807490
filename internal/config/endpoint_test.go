package config

import (
	"strings"
	"testing"
)

// workload.endpoint /v1/completions is accepted with a single-prompt
// source, and refused with sessions or chat messages, naming the endpoint.
func TestCompletionsEndpoint(t *testing.T) {
	r, err := Parse([]byte(promptsHead+synthHead+"  endpoint: /v1/completions\n"), "r.yaml", t.TempDir())
	if err != nil || r.Workload.Endpoint != "/v1/completions" {
		t.Fatalf("completions endpoint: %v", err)
	}
	for _, c := range []struct{ yaml, want string }{
		{promptsHead + synthHead + "  endpoint: /v1/completions\n  sessions: {turns: 2}\n", `workload.sessions: multi-turn sessions need the chat API, and the endpoint "/v1/completions" is the completions API`},
		{promptsHead + "{source: chat_jsonl, path: c.jsonl}\n  endpoint: /v1/completions\n", `workload.prompts.source: chat_jsonl prompts are chat messages, and the endpoint "/v1/completions"`},
	} {
		_, err := Parse([]byte(c.yaml), "r.yaml", t.TempDir())
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v, want %q", err, c.want)
		}
	}
}
