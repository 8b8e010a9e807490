package bundle

import (
	"context"
	"slices"
	"sync"

	"github.com/rehearse/rehearse/internal/contract"
)

// segmentStream is the state of a streamed merge of segments
// (mergeSegments, its records streamed): every segment is read at once,
// one reader each, and each merged wave's records are gathered from the
// readers, joined (waveGroup.join: shifted, sorted) and handed on; only
// one merged wave's records are held at a time.
//
// It needs each segment's records in the order the merged waves take
// them (a wave's records together, the waves in plan order), which is
// how a rehearsal writes them; a segment whose records are not (or any
// other surprise: a record of another worker's share, a wave that does
// not join) makes the first pass report false, and the segments are then
// merged holding every record (MergeWith), which says what is wrong.
type segmentStream struct {
	ps     *PartSet
	names  []string
	order  []int
	groups []*waveGroup
}

// mergeSegmentsStreamed is mergeSegments of ps's parts, streamed: false
// (no error) where it must be merged held instead.
func (ps *PartSet) mergeSegmentsStreamed(ctx context.Context, names []string, o MergeOptions) (*MergedParts, bool, error) {
	parts := ps.Results
	order, err := checkSegments(parts, names, o)
	if err != nil {
		return nil, false, err // what mergeSegments says first
	}
	out := segmentsHeader(parts, order)
	groups, waveOf, err := groupSegmentWaves(parts, names, order) // records not held: only the waves
	if err != nil {
		return nil, false, nil
	}
	ids := map[*waveGroup]int{}
	for gi, g := range groups {
		ids[g] = gi + 1
		// The merged wave less what its records decide (the first pass).
		w, _, err := g.join(gi+1, parts, names, order)
		if err != nil {
			return nil, false, nil
		}
		out.Waves = append(out.Waves, w)
	}
	if err := segmentsTail(out, parts, names, order, waveOf, ids); err != nil {
		return nil, false, nil
	}
	m := &MergedParts{ps: ps, names: names, seg: &segmentStream{ps: ps, names: names, order: order, groups: groups}}
	r := newRecomputation(out)
	waves, n, ok, err := m.seg.pass(ctx, func(rec *contract.Record) error {
		r.add(rec)
		return nil
	})
	if err != nil || !ok {
		return nil, false, err
	}
	out.Waves = waves
	if err := m.finish(ctx, out, r); err != nil {
		return nil, false, err
	}
	m.Results = out
	m.Records = n
	return m, true, nil
}

// pass hands the merged records, wave after wave, to f, and returns the
// merged waves as their records make them and how many records it
// handed; false: the segments' records are not in the order the merged
// waves take them (or a record or wave is wrong), nothing more said.
// Every streamed segment's records must be those verified (their sums).
func (s *segmentStream) pass(ctx context.Context, f func(*contract.Record) error) ([]contract.Wave, int, bool, error) {
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	k := len(s.order)
	chs := make([]chan contract.Record, k)
	results := make([]*Results, k)
	errs := make([]error, k)
	var wg sync.WaitGroup
	for w, pi := range s.order {
		ch := make(chan contract.Record, 256)
		chs[w] = ch
		src := s.ps.srcs[pi]
		send := func(r contract.Record) {
			select {
			case ch <- r:
			case <-pctx.Done():
			}
		}
		wg.Go(func() {
			defer close(ch)
			if src.held {
				for _, r := range src.res.Records {
					send(r)
				}
				return
			}
			results[w], errs[w] = visitPart(pctx, src.dir, &recordVisitor{
				begin: func(*Results) bool { return true },
				record: func(_ int, rec *contract.Record, _ *recordWork) {
					send(retainRecord(rec))
				},
			})
		})
	}
	// stop ends the readers and waits for them.
	stop := func() {
		cancel()
		for _, ch := range chs {
			for range ch {
			}
		}
		wg.Wait()
	}
	heads := make([]*contract.Record, k)
	peek := func(w int) *contract.Record {
		if heads[w] == nil {
			if r, ok := <-chs[w]; ok {
				heads[w] = &r
			}
		}
		return heads[w]
	}
	parts := s.ps.Results
	var waves []contract.Wave
	n := 0
	for gi, g := range s.groups {
		for mi := range g.members {
			m := &g.members[mi]
			m.recs = nil
			for r := peek(m.worker); r != nil && r.Wave == m.wave.ID; r = peek(m.worker) {
				if r.Kind != contract.KindMechanismCheck && r.Client%k != m.worker {
					stop()
					return nil, n, false, nil
				}
				m.recs = append(m.recs, *r)
				heads[m.worker] = nil
			}
		}
		w, recs, err := g.join(gi+1, parts, s.names, s.order)
		for mi := range g.members {
			g.members[mi].recs = nil
		}
		if err != nil {
			stop()
			return nil, n, false, nil
		}
		waves = append(waves, w)
		for i := range recs {
			if err := f(&recs[i]); err != nil {
				stop()
				return nil, n, false, err
			}
			n++
		}
	}
	for w := range k {
		if peek(w) != nil {
			stop() // records the waves did not take
			return nil, n, false, nil
		}
	}
	stop()
	for w, pi := range s.order {
		src := s.ps.srcs[pi]
		switch {
		case src.held:
		case errs[w] != nil && IsInterrupted(ctx, errs[w]):
			return nil, n, false, errs[w]
		case errs[w] != nil:
			return nil, n, false, changedError(src.dir, errs[w])
		case !slices.Equal(results[w].recordSums, src.sums):
			return nil, n, false, changedError(src.dir, nil)
		}
	}
	return waves, n, true, nil
}

// retainRecord is a copy of a record a visitor is handed, to keep after
// the visitor returns, as decodeRecords keeps the records it holds (a
// decoded record's values are its own: the batches are cleared before
// each decode); its chunk times are copied all the same, the one list a
// faster decoder might be tempted to reuse.
func retainRecord(rec *contract.Record) contract.Record {
	r := *rec
	r.ChunkTimesS = slices.Clone(rec.ChunkTimesS)
	return r
}
