package bundle

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"io/fs"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/rehearse/rehearse/internal/contract"
)

// ReportInput is what `rehearse report` renders a bundle from
// (ReadReport).
type ReportInput struct {
	// Results holds the bundle's results. Where Lean, its aggregates
	// (and cost) are recomputed from the raw records, as Recompute
	// computes them, and its records are lean (LeanRecord): the report's
	// figures and tables read nothing else of them. Otherwise it is
	// ReadPart's, records whole, aggregates as stored.
	Results *Results
	// FromJournal: the bundle had no results.json and Results was
	// rebuilt from its journal (ReadPart); it is not written yet.
	FromJournal bool
	// Disagree counts, where Lean, the stored figures that disagree with
	// the raw records: len(VerifyResults) of the bundle as it was read.
	Disagree int
	// Known are digests taken as the files were read, for SHA256SUMS:
	// results.json's, hashed in the pass that decoded it, and the
	// journal's, hashed beside that pass.
	Known []Digest
	// Lean: the records were streamed, and kept lean.
	Lean bool
}

// ReadReport reads dir for its report. results.json is read once as it
// streams, as verify's streaming path reads it (the recordVisitor of
// decodeVisit): each record is handed to the one aggregator
// (contract.Aggregator), timed into its wave's clock, checked, and kept
// lean (LeanRecord: no chunk times, no texts); the aggregator's further
// passes (the ITL selection, the SLO verdicts, whose objectives come after
// the records) read the chunk times kept in the first pass (keptTimes), or
// results.json again where there is an SLO or the times would take more
// than timesLimit. The aggregates are computed once; results.json is
// hashed for SHA256SUMS in the pass that decodes it, the journal (which
// a report does not read) beside it.
//
// A bundle the stream does not take this way is read whole (ReadPart)
// and its aggregates recomputed from its records: one without
// results.json (rebuilt from the journal), with sessions or capacity
// searches, or one that ReadResults refuses (which then gives its error).
func ReadReport(ctx context.Context, dir string) (*ReportInput, error) {
	in, ok, err := readReportStreaming(ctx, dir)
	if ok || err != nil {
		return in, err
	}
	res, fromJournal, err := ReadPart(ctx, dir)
	if err != nil {
		return nil, err
	}
	// The crash case, and the others above, hold the records whole; the
	// caller checks and recomputes them (VerifyResults, Recompute).
	return &ReportInput{Results: res, FromJournal: fromJournal}, nil
}

// readReportStreaming is ReadReport's streaming path; false (no error)
// where the bundle is not read that way.
func readReportStreaming(ctx context.Context, dir string) (*ReportInput, bool, error) {
	d, err := OpenDir(dir)
	if err != nil {
		return nil, false, nil // ReadPart names it
	}
	defer d.Close()
	// The verifier's pass, less the re-count (no tokenizer) and the
	// journal, which report does not read.
	sv := &streamVerify{clocks: map[int]*contract.WaveClock{}}
	lean := &leanRecords{texts: newInterner()}
	var times keptTimes
	v := &recordVisitor{begin: sv.begin, record: func(i int, rec *contract.Record, x *recordWork) {
		sv.record(i, rec, x)
		lean.add(rec)
		if itlReads(rec) {
			times.add(rec.ChunkTimesS)
		}
	}}
	// The journal, which report does not read, is hashed for SHA256SUMS
	// beside the decode, on whatever core the decode leaves.
	journal := make(chan string, 1)
	hctx, stopHash := context.WithCancel(ctx)
	var hashing sync.WaitGroup
	defer func() { stopHash(); hashing.Wait() }() // before d closes
	hashing.Go(func() {
		sum, err := d.Hash(hctx, JournalFile, JournalLimit)
		if err != nil {
			sum = "" // Digests hashes it again, and names what is wrong
		}
		journal <- sum
	})
	res, sum, err := d.visitResultsHashed(ctx, v)
	switch {
	case IsInterrupted(ctx, err):
		return nil, false, err
	case err != nil, sv.agg == nil, sv.unsupported, len(sv.recordProbs) > 0, len(res.Capacity) > 0:
		// sv.agg is nil where results.json has no records key; a record
		// problem is ReadResults's error, which the held path gives.
		return nil, false, nil
	}
	var judge *contract.SLOJudge
	if res.SLO != nil {
		judge = contract.NewSLOJudge(res.Waves, res.SLO)
	}
	more := sv.agg.Next()
	// The ITL selection's further passes read the kept times, where
	// there is no SLO to judge (its verdicts read whole records).
	for more && judge == nil && !times.dropped {
		r := times.reader()
		var rec contract.Record
		for _, block := range lean.blocks {
			if ctx.Err() != nil {
				return nil, false, Interrupted(ctx)
			}
			for i := range block {
				if l := &block[i]; itlReads(l) {
					rec.Kind, rec.Wave, rec.OK, rec.ChunkTimesS = l.Kind, l.Wave, l.OK, r.next()
					sv.agg.Add(&rec)
				}
			}
		}
		more = sv.agg.Next()
	}
	times = keptTimes{}
	for more || judge != nil {
		j, itl := judge, more
		again := &recordVisitor{timesOnly: j == nil, begin: func(*Results) bool { return true }, record: func(_ int, rec *contract.Record, _ *recordWork) {
			if itl {
				sv.agg.Add(rec)
			}
			if j != nil {
				j.Add(rec)
			}
		}}
		if _, err := d.visitResultsLean(ctx, again); err != nil {
			if IsInterrupted(ctx, err) {
				return nil, false, err
			}
			return nil, false, nil // changed under us: read it whole
		}
		if j != nil {
			sv.slo, judge = j, nil
		}
		if itl {
			more = sv.agg.Next()
		}
	}
	want := sv.agg.Aggregates()
	if sv.slo != nil {
		sv.slo.Apply(want)
	}
	sv.replicas.Apply(want, res.Shapes())
	in := &ReportInput{Results: res, Lean: true, Disagree: len(streamedProblems(res, sv, want))}
	if sum != "" {
		in.Known = []Digest{{File: ResultsFile, SHA256: sum}}
	}
	if sum := <-journal; sum != "" {
		in.Known = append(in.Known, Digest{File: JournalFile, SHA256: sum})
	}
	res.Records = lean.records()
	res.lean, res.generatedText = true, lean.generated
	// Recompute, from the aggregates computed once (no capacity here).
	res.Aggregates = want
	res.Cost = res.ComputeCost()
	return in, true, nil
}

// streamedProblems are VerifyResults's problems of a bundle streamed by
// sv with no record problem (readReportStreaming falls back otherwise),
// no session and no capacity search, want its aggregates recomputed: the
// list of verifyStreamingState, whose record checks are sv's. Tested
// against VerifyResults of the records held.
func streamedProblems(res *Results, sv *streamVerify, want []contract.Aggregate) []Problem {
	probs := checkHeader(res)
	probs = append(probs, checkWaveTimesOf(res, sv.clocks)...)
	probs = append(probs, checkHostHonesty(res)...)
	probs = append(probs, checkMechanism(res)...)
	probs = append(probs, checkReplicaServers(res)...)
	probs = append(probs, sv.replicaProbs...)
	probs = append(probs, checkReplicaSeries(res)...)
	probs = append(probs, checkSLO(res)...)
	probs = append(probs, checkAggregatesOf(res, want)...)
	probs = append(probs, checkCost(res)...)
	return probs
}

// visitResultsHashed is visitResultsLean, hashing results.json (SHA-256, as
// Hash does) in the same read: the bytes the decoder reads pass through
// the hash, then what it left unread. The digest is "" where the visit
// failed.
func (d *Dir) visitResultsHashed(ctx context.Context, v *recordVisitor) (*Results, string, error) {
	f, err := d.Open(ctx, ResultsFile, ResultsLimit)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, "", errUnsupported // the crash case: ReadPart
		}
		return nil, "", err
	}
	defer f.Close()
	h := sha256.New()
	res, err := decodeVisitSums(bufio.NewReaderSize(io.TeeReader(f, h), readChunk), v, false)
	if err != nil {
		return res, "", err
	}
	return res, drainHash(h, f), nil
}

// visitResultsLean is visitResults without the records' sums, which only
// verify's journal comparison reads.
func (d *Dir) visitResultsLean(ctx context.Context, v *recordVisitor) (*Results, error) {
	f, err := d.Open(ctx, ResultsFile, ResultsLimit)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return decodeVisitSums(bufio.NewReaderSize(f, readChunk), v, false)
}

// drainHash hashes the rest of r into h and returns the digest, or ""
// where r could not be read to its end.
func drainHash(h hash.Hash, r io.Reader) string {
	if _, err := io.CopyBuffer(h, r, make([]byte, readChunk)); err != nil {
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))
}

// itlReads reports whether the ITL selection's further passes read rec's
// chunk times (contract.Aggregator.Add).
func itlReads(rec *contract.Record) bool { return rec.Kind == contract.KindRecorded && rec.OK }

// leanRecords keeps the records a report reads, lean (LeanRecord), in
// blocks: a slice grown record by record would copy them all several
// times over, and hold two copies as it grows.
type leanRecords struct {
	blocks    [][]contract.Record
	n         int
	texts     *interner
	generated bool
}

// leanBlock is the records of one block.
const leanBlock = 1 << 14

func (l *leanRecords) add(rec *contract.Record) {
	if rec.ReasoningText != "" || rec.ToolCallText != "" {
		l.generated = true
	}
	if len(l.blocks) == 0 || len(l.blocks[len(l.blocks)-1]) == leanBlock {
		l.blocks = append(l.blocks, make([]contract.Record, 0, leanBlock))
	}
	b := &l.blocks[len(l.blocks)-1]
	*b = append(*b, LeanRecord(*rec))
	l.texts.record(&(*b)[len(*b)-1])
	l.n++
}

// records are the records in one slice (the blocks are let go).
func (l *leanRecords) records() []contract.Record {
	out := make([]contract.Record, 0, l.n)
	for i, b := range l.blocks {
		out = append(out, b...)
		l.blocks[i] = nil
	}
	l.blocks = nil
	return out
}

// LeanRecord is rec less what no report figure or table reads of a
// record: its chunk times and its texts (text, reasoning_text,
// tool_call_text, error, retried). Its timing, counts, kind, server, wave,
// client, ok and error kind stay; so do its pointers (each record's own).
func LeanRecord(rec contract.Record) contract.Record {
	rec.ChunkTimesS = nil
	rec.Text, rec.ReasoningText, rec.ToolCallText = "", "", ""
	rec.Error, rec.Retried = "", ""
	return rec
}

// LeanRecords reports whether r's records are lean (LeanRecord), as
// ReadReport keeps them.
func (r *Results) LeanRecords() bool { return r.lean }

// HasGeneratedText reports whether any record streamed text beside its
// content: reasoning or tool-call arguments. Lean records (ReadReport)
// answer from their texts as they were read.
func (r *Results) HasGeneratedText() bool {
	if r.lean {
		return r.generatedText
	}
	for i := range r.Records {
		if rec := &r.Records[i]; rec.ReasoningText != "" || rec.ToolCallText != "" {
			return true
		}
	}
	return false
}

// timesLimit is the most bytes of chunk times ReadReport keeps for the
// ITL selection's further passes; a bundle that needs more re-reads
// results.json for them (its times alone).
const timesLimit = 1 << 30

// timesBlock is the size of one block of kept times.
const timesBlock = 16 << 20

// Modes of a record's kept chunk times (the low two bits of its header).
const (
	timesNanos   = 0 // float64(ns) / 1e9
	timesSeconds = 1 // time.Duration(ns).Seconds()
	timesRaw     = 2 // the float64 bits, 8 bytes each
)

// keptTimes keeps, in order, the chunk times of the records the ITL
// selection reads (itlReads: contract.Aggregator.Add reads no other's in
// its further passes), exactly and compactly: where every time of a record
// is a whole number of nanoseconds, as a rehearsal stamps them
// (Duration.Seconds) or as a decimal of at most nine places parses, and
// no two follow each other by more than 2.1 s, they are kept as the
// first one's nanoseconds (8 bytes) and then each one's difference from
// the one before it (4 bytes); any other record keeps its float64s as
// they are. Each kept time is checked to come back bit for bit.
type keptTimes struct {
	blocks  [][]byte
	size    int
	dropped bool
}

// add keeps ts, the chunk times of the next record the ITL reads.
func (c *keptTimes) add(ts []float64) {
	if c.dropped {
		return
	}
	need := binary.MaxVarintLen64 + 8*len(ts)
	if len(c.blocks) == 0 || cap(c.blocks[len(c.blocks)-1])-len(c.blocks[len(c.blocks)-1]) < need {
		c.blocks = append(c.blocks, make([]byte, 0, max(timesBlock, need)))
	}
	b := c.blocks[len(c.blocks)-1]
	mark := len(b)
	// The header's first byte holds the mode in its low two bits: it is
	// written as nanos and mended once the times have said which.
	b = binary.AppendUvarint(b, uint64(len(ts))<<2|timesNanos)
	body := len(b)
	mode := timesNanos
	prev := int64(0)
	for i, t := range ts {
		f := math.Round(t * 1e9)
		if !(math.Abs(f) < 1<<53) {
			mode = timesRaw
			break
		}
		ns := int64(f)
		if i == 0 {
			b = binary.LittleEndian.AppendUint64(b, uint64(ns))
		} else if d := ns - prev; d >= math.MinInt32 && d <= math.MaxInt32 {
			b = binary.LittleEndian.AppendUint32(b, uint32(int32(d)))
		} else {
			mode = timesRaw
			break
		}
		prev = ns
		if mode == timesNanos && math.Float64bits(float64(ns)/1e9) != math.Float64bits(t) {
			mode = timesSeconds
		}
	}
	if mode == timesSeconds {
		// Every time again, as Duration.Seconds makes them.
		ns := int64(0)
		for i, t := range ts {
			if i == 0 {
				ns = int64(binary.LittleEndian.Uint64(b[body:]))
			} else {
				ns += int64(int32(binary.LittleEndian.Uint32(b[body+8+4*(i-1):])))
			}
			if math.Float64bits(time.Duration(ns).Seconds()) != math.Float64bits(t) {
				mode = timesRaw
				break
			}
		}
	}
	b[mark] |= byte(mode)
	if mode == timesRaw {
		b = b[:body]
		for _, t := range ts {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(t))
		}
	}
	c.blocks[len(c.blocks)-1] = b
	if c.size += len(b) - mark; c.size > timesLimit {
		c.blocks, c.dropped = nil, true
	}
}

// fromNanos is the time in seconds of ns nanoseconds by mode.
func fromNanos(ns int64, mode int) float64 {
	if mode == timesSeconds {
		return time.Duration(ns).Seconds()
	}
	return float64(ns) / 1e9
}

// timesReader reads keptTimes back in the order they were added.
type timesReader struct {
	blocks [][]byte
	b      []byte
	buf    []float64
}

func (c *keptTimes) reader() *timesReader { return &timesReader{blocks: c.blocks} }

// next returns the next record's chunk times (valid until the next call).
func (r *timesReader) next() []float64 {
	for len(r.b) == 0 {
		r.b, r.blocks = r.blocks[0], r.blocks[1:]
	}
	h, k := binary.Uvarint(r.b)
	b := r.b[k:]
	n, mode := int(h>>2), int(h&3)
	r.buf = slices.Grow(r.buf[:0], n)[:n]
	switch {
	case mode == timesRaw:
		for i := range r.buf {
			r.buf[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
		}
		b = b[8*n:]
	case n > 0:
		ns := int64(binary.LittleEndian.Uint64(b))
		b = b[8:]
		r.buf[0] = fromNanos(ns, mode)
		d := b[:4*(n-1)]
		for i := 1; i < n; i++ {
			ns += int64(int32(binary.LittleEndian.Uint32(d[4*(i-1):])))
			r.buf[i] = fromNanos(ns, mode)
		}
		b = b[4*(n-1):]
	}
	r.b = b
	return r.buf
}
