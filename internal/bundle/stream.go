package bundle

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/rehearse/rehearse/internal/contract"
)

// verifyStreaming verifies results.json, and the journal against it, as
// the records stream past, keeping none: each record is checked against
// SPEC §2 (checkRecord), re-counted (on the decoding cores), summed for the
// journal, timed into its wave's clock and handed to the one aggregator
// (contract.Aggregator), which keeps one float64 per request per
// population and, for the ITL, the counts of an exact selection (whose
// windows, chosen from each population's first gaps, usually hold every
// value it needs by the end of this pass); a further pass, where the
// selection needs one, reads the records again, and judges them against
// the SLO where there is one (contract.SLOJudge). SHA256SUMS is checked
// meanwhile on another goroutine (Dir.verify). Memory is then the
// per-request floats, a few batches of JSON and the per-record sum, wave
// and flag (21 bytes), not the records.
//
// It reports false, having found nothing, for a bundle it does not verify
// this way — sessions (a turn's history is its earlier turns' text),
// capacity searches (they replay the records), a results.json
// whose waves follow its records or that the stream cannot read — and
// verify then holds the records as before. Otherwise what it reports is
// what that would: the same problems in the same order, the same notes.
// Its state comes back beside (the results, read without their records).
func (d *Dir) verifyStreaming(ctx context.Context, o Options, rep *Report) (*streamVerify, bool, error) {
	sv := &streamVerify{o: o, clocks: map[int]*contract.WaveClock{}}
	res, err := d.visitResults(ctx, &recordVisitor{begin: sv.begin, work: sv.work, record: sv.record})
	var invalid *InvalidError
	if errors.As(err, &invalid) {
		res, err = invalid.Results, nil // checkWaves's problems, made again below
	}
	switch {
	case IsInterrupted(ctx, err):
		return sv, true, err
	case err != nil, sv.agg == nil, sv.unsupported, len(res.Capacity) > 0:
		// sv.agg is nil where results.json has no records key.
		return sv, false, nil
	}
	if ok, err := sv.furtherPasses(ctx, res, d.visitResults); err != nil || !ok {
		return sv, ok, err
	}
	want := sv.agg.Aggregates()
	if sv.slo != nil {
		sv.slo.Apply(want)
	}
	sv.replicas.Apply(want, res.Shapes())
	sv.apart.Apply(want)
	sv.res = res
	rep.Records, rep.Waves, rep.Aggregates = sv.n, len(res.Waves), len(res.Aggregates)
	wprobs, _ := checkWaves(res)
	probs := append(wprobs, sv.recordProbs...)
	probs = append(probs, sv.plan.problems()...)
	probs = append(probs, streamedProblems(res, sv, want)...) // no capacity here: checkCapacity has none
	rep.Problems = append(rep.Problems, probs...)
	if ctx.Err() != nil {
		return sv, true, Interrupted(ctx)
	}

	// The re-count, as recountTokens reports it.
	note := sv.countNote
	if sv.n == 0 {
		_, note = recountCounter(res, o, 0)
	}
	if sv.counter != nil && sv.n > 0 {
		rep.Problems = append(rep.Problems, sv.countProbs...)
		note = recountNote(sv.n, sv.reasoning, sv.redacted, res.Provenance.Tokenizer.SHA256)
		if sv.inputs > 0 {
			rep.Problems = append(rep.Problems, sv.inputProbs...)
			note += fmt.Sprintf("; input_tokens of %d records from their prompts", sv.inputs)
		}
	}
	if note != "" {
		rep.Notes = append(rep.Notes, note)
	}

	jp, err := d.compareJournalWith(ctx, res, journalSide{
		n: sv.n, sums: res.recordSums,
		wave:     func(n int) int { return int(sv.waves[n]) },
		summable: func(n int) bool { return sv.summable[n] },
		clocks:   func() map[int]*contract.WaveClock { return sv.clocks },
		records: func() ([]contract.Record, error) {
			// They differ: read the records whole, to list how.
			sv.heldForJournal = true
			r, err := d.results(ctx)
			var invalid *InvalidError
			if errors.As(err, &invalid) {
				return invalid.Results.Records, nil
			}
			if err != nil {
				return nil, err
			}
			return r.Records, nil
		},
	})
	rep.Problems = append(rep.Problems, jp...)
	return sv, true, err
}

// furtherPasses runs the passes over the records that follow the first:
// the ITL selection's, while it asks for one (contract.Aggregator.Next),
// and once the SLO verdicts', whose objectives come after the records.
// visit reads results.json's records again. It reports false, with no
// error, where the file changed under it: the caller then reads the
// records whole.
func (sv *streamVerify) furtherPasses(ctx context.Context, res *Results, visit func(context.Context, *recordVisitor) (*Results, error)) (bool, error) {
	var judge *contract.SLOJudge
	if res.SLO != nil {
		judge = contract.NewSLOJudge(res.Waves, res.SLO)
	}
	more := sv.agg.Next()
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
		if _, err := visit(ctx, again); err != nil {
			if IsInterrupted(ctx, err) {
				return true, err
			}
			var invalid *InvalidError
			if !errors.As(err, &invalid) {
				return false, nil
			}
		}
		if j != nil {
			sv.slo, judge = j, nil
		}
		if itl {
			more = sv.agg.Next()
		}
	}
	return true, nil
}

// visitResults streams results.json's records to v (decodeVisit),
// stopping when ctx ends.
func (d *Dir) visitResults(ctx context.Context, v *recordVisitor) (*Results, error) {
	v.ctx = ctx
	f, err := d.Open(ctx, ResultsFile, ResultsLimit)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return decodeVisit(bufio.NewReaderSize(f, readChunk), v)
}

// streamVerify is the state of verifyStreaming's pass over the records.
type streamVerify struct {
	o    Options
	head *Results
	// res is results.json less its records, once the passes are done.
	res      *Results
	ctx      recordContext
	plan     *planCheck
	agg      *contract.Aggregator
	replicas *contract.ReplicaCounter
	apart    *contract.ApartTally
	servers  map[string]Server
	// replicaProbs are the records' replica problems, in order.
	replicaProbs []Problem
	slo          *contract.SLOJudge
	clocks       map[int]*contract.WaveClock
	unsupported  bool
	// heldForJournal: the journal differed, and the records were read
	// whole to list how.
	heldForJournal bool

	n           int
	recordProbs []Problem
	waves       []int32
	summable    []bool

	counter                Counter
	countNote              string
	memo                   *syncMemo
	prompts                map[int]int
	reasoning, inputs      int
	redacted               int
	countProbs, inputProbs []Problem
	// mechanism are the records of mechanism-check waves, less their
	// text, for the check's client view (checkMechanism).
	mechanism []contract.Record
}

// begin sets up the pass from what results.json holds before its records.
func (sv *streamVerify) begin(head *Results) bool {
	if len(head.Workload.Sessions) > 0 {
		return false
	}
	sv.head = head
	_, waves := checkWaves(head)
	sv.ctx = recordContext{waves: waves, prompts: len(head.Workload.Prompts), source: head.Provenance.OutputTokensSource, workload: &head.Workload}
	sv.plan = newPlanCheck(head.Waves, &head.Workload, head.Provenance.Worker)
	sv.agg = contract.NewAggregator(head.Waves, head.ServerNames(), head.BaselineName())
	sv.replicas = contract.NewReplicaCounter(head.Waves)
	sv.apart = contract.NewApartTally(head.Waves)
	sv.servers = serversByName(head)
	sv.counter, sv.countNote = recountCounter(head, sv.o, 1)
	if sv.counter != nil {
		sv.memo = &syncMemo{c: sv.counter, m: map[string]int{}}
		sv.prompts = map[int]int{}
	}
	return true
}

// work re-counts a record on a decoding core.
func (sv *streamVerify) work(rec *contract.Record, x *recordWork) {
	if sv.memo != nil {
		x.found = recountOne(-1, rec, sv.memo, x.found[:0])
	}
}

// record takes the i-th record, in order.
func (sv *streamVerify) record(i int, rec *contract.Record, x *recordWork) {
	if rec.Session != nil || rec.Turn > 0 {
		sv.unsupported = true // sessionRuns needs the records together
	}
	sv.n = i + 1
	sv.recordProbs = append(sv.recordProbs, checkRecord(i, rec, sv.ctx)...)
	sv.plan.add(i, rec)
	sv.waves = append(sv.waves, int32(rec.Wave))
	sv.summable = append(sv.summable, rec.Server != "" && rec.Kind != "")
	c := sv.clocks[rec.Wave]
	if c == nil {
		c = &contract.WaveClock{}
		sv.clocks[rec.Wave] = c
	}
	c.Add(rec)
	if rec.Kind == contract.KindMechanismCheck {
		m := *rec
		m.Text, m.ReasoningText, m.ToolCallText = "", "", ""
		sv.mechanism = append(sv.mechanism, m)
	}
	sv.agg.Add(rec)
	sv.replicas.Add(rec)
	sv.apart.Add(rec)
	if p := recordReplicaProblem(i, rec, sv.servers); p != nil {
		sv.replicaProbs = append(sv.replicaProbs, *p)
	}
	if sv.memo == nil {
		return
	}
	switch {
	case rec.Redacted:
		sv.redacted++
	case rec.ReasoningTokens != nil:
		sv.reasoning++
	}
	for _, m := range x.found {
		m.index = i
		sv.countProbs = append(sv.countProbs, miscountProblem(m, rec, sv.ctx.waves))
	}
	wl := &sv.head.Workload
	if rec.InputTokens != nil && rec.Prompt >= 0 && rec.Prompt < len(wl.Prompts) {
		want, ok := sv.prompts[rec.Prompt]
		if !ok {
			want = promptCount(wl, sv.memo, rec.Prompt)
			sv.prompts[rec.Prompt] = want
		}
		sv.inputs++
		if p := inputProblem(i, rec, want, sv.ctx.waves); p != nil {
			sv.inputProbs = append(sv.inputProbs, *p)
		}
	}
}

// syncMemo is a memo for the decoding cores together.
type syncMemo struct {
	c  Counter
	mu sync.Mutex
	m  map[string]int
}

func (m *syncMemo) Count(text string) int {
	m.mu.Lock()
	n, ok := m.m[text]
	m.mu.Unlock()
	if ok {
		return n
	}
	n = m.c.Count(text)
	m.mu.Lock()
	if len(m.m) < memoMax {
		m.m[text] = n
	}
	m.mu.Unlock()
	return n
}
