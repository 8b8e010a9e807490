package endpoint

import "testing"

func TestIsCompletions(t *testing.T) {
	for ep, want := range map[string]bool{
		"/v1/completions": true, "/v1/completions/": true, "/openai/v1/completions": true,
		"/v1/chat/completions": false, "/v1/chat/completions/": false, "/generate": false, "/v1/responses": false,
	} {
		if got := IsCompletions(ep); got != want {
			t.Errorf("IsCompletions(%q) = %v, want %v", ep, got, want)
		}
	}
}
