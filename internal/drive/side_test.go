package drive

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/plan"
)

// loggedBody is what loggingServer saw of one request.
type loggedBody struct {
	Model     string `json:"model"`
	Prompt    string `json:"prompt"`
	MaxTokens int    `json:"max_tokens"`
	at        time.Time
}

// loggingServer answers completions: a request of max_tokens 1 at once
// with one chunk, any other with 4 chunks `gap` apart; it logs every body.
func loggingServer(t *testing.T, gap time.Duration) (*httptest.Server, func() []loggedBody) {
	t.Helper()
	var mu sync.Mutex
	var log []loggedBody
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b loggedBody
		json.NewDecoder(r.Body).Decode(&b)
		b.at = time.Now()
		mu.Lock()
		log = append(log, b)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		n := 4
		if b.MaxTokens == 1 {
			n = 1
		}
		for i := range n {
			if i > 0 {
				time.Sleep(gap)
			}
			io.WriteString(w, `data: {"choices":[{"text":"w "}]}`+"\n\n")
			rc.Flush()
		}
		io.WriteString(w, `data: {"choices":[{"text":"","finish_reason":"length"}]}`+"\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv, func() []loggedBody {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(log)
	}
}

// Side probes run beside a recorded wave, through the wave's driver: from
// its release, one at a time, the next the interval after the last ended,
// to the server's model with the probe prompt, until the wave's requests
// have ended; their records are a wave of kind side_probe beside it. The
// wave's own requests ask for their prompts' models (LoRA adapters).
func TestSideProbesBesideAWave(t *testing.T) {
	srv, logged := loggingServer(t, 60*time.Millisecond)
	j, path := journal(t)
	d := New(Options{Sink: j, Counter: words{}})
	load := plan.Load{Prompts: []string{"a", "b", "c"}, MaxTokens: 4, Timeout: 10 * time.Second, Models: []string{"x", "y", "x"}}
	sp := plan.SideProbes{RateRPS: 50, Prompt: "Hi", MaxTokens: 1}
	target := Target{Name: "s", BaseURL: srv.URL, Endpoint: "/v1/completions", Model: "base"}
	res, err := d.Wave(context.Background(), target, load, plan.Wave{Kind: contract.KindRecorded, Mode: contract.ModeClosed, Concurrency: 3, Repeat: 1, SideProbes: &sp})
	if err != nil {
		t.Fatal(err)
	}
	side := res.SideProbes
	if side == nil {
		t.Fatal("no side probes")
	}
	w := side.Wave
	if w.Kind != contract.KindSideProbe || w.Beside != res.Wave.ID || w.ID == res.Wave.ID || w.Mode != contract.ModeOpen || w.RequestRateRPS != 50 || w.StartedAt != res.Wave.StartedAt {
		t.Errorf("side wave %+v beside %+v", w, res.Wave)
	}
	// The wave lasts about 180 ms; a probe takes little, then 20 ms pass.
	if n := len(side.Records); n < 2 || float64(n) > res.Wave.WallS/0.020+2 {
		t.Errorf("%d probes in a wave of %.3f s at 50 req/s (one at a time, 20 ms after the last)", n, res.Wave.WallS)
	}
	for k, r := range side.Records {
		if r.Kind != contract.KindSideProbe || r.Wave != w.ID || r.Client != k || r.Prompt != -1 || r.MaxTokens != 1 || r.Model != "" || !r.OK {
			t.Errorf("probe %d: %+v", k, r)
		}
		if k == 0 && r.IntendedStartS != 0 {
			t.Errorf("the first probe was due at %v, not at the release", r.IntendedStartS)
		}
		if k > 0 {
			// Due the interval after the last ended, give or take the
			// moment it took to record it.
			if gap := r.IntendedStartS - side.Records[k-1].EndS; gap < 0.020-1e-6 || gap > 0.080 {
				t.Errorf("probe %d was due %.4f s after probe %d ended, want 0.020", k, gap, k-1)
			}
			if r.StartS < r.IntendedStartS {
				t.Errorf("probe %d went at %v, before it was due at %v", k, r.StartS, r.IntendedStartS)
			}
		}
		if r.StartS > res.Wave.WallS+0.05 {
			t.Errorf("probe %d went at %.3f s, after the wave's requests had ended (%.3f s)", k, r.StartS, res.Wave.WallS)
		}
	}
	var probes, main []string
	for _, b := range logged() {
		if b.MaxTokens == 1 {
			probes = append(probes, b.Model+":"+b.Prompt)
		} else {
			main = append(main, b.Model+":"+b.Prompt)
		}
	}
	slices.Sort(main)
	if !slices.Equal(main, []string{"x:a", "x:c", "y:b"}) {
		t.Errorf("the wave's requests asked for %q: want each prompt's model", main)
	}
	for _, p := range probes {
		if p != "base:Hi" {
			t.Errorf("a probe asked %q, want the server's model and the probe prompt", p)
		}
	}
	for _, r := range res.Records {
		if want := load.Models[r.Prompt]; r.Model != want {
			t.Errorf("record of prompt %d keeps model %q, want %q", r.Prompt, r.Model, want)
		}
	}
	j.Close()
	back, err := bundle.ReadJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Waves) != 2 || back.Waves[1].Kind != contract.KindSideProbe || len(back.Records) != 3+len(side.Records) {
		t.Errorf("journal: waves %+v, %d records", back.Waves, len(back.Records))
	}
}

// A warm-up wave sends neither side probes nor the prompts' models (vLLM's
// warm-ups ask for the base model).
func TestNoSideProbesBesideAWarmup(t *testing.T) {
	srv, logged := loggingServer(t, time.Millisecond)
	d := New(Options{Counter: words{}})
	load := plan.Load{Prompts: []string{"a", "b"}, MaxTokens: 4, Timeout: 10 * time.Second, Models: []string{"x", "y"}}
	sp := plan.SideProbes{RateRPS: 50, Prompt: "Hi", MaxTokens: 1}
	res, err := d.Wave(context.Background(), Target{Name: "s", BaseURL: srv.URL, Endpoint: "/v1/completions", Model: "base"}, load,
		plan.Wave{Kind: contract.KindWarmup, Mode: contract.ModeClosed, Concurrency: 2, Repeat: 1, SideProbes: &sp})
	if err != nil || res.SideProbes != nil {
		t.Fatalf("%v, side probes %+v", err, res.SideProbes)
	}
	for _, b := range logged() {
		if b.Model != "base" || b.MaxTokens == 1 {
			t.Errorf("a warm-up sent %+v", b)
		}
	}
	for _, r := range res.Records {
		if r.Model != "" {
			t.Errorf("a warm-up record keeps model %q", r.Model)
		}
	}
}
