package bundle

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

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
	n, same := 0, true
	j, err := scanJournal(f, func(rec *contract.Record) error {
		if same && (n >= len(res.Records) || !recordsEqual(rec, &res.Records[n])) {
			same = false
		}
		n++
		return nil
	})
	f.Close()
	if err == nil && same && n == len(res.Records) {
		j.Records = res.Records
		FixWaveTimes(j)
		return compareLists("waves", j.Waves, res.Waves, wavesEqual), nil
	}
	if IsInterrupted(ctx, err) {
		return nil, err
	}
	// They differ (or the journal is bad): decode it whole, to list how.
	j, err = d.journal(ctx, JournalFile)
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
	probs := compareLists("records", j.Records, res.Records, recordsEqual)
	return append(probs, compareLists("waves", j.Waves, res.Waves, wavesEqual)...), nil
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
		a.Text != b.Text || a.OutputTokens != b.OutputTokens ||
		!equalPtr(a.UsageCompletionTokens, b.UsageCompletionTokens) || !equalPtr(a.UsagePromptTokens, b.UsagePromptTokens) ||
		a.FinishReason != b.FinishReason || a.Retried != b.Retried ||
		!equalPtr(a.InputTokens, b.InputTokens) || a.MaxTokens != b.MaxTokens ||
		!equalPtr(a.Session, b.Session) || a.Turn != b.Turn ||
		!equalPtr(a.FirstTokenS, b.FirstTokenS) || a.ReasoningText != b.ReasoningText ||
		!equalPtr(a.ReasoningTokens, b.ReasoningTokens) || a.ToolCallText != b.ToolCallText ||
		len(a.ChunkTimesS) != len(b.ChunkTimesS) {
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

// wavesEqual compares two waves field by field, a ramp by its value.
func wavesEqual(a, b *contract.Wave) bool {
	x, y := *a, *b
	if (x.Ramp == nil) != (y.Ramp == nil) || (x.Ramp != nil && *x.Ramp != *y.Ramp) {
		return false
	}
	x.Ramp, y.Ramp = nil, nil
	return x == y
}
