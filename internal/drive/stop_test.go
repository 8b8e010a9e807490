package drive

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/search"
)

// queueServer answers its requests at once, but for the second batch of
// `held` to arrive (arrivals held..2·held-1), which it holds for `hold`
// before their first token: the requests that queued behind a batch limit.
// Those that did not queue end first, all good.
func queueServer(t *testing.T, held int, hold time.Duration) *httptest.Server {
	t.Helper()
	var arrivals atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if k := int(arrivals.Add(1)) - 1; k >= held && k < 2*held {
			select {
			case <-time.After(hold):
			case <-r.Context().Done():
				return
			}
		}
		rw.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(rw, `data: {"choices":[{"delta":{"content":"w w "},"finish_reason":"length"}]}`+"\n\n")
		fmt.Fprintf(rw, `data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2}}`+"\n\n")
		io.WriteString(rw, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestProbeStopJudgesEverythingSent runs a capacity probe's stop rule
// (search.StopRule) on a sustained wave of 20 clients against a server
// whose first 10 requests answer at once and whose next 10 queue past the
// TTFT objective. The first 10 to end are all good: a rule that judged
// them alone stopped there ("10 of 10 good" passes α = 0.6), and the 10
// in flight then landed bad, leaving the verdict over the wave unresolved
// (at most 30 of 40 good) far below its cap. Counting the requests in
// flight as pending, the probe stops only when the verdict over
// everything sent is resolved, it is the verdict it stopped on, and no
// request was sent after the look.
func TestProbeStopJudgesEverythingSent(t *testing.T) {
	const c, minN, limit = 20, 10, 1000
	srv := queueServer(t, c/2, 700*time.Millisecond)
	var o contract.Objectives
	if err := o.Set("ttft", 500); err != nil {
		t.Fatal(err)
	}
	slo := contract.SLO{Objectives: o, AttainmentTarget: 0.6}
	d := New(Options{Counter: words{}})
	res, err := d.SustainedWave(context.Background(), Target{Name: "s", BaseURL: srv.URL, Model: "m"},
		SustainedSpec{Load: testLoad(), Concurrency: c, Repeat: 1, NumRequests: limit,
			Until: search.StopRule(slo, minN), UntilEvery: minN, Probe: search.ProbeSearch})
	if err != nil {
		t.Fatal(err)
	}
	a := contract.Attain(res.Records, o)
	verdict := a.Verdict(slo.AttainmentTarget, minN)
	if verdict != search.VerdictPass || len(res.Records) >= limit {
		t.Errorf("the probe stopped at %d of %d requests with %d good: verdict %s, want a pass below the cap (the requests in flight at the stop decide it)",
			len(res.Records), limit, a.Good, verdict)
	}
	w := res.Wave
	if !res.UntilMet || w.EndedBy != contract.EndedUntil || w.Look == nil {
		t.Fatalf("until met %v, ended by %q, look %+v: want the wave ended by its stop rule", res.UntilMet, w.EndedBy, w.Look)
	}
	if w.Look.Sent != len(res.Records) || !search.Look(w.Look.Ended, minN) || w.Look.Ended > w.Look.Sent {
		t.Errorf("look %+v over %d records: want every request sent before the look, at a look point", *w.Look, len(res.Records))
	}
	slow := 0
	for _, r := range res.Records {
		if !contract.Judge(r, o).Good {
			slow++
		}
	}
	if slow != c/2 {
		t.Errorf("%d records missed the objective, want the %d that queued", slow, c/2)
	}
}
