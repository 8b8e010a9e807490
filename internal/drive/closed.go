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

// ClosedWave runs one closed-loop wave: all Concurrency requests are built,
// their connections opened and the requests buffered on them; one monotonic
// release instant then lets every request's bytes go, each in one write. The wave is journaled at
// release and at its end; each record as its request ends. When ctx is
// canceled, requests in flight end as canceled with what arrived kept, the
// wave is journaled as stopped, and the error says why; the WaveResult is
// complete either way.
func (d *Driver) ClosedWave(ctx context.Context, t Target, spec WaveSpec) (WaveResult, error) {
	if err := spec.Validate(); err != nil {
		return WaveResult{}, fmt.Errorf("%s: closed wave: %w", t.Name, err)
	}
	if spec.Concurrency <= 0 {
		return WaveResult{}, fmt.Errorf("%s: closed wave: concurrency %d: want at least 1", t.Name, spec.Concurrency)
	}
	switch spec.Kind {
	case contract.KindRecorded, contract.KindWarmup, contract.KindMechanismCheck:
	default:
		return WaveResult{}, fmt.Errorf("%s: closed wave: kind %q: want recorded, warmup or mechanism_check", t.Name, spec.Kind)
	}
	n := spec.Concurrency
	clients := spec.units(n)
	ss, prepared, total, err := d.sendables(t, spec.Load, n, clients)
	if err != nil {
		return WaveResult{}, fmt.Errorf("%s: %w", t.Name, err)
	}
	defer d.advance(t, prepared)
	if err := ctx.Err(); err != nil {
		return WaveResult{}, fmt.Errorf("%s: closed wave not released: %w", t.Name, context.Cause(ctx))
	}
	// A server that refuses connections is not an error of the wave: its
	// requests fail as connect and are recorded.
	if len(clients) > 0 {
		d.warm(ctx, t, len(clients))
	}
	defer d.client.Drop()
	if err := ctx.Err(); err != nil {
		return WaveResult{}, fmt.Errorf("%s: closed wave not released: %w", t.Name, context.Cause(ctx))
	}

	w := contract.Wave{
		ID: d.NextWaveID(), Server: t.Name, Concurrency: n, Repeat: spec.Repeat,
		Kind: spec.Kind, Mode: contract.ModeClosed, Cold: spec.Cold,
	}
	records := make([]contract.Record, len(clients))
	var (
		tl      tally
		armed   sync.WaitGroup
		ended   sync.WaitGroup
		barrier = stream.NewBarrier(len(clients))
		rel     = newRelease()
	)
	rel.load, rel.worker, rel.secrets = spec.Load, spec.worker(), t.Secrets
	armed.Add(len(clients))
	ended.Add(len(clients))
	// The sends' context: canceled, without the wave's, when the workers
	// do not agree on a release, so the buffered requests end unsent.
	sctx, unarm := context.WithCancel(ctx)
	defer unarm()
	for slot, i := range clients {
		go func() {
			defer ended.Done()
			if ss != nil {
				// Client i runs one whole session, its first turn
				// buffered now and let go with the others at the release.
				armedOnce := sync.OnceFunc(armed.Done)
				defer armedOnce()
				ss.run(sctx, i, func(tag turnTag, prompt int, p *stream.Prepared, intended time.Duration) (contract.Record, bool) {
					var res stream.Result
					if tag.turn == 1 {
						res = d.client.SendAt(sctx, p, barrier.Gate(slot), armedOnce)
					} else {
						res = d.client.Send(sctx, p)
					}
					return ss.settle(rel, i, prompt, intended, res, total, &tl, tag), true
				})
				return
			}
			// The request takes its connection and is buffered now; its
			// bytes leave when its group of the barrier opens.
			prompt := workload.PromptIndex(i, prepared.prompts())
			rep := prepared.pick(i)
			res := d.client.SendAt(sctx, prepared.get(rep, prompt), barrier.Gate(slot), armed.Done)
			prepared.done(rep)
			d.settle(rel, records, slot, i, prompt, 0, res, len(clients), &tl, rep)
		}()
	}
	armed.Wait()
	// A split plan's workers agree on the release now that every client
	// is buffered on its connection, let their clients go at that
	// instant, and time their records from it.
	release, err := spec.arm(ctx)
	if err != nil {
		unarm()
		rel.drop()
		ended.Wait()
		return WaveResult{}, fmt.Errorf("%s: closed wave %w", t.Name, err)
	}
	cpu0 := cpuTime()
	stalls := d.watchStalls()
	// The requests go a group at a time, the responses that came
	// meanwhile read between (stream.Barrier).
	go barrier.Open()
	spec.stampWave(&w, time.Now())
	w.StartedAt = anchor(release)
	if err := d.journalWave(w); err != nil {
		tl.mu.Lock()
		tl.journalErr = err
		tl.mu.Unlock()
	}
	d.released(w, release, total)
	// Requests are recorded from here on, after the wave's own line.
	rel.publish(w, release)
	ended.Wait()
	if ss != nil {
		records = ss.records()
		w.NotSent = total - len(records)
	}

	w.ClientCPUS = (cpuTime() - cpu0).Seconds()
	w.ClientStalls = stalls.end()
	w.WallS = contract.WaveWallS(records)
	w.ReleaseSpreadS = contract.WaveReleaseSpreadS(records)
	w.Stopped = stopped(ctx)
	d.count(w)
	if err := d.journalWave(w); err != nil && tl.journalErr == nil {
		tl.journalErr = err
	}
	d.progress(Event{Kind: WaveEnded, Wave: w, Done: tl.done, Failed: tl.failed, Total: total, Elapsed: time.Since(release)})
	return WaveResult{Wave: w, Release: release, Records: records}, waveError(ctx, w, tl.journalErr)
}
