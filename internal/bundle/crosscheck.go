package bundle

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/rehearse/rehearse/internal/contract"
)

// journalDiffsListed is how many differing records (and waves) of the
// journal are listed field by field; the rest are counted.
const journalDiffsListed = 3

// compareJournal rebuilds results from the bundle's journal.jsonl, where
// the bundle keeps one, and reports records and waves that differ from
// results.json's: results.json is written from the journal, so any
// difference is a change made to one of them afterwards.
// The error is only the interruption.
func (d *Dir) compareJournal(ctx context.Context, res *Results) ([]Problem, error) {
	recs := res.Records
	return d.compareJournalWith(ctx, res, journalSide{
		n: len(recs), sums: res.recordSums,
		wave:     func(n int) int { return recs[n].Wave },
		summable: func(n int) bool { return recs[n].Server != "" && recs[n].Kind != "" },
		record:   func(n int) *contract.Record { return &recs[n] },
		clocks:   func() map[int]*contract.WaveClock { return waveClocks(recs) },
		records:  func() ([]contract.Record, error) { return recs, nil },
	})
}

// journalSide is what compareJournalWith compares the journal with:
// results.json's records held (record set), or as the stream decoder left
// them (their sums, waves and clocks only).
type journalSide struct {
	n    int
	sums []recordSum
	wave func(n int) int
	// summable: a sum may decide for the n-th record (one without
	// server or kind is a bad line for the journal).
	summable func(n int) bool
	// record is the n-th record; nil: not held, and a line whose sum
	// differs is a difference.
	record func(n int) *contract.Record
	clocks func() map[int]*contract.WaveClock
	// records are results.json's records, to list the differences.
	records func() ([]contract.Record, error)
}

// compareJournalWith is compareJournal against side.
func (d *Dir) compareJournalWith(ctx context.Context, res *Results, side journalSide) ([]Problem, error) {
	// The journal's records are compared with results.json's as they are
	// read, none kept: where all agree, the journal's waves take their
	// times from results.json's records, which are the same.
	f, err := d.Open(ctx, JournalFile, JournalLimit)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case IsInterrupted(ctx, err):
		return nil, err
	case err != nil:
		return []Problem{fileProblem(err)}, nil
	}
	j, same, err := side.sameRecords(f)
	f.Close()
	if same {
		fixWaveTimesOf(j, side.clocks())
		return compareLists("waves", j.Waves, res.Waves, wavesEqual), nil
	}
	if IsInterrupted(ctx, err) {
		return nil, err
	}
	return d.journalDifferences(ctx, res, side)
}

// sameRecords reads the journal from in and reports whether its records
// are results.json's, every one, with the journal read (its records not
// kept) where they are; err is the read's error.
//
// A record line is compared as bytes with what the journal would have
// written for results.json's record (json.Marshal of the same entry), on
// all cores; a line that differs ends the read (the whole decode,
// journalDifferences, lists how). Where the stream decoder hashed
// results.json's records, a line whose bytes are the record's
// (recordSum) is the same record without marshalling it: that is
// checked as the line is read, and the line is not kept. Any other line
// is copied and compared on all cores.
func (side journalSide) sameRecords(in io.Reader) (*Results, bool, error) {
	var differ atomic.Bool
	sums := side.sums
	if len(sums) != side.n {
		sums = nil
	}
	jobs := make(chan []rawLine, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for js := range jobs {
				for _, l := range js {
					if !differ.Load() && !sameLine(side.record(l.n), l.line) {
						differ.Store(true)
					}
				}
			}
		})
	}
	var batch []rawLine
	seen := 0
	j, err := scanJournal(in, func(*contract.Record) error { return errDiffers }, func(n int, line []byte, sum recordSum, summed bool) (int, error) {
		if n >= side.n || differ.Load() {
			return 0, errDiffers
		}
		seen = n + 1
		if sums != nil && side.summable(n) && summed && sum == sums[n] { // lineSum's, hashed on the decoding cores
			return side.wave(n), nil
		}
		if side.record == nil {
			differ.Store(true)
			return 0, errDiffers
		}
		batch = append(batch, rawLine{n, bytes.Clone(line)})
		if len(batch) == orderedBatch {
			jobs <- batch
			batch = nil
		}
		return side.wave(n), nil
	})
	jobs <- batch
	close(jobs)
	wg.Wait()
	return j, err == nil && !differ.Load() && seen == side.n, err
}

// journalDifferences decodes the journal whole and lists how its
// records and waves differ from results.json's (the journal's records
// without chunk times taken as results.json writes them, an empty list).
func (d *Dir) journalDifferences(ctx context.Context, res *Results, side journalSide) ([]Problem, error) {
	j, err := d.journal(ctx, JournalFile)
	switch {
	case IsInterrupted(ctx, err):
		return nil, err
	case err != nil:
		return []Problem{fileProblem(err)}, nil
	}
	for i := range j.Records {
		if j.Records[i].ChunkTimesS == nil {
			j.Records[i].ChunkTimesS = []float64{} // as results.json writes it
		}
	}
	recs, err := side.records()
	switch {
	case IsInterrupted(ctx, err):
		return nil, err
	case err != nil:
		return []Problem{fileProblem(err)}, nil
	}
	probs := compareLists("records", j.Records, recs, recordsEqual)
	return append(probs, compareLists("waves", j.Waves, res.Waves, wavesEqual)...), nil
}

// errDiffers ends a scan of the journal that met a record unlike
// results.json's.
var errDiffers = errors.New("the journal's records differ from results.json's")

// rawLine is a record line of the journal, the n-th record.
type rawLine struct {
	n    int
	line []byte
}

// sameLine reports whether line is what the journal writes for rec: the
// journal holds the same record as results.json exactly when it does (an
// empty chunk_times_s is journaled as null).
func sameLine(rec *contract.Record, line []byte) bool {
	if rec.Server == "" || rec.Kind == "" {
		return false // the whole decode reports the bad line
	}
	r := *rec
	if len(r.ChunkTimesS) == 0 {
		r.ChunkTimesS = nil
	}
	want, err := json.Marshal(Entry{Record: &r})
	return err == nil && bytes.Equal(want, line)
}

// compareLists compares the journal's and results.json's list of name, item
// by item: the counts, then the fields of the first journalDiffsListed items
// that differ, then how many differ.
func compareLists[T any](name string, journal, results []T, equal func(a, b *T) bool) []Problem {
	var probs []Problem
	if len(journal) != len(results) {
		probs = append(probs, Problem{File: JournalFile, Msg: fmt.Sprintf("%d %s, results.json %d", len(journal), name, len(results))})
	}
	differ := 0
	for i := range min(len(journal), len(results)) {
		if equal(&journal[i], &results[i]) {
			continue
		}
		differ++
		if differ > journalDiffsListed {
			continue
		}
		ds := diffJSON(journal[i], results[i])
		for _, d := range ds {
			probs = append(probs, Problem{File: JournalFile, Field: fmt.Sprintf("%s[%d].%s", name, i, d.path),
				Msg: fmt.Sprintf("journal %s, results.json %s", d.a, d.b)})
		}
		if len(ds) == 0 {
			probs = append(probs, Problem{File: JournalFile, Field: fmt.Sprintf("%s[%d]", name, i), Msg: "differs from results.json's"})
		}
	}
	if differ > journalDiffsListed {
		probs = append(probs, Problem{File: JournalFile, Field: name,
			Msg: fmt.Sprintf("%d differ from results.json's (the first %d listed)", differ, journalDiffsListed)})
	}
	return probs
}

// recordsEqual reports whether two records hold the same values (an empty
// chunk_times_s equals a null one: the journal writes null, results.json
// []). TestRecordsEqualSeesEveryField keeps it in step with contract.Record.
func recordsEqual(a, b *contract.Record) bool {
	if a.Kind != b.Kind || a.Server != b.Server || a.Concurrency != b.Concurrency || a.Repeat != b.Repeat ||
		a.Wave != b.Wave || a.Client != b.Client || a.Prompt != b.Prompt ||
		a.IntendedStartS != b.IntendedStartS || a.StartS != b.StartS || a.EndS != b.EndS ||
		!equalPtr(a.FirstContentS, b.FirstContentS) ||
		a.OK != b.OK || a.ErrorKind != b.ErrorKind || a.Error != b.Error || a.HTTPStatus != b.HTTPStatus ||
		!equalPtr(a.RetryAfterS, b.RetryAfterS) || a.Redacted != b.Redacted ||
		a.Text != b.Text || a.OutputTokens != b.OutputTokens ||
		!equalPtr(a.UsageCompletionTokens, b.UsageCompletionTokens) || !equalPtr(a.UsagePromptTokens, b.UsagePromptTokens) ||
		a.FinishReason != b.FinishReason || a.Retried != b.Retried || a.Model != b.Model ||
		!equalPtr(a.InputTokens, b.InputTokens) || a.MaxTokens != b.MaxTokens ||
		!equalPtr(a.Session, b.Session) || a.Turn != b.Turn || !equalPtr(a.Replica, b.Replica) ||
		!equalPtr(a.FirstTokenS, b.FirstTokenS) || a.ReasoningText != b.ReasoningText ||
		!equalPtr(a.ReasoningTokens, b.ReasoningTokens) || a.ToolCallText != b.ToolCallText ||
		!equalPtr(a.ClientAddedS, b.ClientAddedS) || !equalPtr(a.Worker, b.Worker) || !equalPtr(a.Request, b.Request) || len(a.ChunkTimesS) != len(b.ChunkTimesS) {
		return false
	}
	for i, t := range a.ChunkTimesS {
		if t != b.ChunkTimesS[i] {
			return false
		}
	}
	return true
}

func equalPtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// wavesEqual compares two waves field by field, pointed-to values (a
// ramp, stalls, slip) by their value.
func wavesEqual(a, b *contract.Wave) bool {
	return reflect.DeepEqual(*a, *b)
}
