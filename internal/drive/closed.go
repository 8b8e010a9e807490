package drive

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/plan"
	"github.com/rehearse/rehearse/internal/stream"
	"github.com/rehearse/rehearse/internal/workload"
)

// WaveSpec is one closed-loop wave.
type WaveSpec struct {
	plan.Load
	// Kind is contract.KindRecorded, KindWarmup or KindMechanismCheck.
	Kind        string
	Concurrency int
	Repeat      int
	// Cold flags the first recorded wave of a series that had no warm-up.
	Cold bool
	// Share, on a split plan, runs this worker's clients only (client j
	// of Concurrency for j mod N = i), released at the agreed instant.
	Share
}

func (s WaveSpec) check() error {
	if err := s.Validate(); err != nil {
		return err
	}
	if s.Concurrency <= 0 {
		return fmt.Errorf("concurrency %d: want at least 1", s.Concurrency)
	}
	switch s.Kind {
	case contract.KindRecorded, contract.KindWarmup, contract.KindMechanismCheck:
	default:
		return fmt.Errorf("kind %q: want recorded, warmup or mechanism_check", s.Kind)
	}
	return nil
}

// ClosedWave runs one closed-loop wave: all Concurrency requests are built,
// their connections opened and the requests buffered on them; one monotonic
// release instant then lets every request's bytes go, each in one write. The wave is journaled at
// release and at its end; each record as its request ends. When ctx is
// canceled, requests in flight end as canceled with what arrived kept, the
// wave is journaled as stopped, and the error says why; the WaveResult is
// complete either way.
func (d *Driver) ClosedWave(ctx context.Context, t Target, spec WaveSpec) (WaveResult, error) {
	if err := spec.check(); err != nil {
		return WaveResult{}, fmt.Errorf("%s: closed wave: %w", t.Name, err)
	}
	n := spec.Concurrency
	clients := spec.units(n)
	s, err := d.newSends(t, "closed", spec.Load, n, clients)
	if err != nil {
		return WaveResult{}, err
	}
	defer s.close()
	if err := s.dial(ctx, len(clients)); err != nil {
		return WaveResult{}, err
	}

	run := d.newWaveRun(t, spec.Share, spec.Load, contract.Wave{
		ID: d.NextWaveID(), Server: t.Name, Concurrency: n, Repeat: spec.Repeat,
		Kind: spec.Kind, Mode: contract.ModeClosed, Cold: spec.Cold,
	}, s.total)
	records := make([]contract.Record, len(clients))
	var (
		armed   sync.WaitGroup
		ended   sync.WaitGroup
		barrier = stream.NewBarrier(len(clients))
	)
	armed.Add(len(clients))
	ended.Add(len(clients))
	// The sends' context: canceled, without the wave's, when the workers
	// do not agree on a release, so the buffered requests end unsent.
	sctx, unarm := context.WithCancel(ctx)
	defer unarm()
	for slot, i := range clients {
		go func() {
			defer ended.Done()
			d.closedClient(sctx, s, run, records, barrier.Gate(slot), armed.Done, slot, i)
		}()
	}
	armed.Wait()
	// A split plan's workers agree on the release now that every client
	// is buffered on its connection, let their clients go at that
	// instant, and time their records from it.
	release, err := s.arm(ctx, &spec.Share)
	if err != nil {
		unarm()
		run.rel.drop()
		ended.Wait()
		return WaveResult{}, err
	}
	run.watch()
	// The requests go a group at a time, the responses that came
	// meanwhile read between (stream.Barrier).
	go barrier.Open()
	spec.stampWave(&run.w, time.Now())
	// Requests are recorded from here on, after the wave's own line.
	run.publish(release)
	ended.Wait()
	w := run.w
	if s.ss != nil {
		records = s.ss.records()
		w.NotSent = s.total - len(records)
	}
	run.stampEnd(ctx, &w, records)
	w.ReleaseSpreadS = contract.WaveReleaseSpreadS(records)
	return run.finish(ctx, w, records)
}

// closedClient is client i of a closed wave, at slot among this share's:
// its request takes its connection and is buffered now (armed then says
// so), its bytes leave when gate opens; with sessions, it runs one whole
// session, its first turn so buffered.
func (d *Driver) closedClient(ctx context.Context, s *waveSends, run *waveRun, records []contract.Record, gate <-chan struct{}, armed func(), slot, i int) {
	if ss := s.ss; ss != nil {
		armedOnce := sync.OnceFunc(armed)
		defer armedOnce()
		ss.run(ctx, i, func(tag turnTag, prompt int, p *stream.Prepared, intended time.Duration) (contract.Record, bool) {
			var res stream.Result
			if tag.turn == 1 {
				res = d.client.SendAt(ctx, p, gate, armedOnce)
			} else {
				res = d.client.Send(ctx, p)
			}
			return ss.settle(run.rel, i, prompt, intended, res, s.total, &run.tl, tag), true
		})
		return
	}
	prepared := s.prepared
	prompt := workload.PromptIndex(i, prepared.prompts())
	rep := prepared.pick(i)
	res := d.client.SendAt(ctx, prepared.get(rep, prompt), gate, armed)
	prepared.done(rep)
	d.settle(run.rel, records, slot, i, prompt, 0, res, len(records), &run.tl, rep)
}
