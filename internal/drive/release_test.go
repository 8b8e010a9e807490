package drive

import (
	"context"
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
