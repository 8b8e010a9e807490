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
	rd := s.read(ctx)
	defer rd.cancel()
	var waves []contract.Wave
	n := 0
	for gi, g := range s.groups {
		if !rd.gather(g) {
			rd.stop()
			return nil, n, false, nil
		}
		w, recs, err := g.join(gi+1, s.ps.Results, s.names, s.order)
		for mi := range g.members {
			g.members[mi].recs = nil
		}
		if err != nil {
			rd.stop()
			return nil, n, false, nil
		}
		waves = append(waves, w)
		for i := range recs {
			if err := f(&recs[i]); err != nil {
				rd.stop()
				return nil, n, false, err
			}
			n++
		}
	}
	for w := range rd.chs {
		if rd.peek(w) != nil {
			rd.stop() // records the waves did not take
			return nil, n, false, nil
		}
	}
	rd.stop()
	if err := s.checkReads(ctx, rd); err != nil {
		return nil, n, false, err
	}
	return waves, n, true, nil
}

// segmentReaders are pass's readers, one a segment (in s.order): each
// sends its segment's records on its channel, the next not yet taken
// held in heads, and leaves what its read returned in results and errs.
type segmentReaders struct {
	chs     []chan contract.Record
	heads   []*contract.Record
	results []*Results
	errs    []error
	wg      sync.WaitGroup
	cancel  context.CancelFunc
}

// read starts a reader for each segment, in s.order: a held segment's
// records are sent as held, a streamed one's as visitPart decodes them
// (copies, retainRecord). They stop when ctx ends or the readers are
// cancelled.
func (s *segmentStream) read(ctx context.Context) *segmentReaders {
	pctx, cancel := context.WithCancel(ctx)
	k := len(s.order)
	rd := &segmentReaders{
		chs:     make([]chan contract.Record, k),
		heads:   make([]*contract.Record, k),
		results: make([]*Results, k),
		errs:    make([]error, k),
		cancel:  cancel,
	}
	for w, pi := range s.order {
		ch := make(chan contract.Record, 256)
		rd.chs[w] = ch
		src := s.ps.srcs[pi]
		send := func(r contract.Record) {
			select {
			case ch <- r:
			case <-pctx.Done():
			}
		}
		rd.wg.Go(func() {
			defer close(ch)
			if src.held {
				for _, r := range src.res.Records {
					send(r)
				}
				return
			}
			rd.results[w], rd.errs[w] = visitPart(pctx, src.dir, &recordVisitor{
				begin: func(*Results) bool { return true },
				record: func(_ int, rec *contract.Record, _ *recordWork) {
					send(retainRecord(rec))
				},
			})
		})
	}
	return rd
}

// stop ends the readers and waits for them.
func (rd *segmentReaders) stop() {
	rd.cancel()
	for _, ch := range rd.chs {
		for range ch {
		}
	}
	rd.wg.Wait()
}

// peek is reader w's next record, not taken; nil once it has sent all.
func (rd *segmentReaders) peek(w int) *contract.Record {
	if rd.heads[w] == nil {
		if r, ok := <-rd.chs[w]; ok {
			rd.heads[w] = &r
		}
	}
	return rd.heads[w]
}

// gather takes each member of g its records, those its worker's reader
// sends next with the member's wave id; false where one is another
// worker's share (a client of another worker, not a mechanism check).
func (rd *segmentReaders) gather(g *waveGroup) bool {
	k := len(rd.chs)
	for mi := range g.members {
		m := &g.members[mi]
		m.recs = nil
		for r := rd.peek(m.worker); r != nil && r.Wave == m.wave.ID; r = rd.peek(m.worker) {
			if r.Kind != contract.KindMechanismCheck && r.Client%k != m.worker {
				return false
			}
			m.recs = append(m.recs, *r)
			rd.heads[m.worker] = nil
		}
	}
	return true
}

// checkReads is the error of the stopped readers' reads: ctx's
// interruption, a segment that no longer reads, or one whose records are
// no longer those verified (their sums); nil where every read holds.
func (s *segmentStream) checkReads(ctx context.Context, rd *segmentReaders) error {
	for w, pi := range s.order {
		src := s.ps.srcs[pi]
		switch {
		case src.held:
		case rd.errs[w] != nil && IsInterrupted(ctx, rd.errs[w]):
			return rd.errs[w]
		case rd.errs[w] != nil:
			return changedError(src.dir, rd.errs[w])
		case !slices.Equal(rd.results[w].recordSums, src.sums):
			return changedError(src.dir, nil)
		}
	}
	return nil
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
