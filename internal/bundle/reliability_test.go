package bundle_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/bundle/bundletest"
	"github.com/rehearse/rehearse/internal/contract"
)

// wordCounter counts the tokens of bundletest's texts (" the" repeated):
// one per word, as the Qwen tokenizer counts them, without loading it.
type wordCounter struct{}

func (wordCounter) Count(text string) int { return len(strings.Fields(text)) }

// writeJournal writes res as the journal of a rehearsal would hold it:
// each wave at its release and again at its end, the records between.
func writeJournal(t *testing.T, dir string, res *bundle.Results) {
	t.Helper()
	j, err := bundle.CreateJournal(filepath.Join(dir, bundle.JournalFile))
	if err != nil {
		t.Fatal(err)
	}
	j.WriteHeader(res)
	for _, w := range res.Waves {
		j.WriteWave(w)
	}
	for _, r := range res.Records {
		j.WriteRecord(r)
	}
	for _, w := range res.Waves {
		j.WriteWave(w)
	}
	if res.MechanismCheck != nil {
		j.WriteMechanismCheck(*res.MechanismCheck)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
}

// firstRecord returns the index of the first record of a recorded wave
// that satisfies keep.
func firstRecord(t *testing.T, res *bundle.Results, keep func(contract.Record) bool) int {
	t.Helper()
	for i, r := range res.Records {
		if r.Kind == contract.KindRecorded && keep(r) {
			return i
		}
	}
	t.Fatal("no such record in bundletest.SeedLike")
	return -1
}

// firstAggregate is the index of the first aggregate that keep keeps.
func firstAggregate(t *testing.T, res *bundle.Results, keep func(contract.Aggregate) bool) int {
	t.Helper()
	for i, a := range res.Aggregates {
		if keep(a) {
			return i
		}
	}
	t.Fatal("no such aggregate in bundletest.SeedLike")
	return -1
}

// asSession makes an OK record of a recorded wave the first turn of a
// session of the workload (prompts 0 then 1), and a copy of another OK
// record of that wave, added at the end, its second turn sent by the same
// client after the first ended, and returns their indices.
func asSession(t *testing.T, r *bundle.Results) (int, int) {
	t.Helper()
	first, second := -1, -1
	for i, a := range r.Records {
		for j, b := range r.Records {
			if second < 0 && i != j && a.Kind == contract.KindRecorded && a.Wave == b.Wave && isOK(a) && b.OK {
				first, second = i, j
			}
		}
	}
	if second < 0 {
		t.Fatal("no wave of two OK records in bundletest.SeedLike")
	}
	r.Workload.Sessions = []bundle.Session{{Turns: []int{0, 1}}}
	s := 0
	r.Records = append(r.Records, r.Records[second])
	second = len(r.Records) - 1
	r.Records[second].ChunkTimesS = slices.Clone(r.Records[second].ChunkTimesS)
	a, b := &r.Records[first], &r.Records[second]
	a.Session, a.Turn, a.Prompt = &s, 1, 0
	b.Session, b.Turn, b.Prompt, b.Client = &s, 2, 1, a.Client
	shift(b, a.EndS-b.StartS+0.01)
	return first, second
}

// shift moves every time of rec by d seconds.
func shift(rec *contract.Record, d float64) {
	rec.StartS += d
	rec.EndS += d
	if rec.FirstContentS != nil {
		v := *rec.FirstContentS + d
		rec.FirstContentS = &v
	}
	for j := range rec.ChunkTimesS {
		rec.ChunkTimesS[j] += d
	}
}

// TestReliabilitySessionVerifies: the session asSession makes is valid.
func TestReliabilitySessionVerifies(t *testing.T) {
	dir := writeRow(t, func(t *testing.T, r *bundle.Results) { asSession(t, r) }, nil, false)
	if probs := verifyAll(t, dir); len(probs) != 0 {
		t.Fatalf("a valid session must verify, got %q", probs)
	}
}

func isOK(r contract.Record) bool { return r.OK && len(r.ChunkTimesS) > 2 }
func isFailedWithContent(r contract.Record) bool {
	return !r.OK && r.FirstContentS != nil && len(r.ChunkTimesS) > 2
}

// reliabilityRows are corruptions of a valid bundle, each with the problem
// verify must report. edit changes results.json; unless keepAggregates is
// set, the wave times and aggregates are then recomputed so that only the
// check under test can catch the corruption. journal, when set, changes the
// journal written beside results.json (no journal is written otherwise).
type reliabilityRow struct {
	name           string
	edit           func(t *testing.T, r *bundle.Results)
	journal        func(t *testing.T, r *bundle.Results)
	keepAggregates bool
	want           string
}

var reliabilityRows = []reliabilityRow{
	{name: "unknown error_kind", edit: func(t *testing.T, r *bundle.Results) {
		r.Records[firstRecord(t, r, isFailedWithContent)].ErrorKind = "gremlins"
	}, want: `.error_kind: "gremlins" is not a failure kind`},
	{name: "ok with an error_kind", edit: func(t *testing.T, r *bundle.Results) {
		r.Records[firstRecord(t, r, isOK)].ErrorKind = contract.ErrTimeout
	}, want: `.ok: true with error_kind "timeout"`},
	{name: "failed without error_kind", edit: func(t *testing.T, r *bundle.Results) {
		r.Records[firstRecord(t, r, isFailedWithContent)].ErrorKind = ""
	}, want: ".ok: false without an error_kind"},
	{name: "negative retry_after_s", edit: func(t *testing.T, r *bundle.Results) {
		rec := &r.Records[firstRecord(t, r, isFailedWithContent)]
		rec.HTTPStatus, rec.RetryAfterS = 429, new(-3.0)
	}, want: ".retry_after_s: -3 is not a number of seconds"},
	{name: "retry_after_s on a record that is not a 429 or 503", edit: func(t *testing.T, r *bundle.Results) {
		r.Records[firstRecord(t, r, isOK)].RetryAfterS = new(5.0)
	}, want: ".retry_after_s: 5 on a record of http_status"},
	{name: "negative start_s", edit: func(t *testing.T, r *bundle.Results) {
		r.Records[firstRecord(t, r, isOK)].StartS = -0.5
	}, want: ".start_s: -0.5 is negative"},
	{name: "negative intended_start_s", edit: func(t *testing.T, r *bundle.Results) {
		r.Records[firstRecord(t, r, isOK)].IntendedStartS = -2
	}, want: ".intended_start_s: -2 is negative"},
	{name: "end before start", edit: func(t *testing.T, r *bundle.Results) {
		rec := &r.Records[firstRecord(t, r, func(r contract.Record) bool { return r.StartS > 0 })]
		rec.EndS = rec.StartS / 2
	}, want: "is before start_s"},
	{name: "negative end_s", edit: func(t *testing.T, r *bundle.Results) {
		r.Records[firstRecord(t, r, isFailedWithContent)].EndS = -1
	}, want: ".end_s: -1 is negative"},
	{name: "NaN-like huge end_s", edit: func(t *testing.T, r *bundle.Results) {
		r.Records[firstRecord(t, r, isOK)].EndS = 1e300
	}, want: ".end_s: 1e+300 is beyond"},
	{name: "first content before start", edit: func(t *testing.T, r *bundle.Results) {
		rec := &r.Records[firstRecord(t, r, isOK)]
		rec.StartS = rec.ChunkTimesS[1]
	}, want: ".first_content_s: "},
	{name: "chunk times not in order", edit: func(t *testing.T, r *bundle.Results) {
		rec := &r.Records[firstRecord(t, r, isOK)]
		rec.ChunkTimesS[1], rec.ChunkTimesS[2] = rec.ChunkTimesS[2], rec.ChunkTimesS[1]
	}, want: ".chunk_times_s[2]: "},
	{name: "chunk after the end of the request", edit: func(t *testing.T, r *bundle.Results) {
		rec := &r.Records[firstRecord(t, r, isOK)]
		rec.ChunkTimesS[len(rec.ChunkTimesS)-1] = rec.EndS + 1
	}, want: "after end_s"},
	{name: "first_content_s not the first chunk", edit: func(t *testing.T, r *bundle.Results) {
		rec := &r.Records[firstRecord(t, r, isOK)]
		v := rec.ChunkTimesS[1]
		rec.FirstContentS = &v
	}, want: ".first_content_s: "},
	{name: "first_content_s null with chunks", edit: func(t *testing.T, r *bundle.Results) {
		r.Records[firstRecord(t, r, isOK)].FirstContentS = nil
	}, want: ".first_content_s: null"},
	{name: "chunks without text", edit: func(t *testing.T, r *bundle.Results) {
		rec := &r.Records[firstRecord(t, r, isFailedWithContent)]
		rec.Text, rec.OutputTokens = "", 0
	}, want: ".text: empty"},
	{name: "negative output_tokens", edit: func(t *testing.T, r *bundle.Results) {
		r.Records[firstRecord(t, r, isFailedWithContent)].OutputTokens = -3
	}, want: ".output_tokens: -3 is negative"},
	{name: "negative usage_completion_tokens", edit: func(t *testing.T, r *bundle.Results) {
		v := -1
		r.Records[firstRecord(t, r, isOK)].UsageCompletionTokens = &v
	}, want: ".usage_completion_tokens: -1 is negative"},
	{name: "huge output_tokens", edit: func(t *testing.T, r *bundle.Results) {
		r.Records[firstRecord(t, r, isOK)].OutputTokens = 1 << 60
	}, want: ".output_tokens: 1152921504606846976 "},
	{name: "5000 tokens for hello world", edit: func(t *testing.T, r *bundle.Results) {
		rec := &r.Records[firstRecord(t, r, isOK)]
		rec.Text, rec.OutputTokens = "hello world", 5000
	}, want: ".output_tokens: 5000"},
	{name: "wrong output_tokens", edit: func(t *testing.T, r *bundle.Results) {
		r.Records[firstRecord(t, r, isOK)].OutputTokens--
	}, want: "re-counted"},
	{name: "prompt index past the prompt list", edit: func(t *testing.T, r *bundle.Results) {
		r.Records[firstRecord(t, r, isOK)].Prompt = len(r.Workload.Prompts)
	}, want: ".prompt: 2 is not an index into workload.prompts (2 prompts)"},
	{name: "negative client", edit: func(t *testing.T, r *bundle.Results) {
		r.Records[firstRecord(t, r, isOK)].Client = -1
	}, want: ".client: -1 is negative"},
	{name: "record pointing at a missing wave", edit: func(t *testing.T, r *bundle.Results) {
		r.Records[firstRecord(t, r, isOK)].Wave = 999
	}, want: ".wave: wave 999 does not exist"},
	{name: "record disagreeing with its wave", edit: func(t *testing.T, r *bundle.Results) {
		r.Records[firstRecord(t, r, isOK)].Server = "batching"
	}, want: `.server: "batching", its wave 0 says "naive"`},
	{name: "duplicate wave ids", edit: func(t *testing.T, r *bundle.Results) {
		r.Waves[2].ID = r.Waves[1].ID
	}, want: "waves[2].id: 1 is also the id of waves[1]"},
	{name: "unknown wave kind", edit: func(t *testing.T, r *bundle.Results) {
		r.Waves[1].Kind = "rehearsal"
	}, want: `waves[1].kind: "rehearsal" is not`},
	{name: "unknown wave mode", edit: func(t *testing.T, r *bundle.Results) {
		r.Waves[1].Mode = "burst"
	}, want: `waves[1].mode: "burst" is not`},
	{name: "wave started_at not RFC 3339", edit: func(t *testing.T, r *bundle.Results) {
		r.Waves[1].StartedAt = "yesterday"
	}, want: `waves[1].started_at: "yesterday" is not`},
	{name: "stored wave wall_s that disagrees", keepAggregates: true, edit: func(t *testing.T, r *bundle.Results) {
		r.Waves[1].WallS++
	}, want: "waves[1].wall_s: stored"},
	{name: "stored aggregate that disagrees", keepAggregates: true, edit: func(t *testing.T, r *bundle.Results) {
		v := *r.Aggregates[0].TTFT.P95 / 2
		r.Aggregates[0].TTFT.P95 = &v
	}, want: "ttft_s.p95: stored"},
	{name: "stored mechanism-check maximum that disagrees", keepAggregates: true, edit: func(t *testing.T, r *bundle.Results) {
		*r.MechanismCheck.Max++
	}, want: "mechanism_check.max: stored"},
	{name: "reasoning_tokens that disagree with the reasoning text", edit: func(t *testing.T, r *bundle.Results) {
		rec := &r.Records[firstRecord(t, r, isOK)]
		n := 4
		rec.ReasoningText, rec.ReasoningTokens = " a b c", &n
	}, want: "reasoning_tokens: stored 4, its reasoning_text re-counted with the tokenizer is 3"},
	{name: "reasoning text without reasoning_tokens", edit: func(t *testing.T, r *bundle.Results) {
		r.Records[firstRecord(t, r, isOK)].ReasoningText = " a b c"
	}, want: "reasoning_tokens: null, but reasoning_text has 6 bytes"},
	{name: "first_token_s after first_content_s", edit: func(t *testing.T, r *bundle.Results) {
		rec := &r.Records[firstRecord(t, r, isOK)]
		v := (*rec.FirstContentS + rec.EndS) / 2
		rec.FirstTokenS = &v
	}, want: "first_token_s: "},
	{name: "stored p99_ub that disagrees", keepAggregates: true, edit: func(t *testing.T, r *bundle.Results) {
		a := &r.Aggregates[firstAggregate(t, r, func(a contract.Aggregate) bool { return a.ITL.P99UB != nil })]
		v := *a.ITL.P99UB * 1.5
		a.ITL.P99UB = &v
	}, want: "itl_s.p99_ub: stored"},
	{name: "stored p95_ub null where the sample gives one", keepAggregates: true, edit: func(t *testing.T, r *bundle.Results) {
		r.Aggregates[firstAggregate(t, r, func(a contract.Aggregate) bool { return a.E2E.P95UB != nil })].E2E.P95UB = nil
	}, want: "e2e_s.p95_ub: stored null, recomputed"},
	{name: "stored p99_min_n that disagrees", keepAggregates: true, edit: func(t *testing.T, r *bundle.Results) {
		r.Aggregates[0].TTFT.P99MinN = 100
	}, want: "ttft_s.p99_min_n: stored 100, recomputed 299"},
	{name: "stored ttft_any_s that disagrees", keepAggregates: true, edit: func(t *testing.T, r *bundle.Results) {
		v := *r.Aggregates[0].TTFTAny.P50 / 2
		r.Aggregates[0].TTFTAny.P50 = &v
	}, want: "ttft_any_s.p50: stored"},
	{name: "stored reasoning tokens that disagree", keepAggregates: true, edit: func(t *testing.T, r *bundle.Results) {
		rec := &r.Records[firstRecord(t, r, isOK)]
		n := 3
		rec.ReasoningText, rec.ReasoningTokens = " a b c", &n
		r.Recompute()
		*r.Aggregates[0].ReasoningTokens += 5
	}, want: "reasoning_tokens: stored"},
	{name: "nearest-rank percentiles", edit: func(t *testing.T, r *bundle.Results) {
		r.Workload.PercentileMethod = "nearest"
	}, want: `workload.percentile_method: "nearest" is not`},
	{name: "unknown output_tokens_source", edit: func(t *testing.T, r *bundle.Results) {
		r.Provenance.OutputTokensSource = "guess"
	}, want: `provenance.output_tokens_source: "guess" is not`},
	{name: "output_tokens disagreeing with the usage it was taken from", edit: func(t *testing.T, r *bundle.Results) {
		r.Provenance.OutputTokensSource = "usage"
		rec := &r.Records[firstRecord(t, r, isOK)]
		v := rec.OutputTokens + 7
		rec.UsageCompletionTokens = &v
	}, want: "usage_completion_tokens"},
	{name: "session turn sent before the turn before it ended", edit: func(t *testing.T, r *bundle.Results) {
		first, second := asSession(t, r)
		shift(&r.Records[second], r.Records[first].EndS-r.Records[second].StartS-0.001)
	}, want: "is before end_s"},
	{name: "session turn after a failed turn", edit: func(t *testing.T, r *bundle.Results) {
		first, _ := asSession(t, r)
		rec := &r.Records[first]
		rec.OK, rec.ErrorKind = false, contract.ErrTimeout
	}, want: "failed, which ends a session"},
	{name: "session turn without the turn before it", edit: func(t *testing.T, r *bundle.Results) {
		first, _ := asSession(t, r)
		r.Records[first].Client = 99
	}, want: "sent no turn 1 of it before"},
	{name: "turn without a session", edit: func(t *testing.T, r *bundle.Results) {
		r.Records[0].Turn = 2
	}, want: ".turn: 2 without a session"},
	{name: "session past workload.sessions", edit: func(t *testing.T, r *bundle.Results) {
		_, second := asSession(t, r)
		s := 3
		r.Records[second].Session = &s
	}, want: "is not an index into workload.sessions"},
	{name: "session turn's prompt not the session's", edit: func(t *testing.T, r *bundle.Results) {
		_, second := asSession(t, r)
		r.Records[second].Prompt = 0
	}, want: "but turn 2 of session 0 is prompt 1"},
	{name: "closed wave with a record duplicated", edit: func(t *testing.T, r *bundle.Results) {
		r.Records = append(r.Records, r.Records[firstRecord(t, r, isOK)])
	}, want: "sent a second request in a closed wave (one per client)"},
	{name: "closed wave with a record dropped", edit: func(t *testing.T, r *bundle.Results) {
		i := firstRecord(t, r, func(r contract.Record) bool { return r.Concurrency == 8 && r.Client == 3 })
		r.Records = slices.Delete(r.Records, i, i+1)
	}, want: "7 of its 8 clients have a record (client 3 has none) and the wave was not stopped"},
	{name: "journal with a record fewer", journal: func(t *testing.T, r *bundle.Results) {
		r.Records = r.Records[:len(r.Records)-1]
	}, want: "journal.jsonl: 277 records, results.json 278"},
	{name: "journal record that differs", journal: func(t *testing.T, r *bundle.Results) {
		r.Records[17].EndS += 0.5
	}, want: "journal.jsonl: records[17].end_s: journal "},
	{name: "journal wave that differs", journal: func(t *testing.T, r *bundle.Results) {
		r.Waves[3].StartedAt = "2026-11-30T11:00:00Z"
	}, want: "journal.jsonl: waves[3].started_at: journal "},
}

// TestReliabilityBadRecords corrupts a valid bundle one way per row and
// checks that verify reports the corruption, in one line naming the file
// and the field.
func TestReliabilityBadRecords(t *testing.T) {
	if probs := verifyAll(t, writeRow(t, nil, nil, false)); len(probs) != 0 {
		t.Fatalf("the uncorrupted bundle must verify, got %q", probs)
	}
	for _, row := range reliabilityRows {
		t.Run(row.name, func(t *testing.T) {
			probs := verifyAll(t, writeRow(t, row.edit, row.journal, row.keepAggregates))
			found := false
			for _, p := range probs {
				if strings.Contains(p, "\n") {
					t.Errorf("multi-line problem %q", p)
				}
				found = found || strings.Contains(p, row.want)
			}
			if !found {
				t.Errorf("no problem contains %q; got %q", row.want, probs)
			}
		})
	}
}

func writeRow(t *testing.T, edit, journal func(*testing.T, *bundle.Results), keepAggregates bool) string {
	t.Helper()
	res := bundletest.SeedLike()
	dir := t.TempDir()
	if journal != nil {
		j := bundletest.SeedLike()
		journal(t, j)
		writeJournal(t, dir, j)
	}
	if edit != nil {
		edit(t, res)
		if !keepAggregates {
			bundle.FixWaveTimes(res)
			res.Recompute()
		}
	}
	if err := bundle.WriteResults(dir, res); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "naive.log"), []byte("INFO started\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := bundle.WriteSumsKnown(dir, nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

func verifyAll(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	rep, _ := bundle.VerifyWith(context.Background(), dir, bundle.Options{Tokenizer: func(bundle.Provenance) (bundle.Counter, error) { return wordCounter{}, nil }})
	for _, p := range rep.Problems {
		out = append(out, p.String())
	}
	return out
}

// A results.json that breaks SPEC §2 in several places is refused by every
// other reader, but verify lists each problem and still recomputes the rest.
func TestVerifyListsEveryProblemOfAnInvalidFile(t *testing.T) {
	dir := writeRow(t, func(t *testing.T, r *bundle.Results) {
		r.Records[0].StartS = -1
		r.Records[5].ErrorKind = "gremlins"
		r.Records[6].Prompt = 7
		r.Aggregates[0].Failures.Count = 99
	}, nil, true)
	if _, err := bundle.ReadResults(dir); err == nil || !strings.Contains(err.Error(), "records[0].start_s: -1 is negative (and 2 more problems; rehearse verify lists them)") {
		t.Errorf("ReadResults: %v", err)
	}
	probs := strings.Join(verifyAll(t, dir), "\n")
	for _, want := range []string{"records[0].start_s: -1 is negative", `records[5].error_kind: "gremlins"`, "records[6].prompt: 7", "failures.count: stored 99"} {
		if !strings.Contains(probs, want) {
			t.Errorf("problems %q do not contain %q", probs, want)
		}
	}
}

// TestVerifyStreamingIsVerifyHeld runs every corruption of
// TestReliabilityBadRecords (and none) through verify as it streams the
// records and as it holds them: where the streaming path takes the bundle,
// its report must be the held one's, problem for problem and note for note.
func TestVerifyStreamingIsVerifyHeld(t *testing.T) {
	o := bundle.Options{Tokenizer: func(bundle.Provenance) (bundle.Counter, error) { return wordCounter{}, nil }}
	same := func(*testing.T, *bundle.Results) {}
	withSLO := func(t *testing.T, r *bundle.Results) {
		o, err := contract.ParseObjectives("ttft<=500ms,tpot<=50ms,itl<=80ms")
		if err != nil {
			t.Fatal(err)
		}
		r.SLO = contract.NewSLO(o, 0.9)
	}
	rows := append([]reliabilityRow{{name: "uncorrupted"}, {name: "uncorrupted, its journal", journal: same},
		{name: "with an SLO", edit: withSLO},
		{name: "with an SLO, a good count raised", keepAggregates: true, edit: func(t *testing.T, r *bundle.Results) {
			withSLO(t, r)
			r.Recompute()
			r.Aggregates[0].SLO.Good++
		}},
		{name: "with an SLO, an objective changed", keepAggregates: true, edit: func(t *testing.T, r *bundle.Results) {
			withSLO(t, r)
			r.Recompute()
			v := 400.0
			r.SLO.Objectives.TTFTMS = &v
		}},
		{name: "with replicas", edit: withReplicas},
		{name: "with replicas, a replica's count raised", keepAggregates: true, edit: func(t *testing.T, r *bundle.Results) {
			withReplicas(t, r)
			r.Recompute()
			for i := range r.Aggregates {
				if r.Aggregates[i].ReplicaRequests != nil {
					r.Aggregates[i].ReplicaRequests[1]++
					return
				}
			}
			t.Fatal("no aggregate with replica requests")
		}},
		{name: "with replicas, a record's replica out of range", keepAggregates: true, edit: func(t *testing.T, r *bundle.Results) {
			withReplicas(t, r)
			r.Recompute()
			k := 7
			r.Records[len(r.Records)-1].Replica = &k
		}},
	}, reliabilityRows...)
	took, slo, replicas := 0, 0, 0
	for _, row := range rows {
		dir := writeRow(t, row.edit, row.journal, row.keepAggregates)
		streamed, ok, whole, held := bundle.VerifyBothWays(dir, o)
		if !ok {
			continue
		}
		took++
		if strings.HasPrefix(row.name, "with an SLO") {
			slo++
		}
		if strings.HasPrefix(row.name, "with replicas") {
			replicas++
			want := "replica_requests"
			if strings.Contains(row.name, "out of range") {
				want = "is not one of the server's 2 replicas"
			}
			if row.keepAggregates && !strings.Contains(problems(streamed.Problems), want) {
				t.Errorf("%s: the streaming path misses it:\n%s", row.name, problems(streamed.Problems))
			}
		}
		if whole && row.name == "uncorrupted, its journal" {
			t.Errorf("%s: the records were read whole for a journal that holds them", row.name)
		}
		if !reflect.DeepEqual(streamed, held) {
			t.Errorf("%s: streamed\n%+v\nheld\n%+v", row.name, streamed, held)
		}
	}
	if replicas != 3 {
		t.Errorf("the streaming path took %d of the 3 bundles with replicas", replicas)
	}
	if slo != 3 {
		t.Errorf("the streaming path took %d of the 3 bundles with an SLO", slo)
	}
	if took < len(rows)/2 {
		t.Errorf("the streaming path took %d of %d bundles", took, len(rows))
	}
	t.Logf("the streaming path took %d of %d bundles", took, len(rows))
}

// withReplicas makes every server of r two client-balanced replicas on
// GPUs 0 and 1, its records alternating between them by client.
func withReplicas(_ *testing.T, r *bundle.Results) {
	for i := range r.Servers {
		r.Servers[i].GPUs = [][]int{{0}, {1}}
		r.Servers[i].Balance = "round-robin"
		r.Servers[i].Replicas = []bundle.Replica{{Index: 0, BaseURL: "http://127.0.0.1:1"}, {Index: 1, BaseURL: "http://127.0.0.1:2"}}
	}
	for i := range r.Records {
		k := r.Records[i].Client % 2
		r.Records[i].Replica = &k
	}
}
