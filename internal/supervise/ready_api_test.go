package supervise

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// apiServer serves health and models, and answers POST chatPath with a chat
// completion and POST completionsPath with a text completion (an empty path:
// not served, 404).
func apiServer(t *testing.T, chatPath, completionsPath string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		switch {
		case r.Method == http.MethodGet && (r.URL.Path == "/health" || r.URL.Path == "/v1/models"):
			io.WriteString(w, `{"data":[{"id":"m"}]}`)
		case r.Method == http.MethodPost && r.URL.Path == chatPath:
			io.WriteString(w, `{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"x"},"finish_reason":"length"}]}`)
		case r.Method == http.MethodPost && r.URL.Path == completionsPath:
			io.WriteString(w, `{"object":"text_completion","choices":[{"index":0,"text":"x","finish_reason":"length"}]}`)
		default:
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"detail":"Not Found"}`)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// The tiny request of --ready full sends the endpoint's API and says so
// when the server does not serve it there, or answers the other API.
func TestReadyNamesAnAPIMismatch(t *testing.T) {
	both := apiServer(t, "/v1/chat/completions", "/v1/completions")
	chatOnly := apiServer(t, "/v1/chat/completions", "")
	// A proxy that answers chat at the completions path.
	chatAtCompletions := apiServer(t, "/v1/completions", "")
	for _, ep := range []string{"/v1/chat/completions", "/v1/completions"} {
		if err := WaitReady(context.Background(), nil, Probe{BaseURL: both.URL, Endpoint: ep, Timeout: 5 * time.Second, Interval: 10 * time.Millisecond}); err != nil {
			t.Errorf("%s on a server of both APIs: %v", ep, err)
		}
	}
	for _, tc := range []struct {
		srv  *httptest.Server
		ep   string
		want []string
	}{
		{chatOnly, "/v1/completions", []string{"HTTP 404", "sends the completions API", "--backend openai-chat"}},
		{chatAtCompletions, "/v1/completions", []string{"a chat response, not a completions one", "--backend openai-chat"}},
	} {
		err := WaitReady(context.Background(), nil, Probe{BaseURL: tc.srv.URL, Endpoint: tc.ep, Timeout: 5 * time.Second, Interval: 10 * time.Millisecond})
		if err == nil {
			t.Fatalf("%s: ready", tc.ep)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q lacks %q", tc.ep, err, w)
			}
		}
	}
}
