package rehearsal_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/tokenizer"
)

// TestSessionsExampleRuns runs examples/sessions.yaml against rehearse sim
// (one repeat, time scale 200): every client goes through whole sessions,
// each turn carries the history (its input_tokens, re-counted here from the
// user turns and the actual replies of the turns before it), every
// session's turns are in order, and the bundle verifies (runExample).
func TestSessionsExampleRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two simulated servers")
	}
	tok, err := tokenizer.Embedded("qwen2.5")
	if err != nil {
		t.Fatal(err)
	}
	res := runExample(t, "sessions.yaml", `"--time-scale", "50"`, `"--time-scale", "200"`, "repeats: 2", "repeats: 1", "timeout: 1.2s", "timeout: 2s")
	wl := res.Workload
	if len(wl.Sessions) != 8 || len(wl.Prompts) != 24 || wl.ThinkTime == nil || wl.ThinkTime.Distribution != "exponential" {
		t.Fatalf("workload: %d sessions, %d prompts, think time %+v", len(wl.Sessions), len(wl.Prompts), wl.ThinkTime)
	}
	waves := map[int]contract.Wave{}
	for _, w := range res.Waves {
		waves[w.ID] = w
	}
	type run struct{ wave, client int }
	history := map[run]int{} // tokens sent so far by each client's session
	turns := map[run][]string{}
	for i, r := range res.Records {
		if r.Session == nil || r.Turn < 1 {
			t.Fatalf("record %d has no session and turn", i)
		}
		if !r.OK {
			t.Fatalf("record %d failed: %s %s", i, r.ErrorKind, r.Error)
		}
		k := run{r.Wave, r.Client}
		if r.Turn == 1 {
			history[k] = 0
		}
		history[k] += tok.Count(wl.Prompts[r.Prompt])
		if r.InputTokens == nil || *r.InputTokens != history[k] {
			t.Fatalf("record %d (turn %d): input_tokens %v, its history counts %d", i, r.Turn, r.InputTokens, history[k])
		}
		if r.MaxTokens != 32 || r.Prompt != wl.Sessions[*r.Session].Turns[r.Turn-1] {
			t.Fatalf("record %d: max_tokens %d, prompt %d for turn %d of session %d", i, r.MaxTokens, r.Prompt, r.Turn, *r.Session)
		}
		history[k] += tok.Count(r.Text)
		turns[k] = append(turns[k], fmt.Sprint(r.Turn))
	}
	for k, ts := range turns {
		if strings.Join(ts, " ") != "1 2 3" {
			t.Errorf("wave %d (%s) client %d: turns %v, want one whole session 1 2 3", k.wave, waves[k.wave].Mode, k.client, ts)
		}
	}
	// Closed waves at 1 and 4 clients and the open-loop wave of 8 arrivals,
	// per server: each session 3 turns.
	if want := 2 * (1 + 4 + 8) * 3; len(res.Records) != want {
		t.Errorf("%d records, want %d", len(res.Records), want)
	}
}
