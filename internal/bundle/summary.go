package bundle

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"io/fs"
	"sync"

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
// passes (the ITL selection where its windows missed a rank, which is
// rare, and the SLO verdicts, whose objectives come after the records)
// read results.json again (furtherPasses, as verify does). The aggregates
// are computed once; results.json is
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
	v := &recordVisitor{begin: sv.begin, record: func(i int, rec *contract.Record, x *recordWork) {
		sv.record(i, rec, x)
		lean.add(rec)
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
	case err != nil, sv.agg == nil, sv.unsupported, len(sv.recordProbs) > 0, len(sv.plan.problems()) > 0, len(res.Capacity) > 0:
		// sv.agg is nil where results.json has no records key; a record
		// problem (or a wave's plan's) is ReadResults's error, which the
		// held path gives.
		return nil, false, nil
	}
	// The ITL selection rarely asks for a further pass (its windows
	// keep what the first saw); one re-reads results.json, times only.
	if ok, err := sv.furtherPasses(ctx, res, d.visitResultsLean); err != nil || !ok {
		return nil, false, err
	}
	want := sv.agg.Aggregates()
	if sv.slo != nil {
		sv.slo.Apply(want)
	}
	sv.replicas.Apply(want, res.Shapes())
	sv.apart.Apply(want)
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
// list of verifyStreaming, whose record checks are sv's. Tested
// against VerifyResults of the records held.
func streamedProblems(res *Results, sv *streamVerify, want []contract.Aggregate) []Problem {
	probs := checkHeader(res)
	probs = append(probs, checkWaveTimesOf(res, sv.clocks)...)
	probs = append(probs, checkHostHonesty(res)...)
	probs = append(probs, checkMechanism(res, mechanismRecords(res, sv.mechanism))...)
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
	v.ctx = ctx
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
	v.ctx = ctx
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
