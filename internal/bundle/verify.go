package bundle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/search"
	"github.com/rehearse/rehearse/internal/workload"
)

// Problem is one thing verify found wrong, located as precisely as it can be.
type Problem struct {
	File   string
	Server string
	// Load is the population's load as contract.Key.LoadLabel names it
	// ("64 clients", "2.5 req/s"), "" where none applies.
	Load  string
	Field string
	Msg   string
}

func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Server != "" {
		fmt.Fprintf(&b, ": server %s", p.Server)
		if p.Load != "" {
			fmt.Fprintf(&b, ", %s", p.Load)
		}
	}
	if p.Field != "" {
		fmt.Fprintf(&b, ": %s", p.Field)
	}
	fmt.Fprintf(&b, ": %s", p.Msg)
	return b.String()
}

// Tolerance for recomputed floats: relative, with an absolute floor for
// values near zero. JSON round-trips float64 exactly, so this only absorbs
// summation order.
const (
	relTol = 1e-9
	absTol = 1e-12
)

// VerifyContext checks a bundle as VerifyWith does with no options
// (output_tokens are not re-counted), stopping when ctx ends, between
// files and within each: the error is then the interruption (IsInterrupted) and the
// problems are those found so far. A dir that cannot be opened as a
// directory is its error (a *FileError naming it), as VerifyWith's.
func VerifyContext(ctx context.Context, dir string) ([]Problem, error) {
	rep, err := VerifyWith(ctx, dir, Options{})
	return rep.Problems, err
}

// Counter counts the tokens of a text as the pinned tokenizer does (no
// special tokens added). It must be safe for concurrent use.
type Counter interface {
	Count(text string) int
}

// Options are what verification may use beyond the bundle itself.
type Options struct {
	// Tokenizer returns a Counter for the tokenizer that provenance names
	// (provenance.tokenizer.sha256), or an error saying why none is at
	// hand. Nil: output_tokens are not re-counted.
	Tokenizer func(Provenance) (Counter, error)
}

// until is o whose Counter stops counting once ctx ends: each count is
// then 0 at once, so a re-count over every record ends within a text per
// core, and verify returns the interruption without what it found.
func (o Options) until(ctx context.Context) Options {
	find := o.Tokenizer
	if find == nil {
		return o
	}
	o.Tokenizer = func(p Provenance) (Counter, error) {
		c, err := find(p)
		if c == nil || err != nil {
			return c, err
		}
		return stoppingCounter{c, ctx.Done()}, nil
	}
	return o
}

// stoppingCounter is a Counter that counts nothing once done is closed.
type stoppingCounter struct {
	c    Counter
	done <-chan struct{}
}

func (s stoppingCounter) Count(text string) int {
	select {
	case <-s.done:
		return 0
	default:
		return s.c.Count(text)
	}
}

// Report is what verification found.
type Report struct {
	// Problems are what is wrong, one per line; none: the bundle verifies.
	Problems []Problem
	// Notes say what was checked beyond digests and aggregates, or could
	// not be and why ("output_tokens not re-counted: ...").
	Notes []string
	// Records, Waves and Aggregates count what results.json holds.
	Records, Waves, Aggregates int
}

// VerifyWith checks a bundle: every digest of SHA256SUMS, that every file is
// listed, the schema of results.json and every wave and record against SPEC
// §2, each wave's wall time, the mechanism-check maximum, every aggregate
// recomputed from the raw records, every output_tokens re-counted from its
// text (with o.Tokenizer) or checked against the usage it was taken from,
// and, when the bundle keeps its journal, that journal.jsonl holds the
// records and waves results.json does. Only regular files inside dir are
// opened: an entry outside it, a symbolic link, a FIFO or a device is a
// problem naming the entry. It stops when ctx ends, between files and
// within each: the error is then the interruption (IsInterrupted) and the
// problems are those found so far. A dir that is no directory it can
// open is no bundle to find problems in: that is its error (a *FileError
// naming dir, fs.ErrNotExist where it does not exist), as every other
// reader of a bundle gives it (OpenDir).
func VerifyWith(ctx context.Context, dir string, o Options) (Report, error) {
	_, rep, err := verifyDirOpt(ctx, dir, o, true)
	return rep, err
}

// verifyDir verifies dir and returns its results where they could be read.
func verifyDir(ctx context.Context, dir string, o Options) (*Results, Report, error) {
	return verifyDirOpt(ctx, dir, o, false)
}

// verifyDirOpt is verifyDir; stream: the records are not wanted, and a
// bundle verifyStreaming takes is verified without holding them (its
// results then come back without records).
func verifyDirOpt(ctx context.Context, dir string, o Options, stream bool) (*Results, Report, error) {
	var rep Report
	d, err := OpenDir(dir)
	if err != nil {
		return nil, rep, err
	}
	defer d.Close()
	res, err := d.verify(ctx, o, &rep, stream)
	rep.Problems = dedupe(rep.Problems)
	return res, rep, err
}

// verify fills rep and returns the results it read; the error is only the
// interruption.
func (d *Dir) verify(ctx context.Context, o Options, rep *Report, stream bool) (*Results, error) {
	o = o.until(ctx)
	if stream {
		// The digests are checked on the side, while the records stream
		// past on the other cores: their problems come first, as they
		// would checked before.
		type sums struct {
			probs []Problem
			err   error
		}
		hashed := make(chan sums, 1)
		go func() {
			probs, err := d.verifySums(ctx)
			hashed <- sums{probs, err}
		}()
		var srep Report
		// The results come back without their records (ReadVerifiedHead).
		sv, done, err := d.verifyStreaming(ctx, o, &srep)
		h := <-hashed
		rep.Problems = append(rep.Problems, h.probs...)
		if h.err != nil {
			return nil, h.err
		}
		if done {
			rep.Problems = append(rep.Problems, srep.Problems...)
			rep.Notes = append(rep.Notes, srep.Notes...)
			rep.Records, rep.Waves, rep.Aggregates = srep.Records, srep.Waves, srep.Aggregates
			return sv.res, err
		}
	} else {
		probs, err := d.verifySums(ctx)
		rep.Problems = append(rep.Problems, probs...)
		if err != nil {
			return nil, err
		}
	}
	res, err := d.results(ctx)
	var invalid *InvalidError
	recordsChecked := err == nil // the decoder checked them and found nothing
	if errors.As(err, &invalid) {
		// VerifyResults reports each of its problems, with the rest.
		res, err = invalid.Results, nil
	}
	if err != nil {
		if IsInterrupted(ctx, err) {
			return nil, err
		}
		rep.Problems = append(rep.Problems, fileProblem(err))
		return nil, nil
	}
	rep.Records, rep.Waves, rep.Aggregates = len(res.Records), len(res.Waves), len(res.Aggregates)
	rep.Problems = append(rep.Problems, verifyResults(res, recordsChecked)...)
	for _, c := range res.Capacity {
		if note := search.StopNote(c.Server, res.Waves); note != "" {
			rep.Notes = append(rep.Notes, note)
		}
	}
	if ctx.Err() != nil {
		return nil, Interrupted(ctx)
	}
	probs, note := recountTokens(res, o)
	if ctx.Err() != nil {
		return nil, Interrupted(ctx) // the counts stopped: probs are not
	}
	rep.Problems = append(rep.Problems, probs...)
	if note != "" {
		rep.Notes = append(rep.Notes, note)
	}
	probs, err = d.compareJournal(ctx, res)
	rep.Problems = append(rep.Problems, probs...)
	return res, err
}

// fileProblem is the problem of an entry that could not be read.
func fileProblem(err error) Problem {
	var fe *FileError
	if errors.As(err, &fe) {
		return Problem{File: fe.Name, Msg: fe.Msg}
	}
	return Problem{Msg: err.Error()}
}

// dedupe drops repeats of a problem (a FIFO named results.json is both a
// listed file that cannot be hashed and a results.json that cannot be read).
func dedupe(probs []Problem) []Problem {
	seen := map[Problem]bool{}
	out := probs[:0]
	for _, p := range probs {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// verifySums hashes every file SHA256SUMS lists and lists the bundle's
// files: every listed file must match, every file must be listed, and
// every entry must be a regular file. The error is only the interruption.
func (d *Dir) verifySums(ctx context.Context) ([]Problem, error) {
	listed, err := d.sums(ctx)
	if err != nil {
		if IsInterrupted(ctx, err) {
			return nil, err
		}
		return []Problem{fileProblem(err)}, nil
	}
	var probs []Problem
	seen := map[string]bool{}
	for _, l := range listed {
		seen[l.File] = true
		sum, err := d.Hash(ctx, l.File, limitFor(l.File))
		switch {
		case IsInterrupted(ctx, err):
			return probs, err
		case errors.Is(err, fs.ErrNotExist):
			probs = append(probs, Problem{File: l.File, Msg: "listed in SHA256SUMS but missing"})
		case err != nil:
			probs = append(probs, fileProblem(err))
		case sum != l.SHA256:
			probs = append(probs, Problem{File: l.File, Msg: fmt.Sprintf("SHA-256 %s, SHA256SUMS says %s", sum, l.SHA256)})
		}
	}
	files, bad, err := d.Files(ctx)
	if err != nil {
		if IsInterrupted(ctx, err) {
			return probs, err
		}
		return append(probs, fileProblem(err)), nil
	}
	for _, b := range bad {
		probs = append(probs, Problem{File: b.Name, Msg: b.Msg})
	}
	for _, f := range files {
		if !seen[f] {
			probs = append(probs, Problem{File: f, Msg: "not listed in SHA256SUMS"})
		}
	}
	return probs, nil
}

// VerifyResults checks results.json's waves and records against SPEC §2,
// recomputes what it derives from its raw records and reports every
// difference. It does not re-count tokens (VerifyWith does).
func VerifyResults(res *Results) []Problem { return verifyResults(res, false) }

// verifyResults is VerifyResults, less checkRecords where the decoder has
// just run it and found nothing.
func verifyResults(res *Results, recordsChecked bool) []Problem {
	var probs []Problem
	if !recordsChecked {
		probs = checkRecords(res)
	}
	probs = append(probs, checkHeader(res)...)
	probs = append(probs, checkWaveTimes(res)...)
	probs = append(probs, checkHostHonesty(res)...)
	probs = append(probs, checkMechanism(res, mechanismRecords(res, res.Records))...)
	probs = append(probs, checkReplicas(res)...)
	probs = append(probs, checkSLO(res)...)
	probs = append(probs, checkAggregates(res)...)
	probs = append(probs, checkCapacity(res)...)
	probs = append(probs, checkCost(res)...)
	return probs
}

// checkCapacity replays every capacity search from its probe waves' records
// and compares its probes, verdicts and bracket with the stored ones.
func checkCapacity(res *Results) []Problem {
	var probs []Problem
	seen := map[string]bool{}
	for i, c := range res.Capacity {
		at := fmt.Sprintf("capacity[%d]", i)
		if seen[c.Server] {
			probs = append(probs, Problem{File: ResultsFile, Server: c.Server, Field: at, Msg: "a second capacity entry for this server"})
			continue
		}
		seen[c.Server] = true
		if err := contract.CheckAttainmentTarget(c.AttainmentTarget); err != nil {
			probs = append(probs, Problem{File: ResultsFile, Server: c.Server, Field: at + ".attainment_target", Msg: err.Error()})
			continue
		}
		want, err := RecomputeCapacity(res, c)
		if err != nil {
			probs = append(probs, Problem{File: ResultsFile, Server: c.Server, Field: at, Msg: "the search does not replay from the records: " + err.Error()})
			continue
		}
		unstoredSteady(c, &want)
		for _, d := range diffJSON(c, want) {
			probs = append(probs, Problem{File: ResultsFile, Server: c.Server, Field: at + "." + d.path,
				Msg: fmt.Sprintf("stored %s, recomputed %s", d.a, d.b)})
		}
	}
	return probs
}

// unstoredSteady drops from want, the recomputed entry, the steady figures
// of each probe whose stored entry has none (SPEC §4a: checked when
// present, never required; bundles written before them verify).
func unstoredSteady(stored search.Capacity, want *search.Capacity) {
	for i := range want.Probes {
		if i < len(stored.Probes) && stored.Probes[i].Steady == nil {
			want.Probes[i].Steady = nil
		}
	}
}

// checkSLO checks the slo block: an attainment target inside (0, 1), and an
// expr that is its objectives written out (the objectives are what every
// verdict is recomputed against).
func checkSLO(res *Results) []Problem {
	s := res.SLO
	if s == nil {
		return nil
	}
	var probs []Problem
	if s.Objectives.Empty() {
		probs = append(probs, Problem{File: ResultsFile, Field: "slo.objectives", Msg: "no objective set"})
	}
	for _, n := range s.Objectives.Names() {
		v, _ := s.Objectives.Limit(n)
		if err := (&contract.Objectives{}).Set(n, v); err != nil {
			probs = append(probs, Problem{File: ResultsFile, Field: "slo.objectives." + n + "_ms", Msg: err.Error()})
		}
	}
	if err := contract.CheckAttainmentTarget(s.AttainmentTarget); err != nil {
		probs = append(probs, Problem{File: ResultsFile, Field: "slo.attainment_target", Msg: err.Error()})
	}
	if want := s.Objectives.String(); s.Expr != want {
		probs = append(probs, Problem{File: ResultsFile, Field: "slo.expr", Msg: fmt.Sprintf("stored %q, its objectives are %q", s.Expr, want)})
	}
	return probs
}

// checkHeader checks the workload and provenance fields the figures depend
// on: the percentile method they were computed with, what output_tokens
// counts, and a trace's arrivals (one per prompt, never decreasing).
func checkHeader(res *Results) []Problem {
	var probs []Problem
	if m := res.Workload.PercentileMethod; m != "" && !contract.IsPercentileMethod(m) {
		probs = append(probs, Problem{File: ResultsFile, Field: "workload.percentile_method",
			Msg: fmt.Sprintf("%q is not linear interpolation between closest ranks (type 7), the method every figure is recomputed with", m)})
	}
	if a := res.Workload.ArrivalsS; a != nil {
		if len(a) != len(res.Workload.Prompts) {
			probs = append(probs, Problem{File: ResultsFile, Field: "workload.arrivals_s",
				Msg: fmt.Sprintf("%d arrivals for %d prompts", len(a), len(res.Workload.Prompts))})
		}
		for i, x := range a {
			if math.IsNaN(x) || math.IsInf(x, 0) || x < 0 || (i > 0 && x < a[i-1]) {
				probs = append(probs, Problem{File: ResultsFile, Field: fmt.Sprintf("workload.arrivals_s[%d]", i),
					Msg: fmt.Sprintf("%v: arrivals are finite, non-negative seconds that never decrease", x)})
				break
			}
		}
	}
	switch s := res.Provenance.OutputTokensSource; s {
	case "", SourceTokenizer, SourceUsage:
	default:
		probs = append(probs, Problem{File: ResultsFile, Field: "provenance.output_tokens_source",
			Msg: fmt.Sprintf("%q is not %s or %s", s, SourceTokenizer, SourceUsage)})
	}
	return append(probs, checkPromptModels(&res.Workload)...)
}

// checkPromptModels checks workload.prompt_models against the assignment
// that made them: workload.models' names assigned to the prompts as its
// assignment and seed assign them (workload.AssignModels), one per prompt.
func checkPromptModels(wl *Workload) []Problem {
	m := wl.Models
	if m == nil {
		if wl.PromptModels != nil {
			return []Problem{{File: ResultsFile, Field: "workload.prompt_models", Msg: "set, but workload.models says no models were assigned"}}
		}
		return nil
	}
	want, err := workload.AssignModels(m.Names, m.Assignment, m.Seed, len(wl.Prompts))
	if err != nil {
		return []Problem{{File: ResultsFile, Field: "workload.models", Msg: err.Error()}}
	}
	if len(wl.PromptModels) != len(want) {
		return []Problem{{File: ResultsFile, Field: "workload.prompt_models", Msg: fmt.Sprintf("%d models for %d prompts", len(wl.PromptModels), len(want))}}
	}
	for i, got := range wl.PromptModels {
		if got != want[i] {
			return []Problem{{File: ResultsFile, Field: fmt.Sprintf("workload.prompt_models[%d]", i),
				Msg: fmt.Sprintf("%q, but workload.models (%s, seed %d) assigns prompt %d %q", got, m.Assignment, m.Seed, i, want[i])}}
		}
	}
	return nil
}

// checkWaveTimes recomputes each wave's wall_s and, where stored, a closed
// wave's release_spread_s (a sustained or open wave has none: its
// requests are not released together).
func checkWaveTimes(res *Results) []Problem {
	return checkWaveTimesOf(res, waveClocks(res.Records))
}

// waveClocks are the clocks of records' waves, by id.
func waveClocks(records []contract.Record) map[int]*contract.WaveClock {
	clocks := map[int]*contract.WaveClock{}
	for i := range records {
		c := clocks[records[i].Wave]
		if c == nil {
			c = &contract.WaveClock{}
			clocks[records[i].Wave] = c
		}
		c.Add(&records[i])
	}
	return clocks
}

// checkWaveTimesOf is checkWaveTimes with each wave's times from clocks.
func checkWaveTimesOf(res *Results, clocks map[int]*contract.WaveClock) []Problem {
	var probs []Problem
	var none contract.WaveClock
	for i, w := range res.Waves {
		c := clocks[w.ID]
		if c == nil {
			c = &none
		}
		want := c.WallS()
		if !near(w.WallS, want) {
			probs = append(probs, Problem{File: ResultsFile, Server: w.Server, Load: contract.KeyOf(w).LoadLabel(),
				Field: fmt.Sprintf("waves[%d].wall_s", i), Msg: fmt.Sprintf("stored %v, largest end_s of its records is %v", w.WallS, want)})
		}
		if contract.IsClosed(w.Mode) && res.waveHas(i, "release_spread_s") {
			want := c.ReleaseSpreadS()
			if !near(w.ReleaseSpreadS, want) {
				probs = append(probs, Problem{File: ResultsFile, Server: w.Server, Load: contract.KeyOf(w).LoadLabel(),
					Field: fmt.Sprintf("waves[%d].release_spread_s", i), Msg: fmt.Sprintf("stored %v, last start_s minus first of its records is %v", w.ReleaseSpreadS, want)})
			}
		}
	}
	return probs
}

// checkHostHonesty checks the form of each wave's client_stalls and
// server_slip: measured on the host during the wave, they cannot be
// recomputed from records, only found sane (finite, non-negative, counts
// within their totals).
func checkHostHonesty(res *Results) []Problem {
	var probs []Problem
	for i, w := range res.Waves {
		bad := func(field, msg string) {
			probs = append(probs, Problem{File: ResultsFile, Server: w.Server, Load: contract.KeyOf(w).LoadLabel(),
				Field: fmt.Sprintf("waves[%d].%s", i, field), Msg: msg})
		}
		sane := func(field string, v float64) bool {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				bad(field, fmt.Sprintf("%v is not a finite, non-negative number", v))
				return false
			}
			return true
		}
		if st := w.ClientStalls; st != nil {
			ok := sane("client_stalls.period_s", st.PeriodS) && sane("client_stalls.max_s", st.MaxS) && sane("client_stalls.p99_s", st.P99S)
			switch {
			case st.PeriodS == 0:
				bad("client_stalls.period_s", "0: a stall watch wakes at a period")
			case st.Ticks < 1 || st.Over < 0 || st.Over > st.Ticks:
				bad("client_stalls", fmt.Sprintf("%d wake-ups, %d over 20 ms: want at least one wake-up and at most that many over", st.Ticks, st.Over))
			case ok && st.P99S > st.MaxS:
				bad("client_stalls.p99_s", fmt.Sprintf("%v is above max_s %v", st.P99S, st.MaxS))
			}
		}
		if sl := w.ServerSlip; sl != nil {
			sane("server_slip.max_s", sl.MaxS)
			sane("server_slip.slip_s", sl.SlipS)
			if sl.Steps < 0 || sl.Late < 0 || sl.Late > sl.Steps {
				bad("server_slip", fmt.Sprintf("%d steps, %d late: want counts with at most every step late", sl.Steps, sl.Late))
			}
		}
	}
	return probs
}

// checkMechanism checks the mechanism check's maximum against its series,
// what it says it rests on against what was read, and its client's view
// against the records of its wave (mechanismRecords of the bundle's).
func checkMechanism(res *Results, records []contract.Record) []Problem {
	m := res.MechanismCheck
	if m == nil {
		return nil
	}
	var probs []Problem
	bad := func(field, format string, args ...any) {
		probs = append(probs, Problem{File: ResultsFile, Server: m.Server, Field: "mechanism_check." + field, Msg: fmt.Sprintf(format, args...)})
	}
	var max *float64
	for _, s := range m.Series {
		if max == nil || s[1] > *max {
			v := s[1]
			max = &v
		}
	}
	if !closePtr(m.Max, max) {
		bad("max", "stored %s, series maximum %s", fmtPtr(m.Max), fmtPtr(max))
	}
	switch m.Evidence {
	case "", EvidenceMetric:
		if m.Evidence != "" && len(m.Series) == 0 {
			bad("evidence", "%q, but no sample of %s was read: the check rests on the client's records (%q)", m.Evidence, m.Metric, EvidenceClient)
		}
	case EvidenceClient:
		if m.Client == nil {
			bad("client", "absent, yet the check rests on the client's records (evidence %q)", m.Evidence)
		}
	default:
		bad("evidence", "%q is not %q or %q", m.Evidence, EvidenceMetric, EvidenceClient)
	}
	if m.Client != nil {
		want := contract.ClientConcurrencyOf(records)
		for _, d := range diffJSON(m.Client, want) {
			bad("client."+d.path, "stored %s, the records of wave %d give %s", d.a, m.Wave, d.b)
		}
	}
	return probs
}

// mechanismRecords are those of records of the mechanism check's wave.
func mechanismRecords(res *Results, records []contract.Record) []contract.Record {
	m := res.MechanismCheck
	if m == nil {
		return nil
	}
	var out []contract.Record
	for _, r := range records {
		if r.Kind == contract.KindMechanismCheck && r.Wave == m.Wave {
			out = append(out, r)
		}
	}
	return out
}

// aggregateFields are SPEC §4a's figures of an aggregate: a stored
// aggregate must carry them; any other field is checked where it was
// stored. warnings, though SPEC lists it, is the tool's own free text,
// optional and checked only where stored.
var aggregateFields = map[string]bool{
	"server": true, "concurrency": true, "goodput_tok_s": true,
	"ttft_s": true, "tpot_s": true, "itl_s": true, "e2e_s": true,
	"failures": true, "failed_with_content": true, "speedup_vs_baseline": true,
}

// summaryExtras are the fields of a latency summary beyond SPEC §4a's
// {n, p50, p90, p95, p99}: the tail bounds, checked only where the summary
// carried them (a bundle written before them has none).
var summaryExtras = map[string]bool{"p95_ub": true, "p99_ub": true, "p99_min_n": true}

// aggregateChecked reports whether a difference at path (ttft_s.p99_ub,
// goodput_tok_s.median) of aggregates[i] is one verify reports: in a
// field SPEC §4a lists or one the aggregate carried, and, for a latency
// summary's tail bound, one the summary carried.
func (r *Results) aggregateChecked(i int, path string) bool {
	top, rest, _ := strings.Cut(path, ".")
	top, _, _ = strings.Cut(top, "[")
	if sub, _, _ := strings.Cut(rest, "."); summaryExtras[sub] {
		return r.aggregateHas(i, top+"."+sub)
	}
	return aggregateFields[top] || r.aggregateHas(i, top)
}

// checkAggregates recomputes every aggregate from the records and compares
// it with the stored one, field by field.
func checkAggregates(res *Results) []Problem {
	return checkAggregatesOf(res, res.ComputeAggregates())
}

// checkAggregatesOf is checkAggregates against want, the aggregates
// recomputed.
func checkAggregatesOf(res *Results, want []contract.Aggregate) []Problem {
	var probs []Problem
	got := map[contract.Key]int{}
	for i, a := range res.Aggregates {
		k := a.Key()
		if j, dup := got[k]; dup {
			probs = append(probs, Problem{File: ResultsFile, Server: a.Server, Load: a.LoadLabel(),
				Field: fmt.Sprintf("aggregates[%d]", i), Msg: fmt.Sprintf("duplicate of aggregates[%d]", j)})
			continue
		}
		got[k] = i
	}
	wantKeys := map[contract.Key]bool{}
	for _, w := range want {
		k := w.Key()
		wantKeys[k] = true
		load := w.LoadLabel()
		i, ok := got[k]
		if !ok {
			probs = append(probs, Problem{File: ResultsFile, Server: w.Server, Load: load, Field: "aggregates", Msg: "missing: the records have this population but no aggregate does"})
			continue
		}
		for _, d := range diffJSON(res.Aggregates[i], w) {
			if !res.aggregateChecked(i, d.path) {
				continue
			}
			probs = append(probs, Problem{File: ResultsFile, Server: w.Server, Load: load, Field: d.path,
				Msg: fmt.Sprintf("stored %s, recomputed %s", d.a, d.b)})
		}
	}
	for _, a := range res.Aggregates {
		if !wantKeys[a.Key()] {
			probs = append(probs, Problem{File: ResultsFile, Server: a.Server, Load: a.LoadLabel(), Field: "aggregates", Msg: "an aggregate with no recorded records behind it"})
		}
	}
	return probs
}

func near(a, b float64) bool {
	if a == b {
		return true
	}
	d := math.Abs(a - b)
	return d <= absTol || d <= relTol*math.Max(math.Abs(a), math.Abs(b))
}

func closePtr(a, b *float64) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return near(*a, *b)
}

func fmtPtr(v *float64) string {
	if v == nil {
		return "null"
	}
	return fmt.Sprint(*v)
}

// diff is one difference between two JSON values: its path and the two
// sides, as short JSON.
type diff struct{ path, a, b string }

// diffJSON compares the JSON forms of two values, numbers within tolerance,
// and names each difference by its JSON path.
func diffJSON(a, b any) []diff {
	var av, bv any
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	_ = json.Unmarshal(ja, &av)
	_ = json.Unmarshal(jb, &bv)
	var out []diff
	walkDiff("", av, bv, &out)
	return out
}

func walkDiff(path string, a, b any, out *[]diff) {
	differ := func() { *out = append(*out, diff{path, short(a), short(b)}) }
	switch bv := b.(type) {
	case map[string]any:
		av, ok := a.(map[string]any)
		if !ok {
			differ()
			return
		}
		keys := map[string]bool{}
		for k := range av {
			keys[k] = true
		}
		for k := range bv {
			keys[k] = true
		}
		sorted := slices.Sorted(maps.Keys(keys))
		for _, k := range sorted {
			p := k
			if path != "" {
				p = path + "." + k
			}
			walkDiff(p, av[k], bv[k], out)
		}
	case []any:
		av, ok := a.([]any)
		if !ok || len(av) != len(bv) {
			differ()
			return
		}
		for i := range bv {
			walkDiff(fmt.Sprintf("%s[%d]", path, i), av[i], bv[i], out)
		}
	case float64:
		av, ok := a.(float64)
		if !ok || !near(av, bv) {
			differ()
		}
	default:
		if fmt.Sprint(a) != fmt.Sprint(b) {
			differ()
		}
	}
}

func short(v any) string {
	if v == nil {
		return "null"
	}
	j, _ := json.Marshal(v)
	s := string(j)
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}
