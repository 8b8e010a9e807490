package drive

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/plan"
	"github.com/rehearse/rehearse/internal/stream"
	"github.com/rehearse/rehearse/internal/workload"
)

// sessionServer answers request k (counted from 1) with the text
// "reply-k", or with status 500 where fail(messages) says so, and keeps
// every request's messages.
type sessionServer struct {
	mu     sync.Mutex
	n      int
	bodies [][]stream.Message
}

func newSessionServer(t *testing.T, fail func([]stream.Message) bool) (*httptest.Server, *sessionServer) {
	t.Helper()
	ss := &sessionServer{}
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		var body struct {
			Messages []stream.Message `json:"messages"`
		}
		if err := json.Unmarshal(data, &body); err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		ss.mu.Lock()
		ss.n++
		k := ss.n
		ss.bodies = append(ss.bodies, body.Messages)
		ss.mu.Unlock()
		if fail != nil && fail(body.Messages) {
			http.Error(rw, "no", http.StatusInternalServerError)
			return
		}
		rw.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(rw, `data: {"choices":[{"delta":{"content":"reply-%d"},"finish_reason":null}]}`+"\n\n", k)
		io.WriteString(rw, `data: {"choices":[{"delta":{},"finish_reason":"stop"}]}`+"\n\n")
		io.WriteString(rw, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv, ss
}

func sessionLoad() plan.Load {
	return plan.Load{
		Prompts:   []string{"first question", "second question", "third question", "other opening"},
		MaxTokens: 8, Timeout: 10 * time.Second,
		Sessions: []workload.Session{{Turns: []int{0, 1, 2}}, {Turns: []int{3}}},
	}
}

// TestSessionCarriesActualReply runs a closed wave of one client through a
// three-turn session: turn 2's body carries turn 1's user message and the
// server's actual reply text (not a dataset's), turn 3's the whole history;
// each record says its session and turn, starts after the turn before it
// ended, and counts every content it sent as input_tokens.
func TestSessionCarriesActualReply(t *testing.T) {
	srv, ss := newSessionServer(t, nil)
	l := sessionLoad()
	l.InputTokens = CountInputs(l, words{})
	d := New(Options{Counter: words{}})
	res, err := d.ClosedWave(context.Background(), Target{Name: "s", BaseURL: srv.URL, Model: "m"},
		WaveSpec{Load: l, Kind: contract.KindRecorded, Concurrency: 1, Repeat: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Records) != 3 {
		t.Fatalf("%d records, want 3 (one per turn)", len(res.Records))
	}
	want := [][]stream.Message{
		{{Role: "user", Content: "first question"}},
		{{Role: "user", Content: "first question"}, {Role: "assistant", Content: "reply-1"}, {Role: "user", Content: "second question"}},
		{{Role: "user", Content: "first question"}, {Role: "assistant", Content: "reply-1"}, {Role: "user", Content: "second question"},
			{Role: "assistant", Content: "reply-2"}, {Role: "user", Content: "third question"}},
	}
	if fmt.Sprint(ss.bodies) != fmt.Sprint(want) {
		t.Errorf("requests sent\n%v\nwant\n%v", ss.bodies, want)
	}
	inputs := []int{2, 5, 8} // words of every content sent
	for k, r := range res.Records {
		if !r.OK {
			t.Fatalf("turn %d: %s %s", k+1, r.ErrorKind, r.Error)
		}
		if r.Session == nil || *r.Session != 0 || r.Turn != k+1 || r.Prompt != k || r.Client != 0 {
			t.Errorf("record %d: session %v turn %d prompt %d client %d, want session 0 turn %d prompt %d client 0", k, r.Session, r.Turn, r.Prompt, r.Client, k+1, k)
		}
		if r.Text != fmt.Sprintf("reply-%d", k+1) {
			t.Errorf("turn %d text %q", k+1, r.Text)
		}
		if r.InputTokens == nil || *r.InputTokens != inputs[k] {
			t.Errorf("turn %d input_tokens %v, want %d", k+1, r.InputTokens, inputs[k])
		}
		if k > 0 && r.StartS < res.Records[k-1].EndS {
			t.Errorf("turn %d starts at %v, before turn %d ended at %v", k+1, r.StartS, k, res.Records[k-1].EndS)
		}
	}
	if res.Wave.NotSent != 0 {
		t.Errorf("not_sent %d", res.Wave.NotSent)
	}
}

// TestSessionFailedTurnEndsIt: a failed turn ends its session, the later
// turns are not sent and are counted as not_sent.
func TestSessionFailedTurnEndsIt(t *testing.T) {
	srv, ss := newSessionServer(t, func(ms []stream.Message) bool {
		return ms[len(ms)-1].Content == "second question"
	})
	d := New(Options{})
	res, err := d.ClosedWave(context.Background(), Target{Name: "s", BaseURL: srv.URL},
		WaveSpec{Load: sessionLoad(), Kind: contract.KindRecorded, Concurrency: 2, Repeat: 1})
	if err != nil {
		t.Fatal(err)
	}
	// Client 0: turns 1 (ok) and 2 (failed); client 1: session 1's turn.
	if len(res.Records) != 3 || len(ss.bodies) != 3 {
		t.Fatalf("%d records, %d requests; want 3 and 3", len(res.Records), len(ss.bodies))
	}
	r := res.Records[1]
	if r.OK || r.Turn != 2 || r.Client != 0 {
		t.Errorf("record 1: ok %v turn %d client %d, want turn 2 of client 0 failed", r.OK, r.Turn, r.Client)
	}
	if r := res.Records[2]; r.Client != 1 || r.Session == nil || *r.Session != 1 || r.Turn != 1 {
		t.Errorf("record 2: client %d session %v turn %d, want client 1's session 1 turn 1", r.Client, r.Session, r.Turn)
	}
	if res.Wave.NotSent != 1 {
		t.Errorf("not_sent %d, want 1 (turn 3 of session 0)", res.Wave.NotSent)
	}
}

// TestSessionSustainedAndOpen: a sustained wave counts a request per turn
// and runs sessions back to back; an open-loop wave starts a session per
// arrival and its turns follow.
func TestSessionSustainedAndOpen(t *testing.T) {
	srv, _ := newSessionServer(t, nil)
	d := New(Options{})
	tgt := Target{Name: "s", BaseURL: srv.URL}
	res, err := d.SustainedWave(context.Background(), tgt, SustainedSpec{Load: sessionLoad(), Concurrency: 1, Repeat: 1, NumRequests: 6})
	if err != nil {
		t.Fatal(err)
	}
	var turns []string
	for _, r := range res.Records {
		turns = append(turns, fmt.Sprintf("%d.%d", *r.Session, r.Turn))
	}
	// Sessions 0 (3 turns), 1 (1 turn), 0 again: cut at 6 requests.
	if got := strings.Join(turns, " "); got != "0.1 0.2 0.3 1.1 0.1 0.2" {
		t.Errorf("sustained turns %s, want 0.1 0.2 0.3 1.1 0.1 0.2", got)
	}

	l := sessionLoad()
	l.Think = workload.ThinkTime{Mean: time.Millisecond}
	res, err = d.OpenWave(context.Background(), tgt, OpenSpec{Load: l, Repeat: 1, RequestRateRPS: 1000, Arrival: workload.ArrivalFixed, NumRequests: 2})
	if err != nil {
		t.Fatal(err)
	}
	turns = nil
	for _, r := range res.Records {
		turns = append(turns, fmt.Sprintf("%d:%d.%d", r.Client, *r.Session, r.Turn))
	}
	if got := strings.Join(turns, " "); got != "0:0.1 0:0.2 0:0.3 1:1.1" {
		t.Errorf("open turns %s, want 0:0.1 0:0.2 0:0.3 1:1.1", got)
	}
	for k := 1; k < 3; k++ {
		prev, r := res.Records[k-1], res.Records[k]
		// Times are stored in float seconds: a nanosecond of rounding is
		// not a turn sent early.
		if r.IntendedStartS < prev.EndS+0.001-1e-6 || r.StartS < r.IntendedStartS-1e-6 {
			t.Errorf("turn %d intended %v start %v, turn before ended %v (think 1ms)", r.Turn, r.IntendedStartS, r.StartS, prev.EndS)
		}
	}
}
