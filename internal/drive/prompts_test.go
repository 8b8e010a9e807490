package drive

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/plan"
	"github.com/rehearse/rehearse/internal/stream"
)

// TestPerPromptMaxTokens checks that each prompt's body asks for its own
// max_tokens and that each record keeps that limit and its input tokens.
func TestPerPromptMaxTokens(t *testing.T) {
	var mu sync.Mutex
	asked := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var body struct {
			Messages  []struct{ Content string } `json:"messages"`
			MaxTokens int                        `json:"max_tokens"`
		}
		data, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(data, &body); err == nil && len(body.Messages) == 1 {
			mu.Lock()
			asked[body.Messages[0].Content] = body.MaxTokens
			mu.Unlock()
		}
		rw.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(rw, `data: {"choices":[{"delta":{"content":"w "},"finish_reason":"length"}]}`+"\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	load := plan.Load{Prompts: []string{"one two", "three", "four five six"}, MaxTokens: 8, Timeout: 10 * time.Second,
		PromptMaxTokens: []int{3, 0, 5}}
	load.InputTokens = CountInputs(load, words{})
	d := New(Options{Counter: words{}})
	res, err := d.ClosedWave(context.Background(), Target{Name: "s", BaseURL: srv.URL, Model: "m"},
		WaveSpec{Load: load, Kind: contract.KindRecorded, Concurrency: 6, Repeat: 1})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]int{"one two": 3, "three": 8, "four five six": 5}; len(asked) != 3 ||
		asked["one two"] != want["one two"] || asked["three"] != want["three"] || asked["four five six"] != want["four five six"] {
		t.Fatalf("bodies asked %v, want %v", asked, want)
	}
	wantMax, wantIn := []int{3, 8, 5}, []int{2, 1, 3}
	for i, r := range res.Records {
		if r.MaxTokens != wantMax[r.Prompt] || r.InputTokens == nil || *r.InputTokens != wantIn[r.Prompt] {
			t.Fatalf("record %d (prompt %d): max_tokens %d input_tokens %v", i, r.Prompt, r.MaxTokens, r.InputTokens)
		}
	}
	bad := load
	bad.PromptMaxTokens = []int{1}
	if _, err := d.ClosedWave(context.Background(), Target{Name: "s", BaseURL: srv.URL}, WaveSpec{Load: bad, Kind: contract.KindRecorded, Concurrency: 1}); err == nil {
		t.Fatal("misaligned prompt max_tokens accepted")
	}
}

// TestPromptMessages checks that a prompt with messages sends them whole
// and counts their contents as its input tokens.
func TestPromptMessages(t *testing.T) {
	var mu sync.Mutex
	var got [][]stream.Message
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var body struct {
			Messages []stream.Message `json:"messages"`
		}
		data, _ := io.ReadAll(r.Body)
		json.Unmarshal(data, &body)
		mu.Lock()
		got = append(got, body.Messages)
		mu.Unlock()
		rw.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(rw, `data: {"choices":[{"delta":{"content":"w "},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	conv := []stream.Message{{Role: "system", Content: "be very brief"}, {Role: "user", Content: "hi there"}}
	load := plan.Load{Prompts: []string{"hi there", "alone"}, MaxTokens: 4, Timeout: 10 * time.Second, Messages: [][]stream.Message{conv, nil}}
	load.InputTokens = CountInputs(load, words{})
	if load.InputTokens[0] != 5 || load.InputTokens[1] != 1 {
		t.Fatalf("input tokens %v, want [5 1]", load.InputTokens)
	}
	d := New(Options{Counter: words{}})
	res, err := d.ClosedWave(context.Background(), Target{Name: "s", BaseURL: srv.URL, Model: "m"},
		WaveSpec{Load: load, Kind: contract.KindRecorded, Concurrency: 2, Repeat: 1})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, ms := range got {
		seen[len(ms)] = true
		if len(ms) == 2 && (ms[0] != conv[0] || ms[1] != conv[1]) || len(ms) == 1 && ms[0] != (stream.Message{Role: "user", Content: "alone"}) {
			t.Errorf("messages sent %v", ms)
		}
	}
	if !seen[1] || !seen[2] {
		t.Errorf("bodies %v", got)
	}
	for _, r := range res.Records {
		if r.InputTokens == nil || *r.InputTokens != load.InputTokens[r.Prompt] {
			t.Errorf("record of prompt %d: input_tokens %v", r.Prompt, r.InputTokens)
		}
	}
}
