package bundle

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/rehearse/rehearse/internal/contract"
)

// ReadVerifiedHead is ReadVerified for a caller that reads no records
// (compare): the bundle is verified as `rehearse verify` verifies it, as
// its records stream past, and the results come back without them
// (Records nil; the aggregates are the stored ones, which verify found
// equal to those recomputed). The refusals are ReadVerified's. A bundle
// verify does not stream (sessions, capacity searches: see
// verifyStreaming) is verified holding its records, as ReadVerified
// does, and its memory then grows with them until they are dropped.
func ReadVerifiedHead(ctx context.Context, dir string) (*Results, error) {
	p, err := readVerifiedPart(ctx, dir)
	if err != nil {
		return nil, err
	}
	p.res.Records = nil
	p.res.recordSums = nil
	return p.res, nil
}

// partSource is one part of a merge: its results, and where its records
// are.
type partSource struct {
	dir string
	// res is the part's results; its Records are held only where held.
	res  *Results
	held bool
	// n is the part's number of records.
	n int
	// sums are, where not held, the verified records' sums, in order:
	// every later pass over results.json must find the same.
	sums []recordSum
}

// readVerifiedPart is ReadVerified keeping no records where verify
// streams them.
func readVerifiedPart(ctx context.Context, dir string) (*partSource, error) {
	res, rep, err := verifyDirOpt(ctx, dir, Options{}, true)
	if err := refusal(ctx, dir, res, rep.Problems, err); err != nil {
		return nil, err
	}
	p := &partSource{dir: dir, res: res, n: rep.Records, held: len(res.Records) == rep.Records}
	if !p.held {
		p.sums = res.recordSums
		res.Records = []contract.Record{}
	}
	res.recordSums = nil
	return p, nil
}

// PartSet is the parts of a merge as ReadPartSet read them: each verified,
// its records left in its results.json where verify streamed them.
type PartSet struct {
	// Results are the parts' results, in order: without records (an
	// empty list) where they stream. A caller may set what Merge reads
	// of them (Baseline), not their records.
	Results []*Results
	srcs    []*partSource
}

// ReadPartSet reads the parts of a merge, keeping no records: each must be
// a bundle that verifies (verified as its records stream past; a part
// verify does not stream keeps them), or, where a part's rehearsal
// stopped before writing results.json, a folder with its journal (rebuilt
// from it, as `rehearse report` would; its records are kept). The same
// folder given twice is refused.
func ReadPartSet(ctx context.Context, dirs []string) (*PartSet, error) {
	if err := sameFolderTwice(dirs); err != nil {
		return nil, err
	}
	ps := &PartSet{}
	for _, dir := range dirs {
		p, err := readVerifiedPart(ctx, dir)
		if errors.Is(err, fs.ErrNotExist) {
			var res *Results
			res, err = readJournalFor(ctx, dir, err)
			if err == nil {
				p = &partSource{dir: dir, res: res, n: len(res.Records), held: true}
			}
		}
		if err != nil {
			return nil, err
		}
		ps.Results = append(ps.Results, p.res)
		ps.srcs = append(ps.srcs, p)
	}
	return ps, nil
}

// sameFolderTwice refuses the same folder given twice among dirs.
func sameFolderTwice(dirs []string) error {
	stats := make([]os.FileInfo, len(dirs))
	for i, dir := range dirs {
		st, err := os.Stat(dir)
		if err != nil {
			break // ReadVerified names it
		}
		for j := range i {
			if stats[j] != nil && os.SameFile(stats[j], st) {
				return fmt.Errorf("part %d (%s) is part %d (%s) given twice: merged, its records would count twice", i+1, dir, j+1, dirs[j])
			}
		}
		stats[i] = st
	}
	return nil
}

// MergedParts is a merge of a PartSet (PartSet.Merge), to be written.
type MergedParts struct {
	// Results are the merged results, with the records only where Held;
	// their aggregates and cost, which follow the records in
	// results.json, are those of the pass that writes them where the
	// merge was not of segments (set by Write).
	Results *Results
	// Records counts the merged records.
	Records int
	// Held: Results holds the records (a merge of parts with capacity
	// searches, whose recomputation needs them together, or of segments
	// whose records are out of order).
	Held bool

	ps    *PartSet
	names []string
	waves []map[int]int // each part's wave ids, old → merged
	// seg: a merge of segments, its records streamed (segmentStream).
	seg *segmentStream
	// late: the aggregates and cost are computed by Write.
	late bool
}

// Merge is MergeWith of the parts, reading each streamed part's records
// as they stream, part after part, in the order MergeWith takes them,
// when the merge is written (Write): the pass that writes them feeds the
// aggregator (contract.Aggregator, with the SLO verdicts and the
// replicas' counts), the ITL's exact selection reads them again (times
// only) where it needs to, and the aggregates, which follow the records
// in results.json, are written last. What it keeps is what the aggregator
// keeps, not the records. The merged results are MergeWith's, figure for
// figure, and Write writes WriteResults' bytes.
//
// Segments of a split plan are merged as mergeSegments merges them, their
// records streamed too, one merged wave's records held at a time (they
// are sorted by client, turn and start: segmentStream); segments whose
// records are not in the order of their waves, and parts with capacity
// searches (replayed from the merged records), are merged by MergeWith,
// holding every record, as before: Held says so.
//
// Where two parts hold as many records, whether they are the same is
// decided by one more pass over each (json.Marshal of its records, as
// MergeWith's rehearsalID); parts of different counts are different
// rehearsals without it.
func (ps *PartSet) Merge(ctx context.Context, names []string, o MergeOptions) (*MergedParts, error) {
	parts := ps.Results
	if len(parts) == 0 {
		return nil, fmt.Errorf("nothing to merge")
	}
	segmented, capacity := false, false
	for _, p := range parts {
		segmented = segmented || p.Provenance.Worker != nil
		capacity = capacity || len(p.Capacity) > 0
	}
	if segmented && !capacity {
		m, ok, err := ps.mergeSegmentsStreamed(ctx, names, o)
		if err != nil || ok {
			return m, err
		}
	}
	if segmented || capacity {
		if err := ps.hold(ctx); err != nil {
			return nil, err
		}
		out, err := MergeWith(parts, names, o)
		if err != nil {
			return nil, err
		}
		return &MergedParts{Results: out, Records: len(out.Records), Held: true}, nil
	}
	m := &MergedParts{ps: ps, names: names, waves: make([]map[int]int, len(parts))}
	ids := make([][sha256.Size]byte, len(parts))
	counts := make([]int, len(parts))
	for i, s := range ps.srcs {
		counts[i] = s.n
	}
	for i, s := range ps.srcs {
		switch {
		case s.held || s.n == 0:
			ids[i] = rehearsalID(s.res)
		case slices.Contains(counts[:i], s.n) || slices.Contains(counts[i+1:], s.n):
			id, err := m.streamedID(ctx, i)
			if err != nil {
				return nil, err
			}
			ids[i] = id
		default:
			// No other part holds as many records: not the same
			// rehearsal as any, whatever its id (a digest of what no
			// rehearsalID digests).
			ids[i] = sha256.Sum256(fmt.Appendf(nil, "part %d of %d records, no other of as many", i, s.n))
		}
	}
	out, err := mergeHeads(parts, ids, counts, names, o, func(i int, waveIDs map[int]int, _ *Results) error {
		m.waves[i] = waveIDs
		for _, r := range ps.srcs[i].res.Records {
			if _, ok := waveIDs[r.Wave]; !ok {
				return noWave(names[i], r.Wave)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// The aggregates follow the records in results.json: Write computes
	// them in the pass that writes the records.
	m.Results, m.late = out, true
	for _, c := range counts {
		m.Records += c
	}
	return m, nil
}

// recomputation is Recompute streamed: ComputeAggregates (contract.
// Aggregates, then ApplySLO and ApplyReplicas) fed the records one at a
// time, then the cost (no capacity search is merged streamed).
type recomputation struct {
	agg      *contract.Aggregator
	replicas *contract.ReplicaCounter
	judge    *contract.SLOJudge
}

func newRecomputation(out *Results) *recomputation {
	r := &recomputation{
		agg:      contract.NewAggregator(out.Waves, out.ServerNames(), out.BaselineName()),
		replicas: contract.NewReplicaCounter(out.Waves),
	}
	if out.SLO != nil {
		r.judge = contract.NewSLOJudge(out.Waves, out.SLO)
	}
	return r
}

// add takes a record of the first pass.
func (r *recomputation) add(rec *contract.Record) {
	r.agg.Add(rec)
	r.replicas.Add(rec)
	if r.judge != nil {
		r.judge.Add(rec)
	}
}

// finish is the rest of Recompute once the first pass has fed r: the ITL
// selection's further passes, then the aggregates, their SLO and replica
// figures, and the cost. The results are then out.
func (m *MergedParts) finish(ctx context.Context, out *Results, r *recomputation) error {
	for r.agg.Next() {
		if _, err := m.pass(ctx, true, func(rec *contract.Record) error {
			r.agg.Add(rec)
			return nil
		}); err != nil {
			return err
		}
	}
	aggs := r.agg.Aggregates()
	if r.judge != nil {
		r.judge.Apply(aggs)
	} else {
		for i := range aggs {
			aggs[i].SLO = nil
		}
	}
	r.replicas.Apply(aggs, out.Shapes())
	out.Aggregates = aggs
	out.Cost = out.ComputeCost()
	return nil
}

// hold reads the records of every streamed part, for MergeWith.
func (ps *PartSet) hold(ctx context.Context) error {
	for _, s := range ps.srcs {
		if s.held {
			continue
		}
		d, err := OpenDir(s.dir)
		if err != nil {
			return err
		}
		res, err := d.results(ctx)
		d.Close()
		if err != nil {
			if IsInterrupted(ctx, err) {
				return err
			}
			return changedError(s.dir, err)
		}
		if !slices.Equal(res.recordSums, s.sums) {
			return changedError(s.dir, nil)
		}
		s.res.Records, s.held = res.Records, true
	}
	return nil
}

// changedError is the error of a part whose results.json is no longer
// what was verified.
func changedError(dir string, err error) error {
	if err != nil {
		return fmt.Errorf("%s: results.json changed after it was verified (%v): merge it again", dir, err)
	}
	return fmt.Errorf("%s: results.json changed after it was verified (other records): merge it again", dir)
}

// pass hands every part's records, part after part, each in its order,
// to f, their waves renumbered; timesOnly: f needs only their kind, wave,
// ok and chunk times. It returns how many it handed. A pass that is not
// timesOnly requires every streamed part's records to be those verified
// (their sums). f's error ends the pass.
func (m *MergedParts) pass(ctx context.Context, timesOnly bool, f func(*contract.Record) error) (int, error) {
	if m.seg != nil {
		// Segments: every pass is whole (a merged wave's records are
		// sorted by client, turn and start).
		_, n, ok, err := m.seg.pass(ctx, f)
		if err == nil && !ok {
			err = changedError(m.seg.ps.srcs[m.seg.order[0]].dir+" (or another segment)", nil)
		}
		return n, err
	}
	n := 0
	for i, s := range m.ps.srcs {
		waveIDs := m.waves[i]
		if s.held {
			for _, r := range s.res.Records {
				r.Wave = waveIDs[r.Wave] // checked by Merge
				if err := f(&r); err != nil {
					return n, err
				}
				n++
			}
			continue
		}
		pctx, cancel := context.WithCancel(ctx)
		var failed error
		res, err := visitPart(pctx, s.dir, &recordVisitor{
			timesOnly: timesOnly,
			begin:     func(*Results) bool { return true },
			record: func(_ int, rec *contract.Record, _ *recordWork) {
				if failed != nil {
					return
				}
				id, ok := waveIDs[rec.Wave]
				if !ok {
					failed = noWave(m.names[i], rec.Wave)
				} else {
					rec.Wave = id
					failed = f(rec)
					n++
				}
				if failed != nil {
					cancel() // stop reading
				}
			},
		})
		cancel()
		switch {
		case failed != nil:
			return n, failed
		case err != nil && IsInterrupted(ctx, err):
			return n, err
		case err != nil:
			return n, changedError(s.dir, err)
		case !timesOnly && !slices.Equal(res.recordSums, s.sums):
			return n, changedError(s.dir, nil)
		}
	}
	return n, nil
}

// visitPart streams the records of results.json in dir to v.
func visitPart(ctx context.Context, dir string, v *recordVisitor) (*Results, error) {
	d, err := OpenDir(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.visitResults(ctx, v)
}

// streamedID is rehearsalID of part i, its records streamed: the digest
// of json.Marshal of the list of them, made one record at a time.
func (m *MergedParts) streamedID(ctx context.Context, i int) ([sha256.Size]byte, error) {
	s := m.ps.srcs[i]
	h := sha256.New()
	h.Write([]byte{'['})
	var marshalErr error
	first := true
	res, err := visitPart(ctx, s.dir, &recordVisitor{
		begin: func(*Results) bool { return true },
		record: func(_ int, rec *contract.Record, _ *recordWork) {
			if marshalErr != nil {
				return
			}
			data, err := json.Marshal(rec)
			if err != nil {
				marshalErr = err
				return
			}
			if !first {
				h.Write([]byte{','})
			}
			first = false
			h.Write(data)
		},
	})
	switch {
	case err != nil && IsInterrupted(ctx, err):
		return [sha256.Size]byte{}, err
	case err != nil:
		return [sha256.Size]byte{}, changedError(s.dir, err)
	case !slices.Equal(res.recordSums, s.sums):
		return [sha256.Size]byte{}, changedError(s.dir, nil)
	case marshalErr != nil:
		// Not JSON (a NaN): no identity, so never a duplicate.
		return sha256.Sum256(fmt.Appendf(nil, "%p", s)), nil
	}
	h.Write([]byte{']'})
	var id [sha256.Size]byte
	h.Sum(id[:0])
	return id, nil
}

// Write writes dir/results.json atomically: WriteResults of the merged
// results, their records streamed from the parts in a last pass (each
// part's checked to be the records verified). Interrupted by ctx, it
// writes nothing.
func (m *MergedParts) Write(ctx context.Context, dir string) error {
	if m.Held {
		return WriteResults(dir, m.Results)
	}
	path := filepath.Join(dir, ResultsFile)
	var encErr error
	var r *recomputation
	var then func() error
	if m.late {
		r = newRecomputation(m.Results)
		then = func() error { return m.finish(ctx, m.Results, r) }
	}
	err := writeAtomic(path, nil, func(w io.Writer) error {
		encErr = encodeRecords(w, m.Results, m.Records > 0, then, func(yield func(*contract.Record) error) error {
			n, err := m.pass(ctx, false, func(rec *contract.Record) error {
				if r != nil {
					r.add(rec)
				}
				return yield(rec)
			})
			if err == nil && n != m.Records {
				err = fmt.Errorf("%d records, %d when merged: a part changed", n, m.Records)
			}
			return err
		})
		return encErr
	})
	m.late = false
	var we *WriteError
	if encErr != nil && !errors.As(err, &we) {
		if IsInterrupted(ctx, encErr) {
			return encErr
		}
		return fmt.Errorf("%s: %w", path, encErr)
	}
	return err
}
