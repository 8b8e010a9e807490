package drive

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/stream"
)

// earlySender fails every request before its release: it reports itself
// armed and returns at once, as a request refused while connecting does.
type earlySender struct{}

func (earlySender) Warm(context.Context, string, int) error { return nil }
func (earlySender) Drop()                                   {}
func (earlySender) Send(context.Context, *stream.Prepared) stream.Result {
	now := time.Now()
	return stream.Result{Start: now, End: now, ErrorKind: contract.ErrConnect, Error: "refused"}
}
func (s earlySender) SendAt(ctx context.Context, p *stream.Prepared, _ <-chan struct{}, armed func()) stream.Result {
	res := s.Send(ctx, p)
	if armed != nil {
		armed()
	}
	return res
}

// A request that ends before its wave is released is recorded at the
// release (start_s = end_s = 0), never before it, and its record is built
// only once the release is known (run with -race).
func TestClosedWaveRequestEndedBeforeRelease(t *testing.T) {
	var events []Event
	d := New(Options{Progress: func(e Event) { events = append(events, e) }})
	d.client = earlySender{}
	res, err := d.ClosedWave(context.Background(), tgt, WaveSpec{Load: testLoad(), Kind: contract.KindRecorded, Concurrency: 8, Repeat: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Wave.WallS != 0 || res.Wave.ReleaseSpreadS != 0 || res.Wave.StartedAt == "" {
		t.Fatalf("wave %+v", res.Wave)
	}
	for i, r := range res.Records {
		if r.StartS != 0 || r.EndS != 0 || r.ErrorKind != contract.ErrConnect || r.Wave != res.Wave.ID {
			t.Fatalf("record %d: %+v", i, r)
		}
	}
	if len(events) != 10 || events[0].Kind != WaveReleased || events[9].Kind != WaveEnded {
		t.Fatalf("%d events, first %v", len(events), events[0].Kind)
	}
}

// countingSender answers at once and notes which prepared request each
// send used.
type countingSender struct {
	earlySender
	mu   sync.Mutex
	body map[*stream.Prepared]string
}

func (s *countingSender) SendAt(ctx context.Context, p *stream.Prepared, release <-chan struct{}, armed func()) stream.Result {
	s.mu.Lock()
	if s.body == nil {
		s.body = map[*stream.Prepared]string{}
	}
	s.body[p] = string(p.Body())
	s.mu.Unlock()
	return s.earlySender.SendAt(ctx, p, release, armed)
}

// Both waves build one request per prompt, and request i sends prompt
// i mod the number of prompts, as its record says.
func TestWavesPrepareOneRequestPerPrompt(t *testing.T) {
	check := func(name string, s *countingSender, records []contract.Record) {
		t.Helper()
		if len(s.body) != 3 {
			t.Errorf("%s: %d requests built for 3 prompts", name, len(s.body))
		}
		for i, r := range records {
			if r.Prompt != i%3 {
				t.Errorf("%s: request %d sent prompt %d", name, i, r.Prompt)
			}
		}
	}
	s := &countingSender{}
	d := New(Options{})
	d.client = s
	res, err := d.ClosedWave(context.Background(), tgt, WaveSpec{Load: testLoad(), Kind: contract.KindRecorded, Concurrency: 8, Repeat: 1})
	if err != nil {
		t.Fatal(err)
	}
	check("closed", s, res.Records)
	s = &countingSender{}
	d.client = s
	res, err = d.OpenWave(context.Background(), tgt, OpenSpec{Load: testLoad(), RequestRateRPS: 1e6, Arrival: "fixed", NumRequests: 8})
	if err != nil {
		t.Fatal(err)
	}
	check("open", s, res.Records)
}
