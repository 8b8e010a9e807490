package drive

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/stream"
	"github.com/rehearse/rehearse/internal/workload"
)

// TestOpenWaveAgainstIdleClosingServer: a server that closes connections
// that sent nothing for 250 ms (as uvicorn and proxies close idle ones)
// must cost an open-loop wave spread over 2 s no request: the connections
// warmed ahead of the wave are stale by the time most requests go, and a
// failure the load generator caused is never the server's. The server's
// timeout falls between two sends (every 100 ms), never on one: a server
// that closes a connection at the very instant a request reaches it cannot
// tell the client whether it read the request, and a resend would then be
// a guess (the client resends only what provably never reached it).
func TestOpenWaveAgainstIdleClosingServer(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		rw.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(rw, `data: {"choices":[{"delta":{"content":"w "},"finish_reason":null}]}`+"\n\n")
		http.NewResponseController(rw).Flush()
		// Streams overlap, so later requests need connections of their own
		// instead of the one the last request left.
		select {
		case <-time.After(300 * time.Millisecond):
		case <-r.Context().Done():
			return
		}
		io.WriteString(rw, `data: {"choices":[{"delta":{},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
	}))
	srv.Config.ReadHeaderTimeout = 250 * time.Millisecond
	srv.Config.IdleTimeout = 250 * time.Millisecond
	srv.Start()
	defer srv.Close()

	d := New(Options{Counter: words{}})
	spec := OpenSpec{Load: testLoad(), Repeat: 1, RequestRateRPS: 10, Arrival: workload.ArrivalFixed, NumRequests: 20}
	res, err := d.OpenWave(context.Background(), Target{Name: "s", BaseURL: srv.URL}, spec)
	if err != nil {
		t.Fatal(err)
	}
	failed, resent := 0, 0
	for _, r := range res.Records {
		if r.Retried != "" {
			resent++
		}
		if !r.OK {
			failed++
			t.Errorf("request %d at %.3f s: %s: %s", r.Client, r.IntendedStartS, r.ErrorKind, r.Error)
		}
	}
	t.Logf("%d of %d requests were sent again on a fresh connection", resent, len(res.Records))
	if failed > 0 || len(res.Records) != 20 {
		t.Fatalf("%d of %d requests failed against a fault-free server", failed, len(res.Records))
	}
}

// A request the client sent a second time keeps why in its record.
func TestRecordKeepsWhyARequestWasResent(t *testing.T) {
	d := New(Options{})
	now := time.Now()
	r := d.record(contract.Wave{ID: 1}, now, 0, 0, 0, stream.Result{Start: now, End: now, Retried: "stale connection"})
	if r.Retried != "stale connection" {
		t.Fatalf("retried %q", r.Retried)
	}
}
