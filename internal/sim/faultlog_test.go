package sim

import (
	"bytes"
	"context"
	"errors"
	"log"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/sim/engine"
)

// hangUpWriter is a client that reads the stream until the malformed
// chunk, then hangs up, as the stream client does: later writes fail and
// the request's context ends.
type hangUpWriter struct {
	*memWriter
	cancel context.CancelFunc
	gone   bool
}

func (h *hangUpWriter) Write(b []byte) (int, error) {
	if h.gone {
		return 0, errors.New("write: broken pipe")
	}
	h.memWriter.Write(b)
	if bytes.Contains(b, []byte(`{"content":" the`+"\n\n")) {
		h.gone = true
		h.cancel()
	}
	return len(b), nil
}

// The log line of a malformed stream names the fault, also when the
// client hung up on it, as it should, before the stream ended (issue 28,
// row 13: it said "client went away").
func TestMalformedFaultLogsTheFaultWhenTheClientHangsUp(t *testing.T) {
	const seed, tokens = 2, 1000
	faults := []Fault{{Kind: FaultMalformed, Rate: 1}}
	if at := planFault(faults, seed, 1, tokens).atToken; at > tokens/4 {
		t.Fatalf("seed %d puts the fault at token %d; pick a seed that leaves the stream going after it", seed, at)
	}
	var logged bytes.Buffer
	s, err := New(Options{Engine: engine.Batching, TimeScale: 10, Seed: seed, Faults: faults, Log: log.New(&logged, "", 0)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := httptest.NewRequestWithContext(ctx, "POST", "/v1/chat/completions", strings.NewReader(chatBody("x", tokens, `,"ignore_eos":true`)))
	w := &hangUpWriter{memWriter: newMemWriter(s.clk), cancel: cancel}
	s.handle(w, r, false)
	line := logged.String()
	if !w.gone {
		t.Fatalf("the malformed chunk never came: %s", line)
	}
	if !strings.Contains(line, "(fault malformed: sent a chunk of invalid JSON mid-stream; the client then hung up)") {
		t.Errorf("log line %q does not name the fault and the hang-up", line)
	}
}

// The overrun fault streams OverrunTimes × max_tokens, also for a request
// the engine stops early (not ignore_eos), so the client's 4× cut applies.
func TestOverrunFaultStreamsPastMaxTokens(t *testing.T) {
	_, ts := newTestServer(t, Options{Engine: engine.Batching, Faults: []Fault{{Kind: FaultOverrun, Rate: 1}}})
	res, err := post(t, context.Background(), ts.URL, chatBody("hi", 30, ""))
	if err != nil || !res.done || len(res.contents) != OverrunTimes*30 {
		t.Fatalf("err %v, %d content chunks, done %v; want %d and [DONE]", err, len(res.contents), res.done, OverrunTimes*30)
	}
}
