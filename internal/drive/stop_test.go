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

// queueServer answers its requests after `fast`, but for the second batch
// of `held` to arrive (arrivals held..2·held-1), which it holds for `hold`
// before their first token: the requests that queued behind a batch limit.
// Those that did not queue end first, all good.
func queueServer(t *testing.T, held int, fast, hold time.Duration) *httptest.Server {
	t.Helper()
	var arrivals atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		wait := fast
		if k := int(arrivals.Add(1)) - 1; k >= held && k < 2*held {
			wait = hold
		}
		select {
		case <-time.After(wait):
		case <-r.Context().Done():
			return
		}
		rw.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(rw, `data: {"choices":[{"delta":{"content":"w w "},"finish_reason":"length"}]}`+"\n\n")
		fmt.Fprintf(rw, `data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2}}`+"\n\n")
		io.WriteString(rw, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestProbeStopJudgesItsPrefix runs a capacity probe's stop rule
// (search.StopRule) on a sustained wave of 20 clients against a server
// whose first 10 requests answer at once and whose next 10 queue past the
// TTFT objective. A look at k is taken once the first k requests sent have
// all ended, judges those k, and the probe's verdict is theirs: the
// requests in flight at the stop land, recorded but outside the verdict
// (search.Population), so the verdict is the one the probe stopped on, on
// a population that does not depend on which requests ended first. The
// stop is at the first look point whose prefix resolves, and no request
// was sent after the look.
func TestProbeStopJudgesItsPrefix(t *testing.T) {
	const c, minN, limit = 20, 10, 1000
	srv := queueServer(t, c/2, 20*time.Millisecond, 700*time.Millisecond)
	var o contract.Objectives
	if err := o.Set("ttft", 500); err != nil {
		t.Fatal(err)
	}
	slo := contract.SLO{Objectives: o, AttainmentTarget: 0.5}
	d := New(Options{Counter: words{}})
	res, err := d.SustainedWave(context.Background(), Target{Name: "s", BaseURL: srv.URL, Model: "m"},
		SustainedSpec{Load: testLoad(), Concurrency: c, Repeat: 1, NumRequests: limit,
			Until: search.StopRule(slo, minN, c), UntilEvery: search.LookUnit(minN, c), Probe: search.ProbeSearch})
	if err != nil {
		t.Fatal(err)
	}
	w := res.Wave
	if !res.UntilMet || w.EndedBy != contract.EndedUntil || w.Look == nil {
		t.Fatalf("until met %v, ended by %q, look %+v: want the wave ended by its stop rule", res.UntilMet, w.EndedBy, w.Look)
	}
	k := w.Look.Prefix
	if w.Look.Sent != len(res.Records) || !search.Look(k, search.LookUnit(minN, c)) || k > w.Look.Ended || len(res.Records) >= limit {
		t.Fatalf("look %+v over %d records: want the first k sent judged at a look point, every request sent before the look, below the cap", *w.Look, len(res.Records))
	}
	for j, r := range res.Records {
		if r.Request == nil || *r.Request != j {
			t.Fatalf("record %d has request %v: want the records in send order", j, r.Request)
		}
	}
	for m := search.LookUnit(minN, c); m < k; m *= 2 {
		if v := contract.Attain(res.Records[:m], o).Verdict(slo.AttainmentTarget, minN); v != search.VerdictUnresolved {
			t.Errorf("the first %d sent were %s already, yet the probe looked on to %d", m, v, k)
		}
	}
	prefix := contract.Attain(res.Records[:k], o).Verdict(slo.AttainmentTarget, minN)
	got := search.Measure(w.ID, res.Records, slo, minN)
	if prefix == search.VerdictUnresolved || got.Verdict != prefix || got.N != k || got.AfterVerdict != len(res.Records)-k {
		t.Errorf("probe: %s over n %d with %d after its verdict; the first %d sent: %s: want the prefix's verdict, over it",
			got.Verdict, got.N, got.AfterVerdict, k, prefix)
	}
	t.Logf("stopped at the first %d sent (%s, %d good), %d measured after the verdict", k, got.Verdict, got.Good, got.AfterVerdict)
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
