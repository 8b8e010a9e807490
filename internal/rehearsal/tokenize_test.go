package rehearsal

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// wordCounter counts words: a counter whose count a fake server can match.
type wordCounter struct{}

func (wordCounter) Count(text string) int { return len(strings.Fields(text)) }

func TestTokenizeCheck(t *testing.T) {
	var asked atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		var req struct {
			Model            string `json:"model"`
			Prompt           string `json:"prompt"`
			AddSpecialTokens *bool  `json:"add_special_tokens"`
		}
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path != "/tokenize" || r.Method != http.MethodPost || json.Unmarshal(body, &req) != nil || req.AddSpecialTokens == nil || *req.AddSpecialTokens {
			http.NotFound(w, r)
			return
		}
		if r.Header.Get("Authorization") != "Bearer k" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		n := len(strings.Fields(req.Prompt))
		if req.Model == "other" {
			n++
		}
		json.NewEncoder(w).Encode(map[string]any{"count": n, "tokens": make([]int, n)})
	}))
	defer srv.Close()
	ctx := context.Background()
	if w := tokenizeCheck(ctx, http.DefaultClient, srv.URL, "k", "m", "three words here", wordCounter{}); w != "" {
		t.Errorf("counts agree: %q", w)
	}
	w := tokenizeCheck(ctx, http.DefaultClient, srv.URL+"/", "k", "other", "three words here", wordCounter{})
	if w != "the server's /tokenize counts 4 tokens in the first prompt, rehearse's tokenizer 3: output tokens are not being counted with the served model's tokenizer (give its own tokenizer.json)" {
		t.Errorf("counts differ: %q", w)
	}
	before := asked.Load()
	if w := tokenizeCheck(ctx, http.DefaultClient, srv.URL, "k", "m", "text", nil); w != "" || asked.Load() != before {
		t.Errorf("no counter: %q, asked %d times", w, asked.Load()-before)
	}
	// No /tokenize, or one that refuses: nothing to say.
	for _, url := range []string{srv.URL + "/v1", "http://127.0.0.1:1"} {
		if w := tokenizeCheck(ctx, http.DefaultClient, url, "k", "m", "text", wordCounter{}); w != "" {
			t.Errorf("%s: %q", url, w)
		}
	}
	if w := tokenizeCheck(ctx, http.DefaultClient, srv.URL, "", "m", "text", wordCounter{}); w != "" {
		t.Errorf("unauthorized: %q", w)
	}
}
