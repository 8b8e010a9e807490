package bundle

import (
	"fmt"

	"runtime"
	"sync"

	"github.com/rehearse/rehearse/internal/contract"
)

// recountTokens re-counts every record's output_tokens from its text with
// the tokenizer provenance names, when o finds it, and returns the records
// that disagree and a note saying what was done. Output tokens taken from
// the server's usage are checked against it by checkRecord instead.
func recountTokens(res *Results, o Options) ([]Problem, string) {
	c, note := recountCounter(res, o, len(res.Records))
	if c == nil {
		return nil, note
	}
	sha := res.Provenance.Tokenizer.SHA256
	bad := recount(res, c)
	waves := wavesByID(res.Waves)
	probs := make([]Problem, 0, len(bad))
	reasoning, redacted := 0, 0
	for _, m := range bad {
		rec := &res.Records[m.index]
		probs = append(probs, miscountProblem(m, rec, waves))
	}
	for i := range res.Records {
		if res.Records[i].Redacted {
			redacted++
		} else if res.Records[i].ReasoningTokens != nil {
			reasoning++
		}
	}
	note = recountNote(len(res.Records), reasoning, redacted, sha)
	inputs, n := recountInputs(res, c, waves)
	if n > 0 {
		probs = append(probs, inputs...)
		note += fmt.Sprintf("; input_tokens of %d records from their prompts", n)
	}
	return probs, note
}

// recountCounter is the Counter output_tokens are re-counted with, or nil
// and the note that says why they are not (or "" where nothing is to
// say), for results of that many records.
func recountCounter(res *Results, o Options, records int) (Counter, string) {
	switch res.Provenance.OutputTokensSource {
	case SourceUsage:
		return nil, "output_tokens checked against usage_completion_tokens (provenance.output_tokens_source is usage)"
	case "", SourceTokenizer:
	default:
		return nil, "" // checkHeader names the unknown source
	}
	if records == 0 {
		return nil, ""
	}
	sha := res.Provenance.Tokenizer.SHA256
	if o.Tokenizer == nil {
		return nil, fmt.Sprintf("output_tokens not re-counted: no tokenizer lookup was given (provenance names sha256 %s)", orNone(sha))
	}
	c, err := o.Tokenizer(res.Provenance)
	if err != nil {
		return nil, "output_tokens not re-counted: " + err.Error()
	}
	if c == nil {
		return nil, fmt.Sprintf("output_tokens not re-counted: no tokenizer with sha256 %s at hand", orNone(sha))
	}
	return c, ""
}

// recountNote says what was re-counted: the records but the redacted ones
// (of records in all), whose tokens were counted before a secret in their
// text was replaced.
func recountNote(records, reasoning, redacted int, sha string) string {
	note := fmt.Sprintf("output_tokens of %d records re-counted from their text with the tokenizer of sha256 %s", records-redacted, sha)
	if reasoning > 0 {
		note += fmt.Sprintf("; reasoning_tokens of %d records from their reasoning_text", reasoning)
	}
	if redacted > 0 {
		note += fmt.Sprintf("; %d redacted records not re-counted (their tokens were counted before a secret was scrubbed from their text)", redacted)
	}
	return note
}

// miscountProblem is the problem of a miscounted record.
func miscountProblem(m miscount, rec *contract.Record, waves map[int]contract.Wave) Problem {
	if m.reasoning {
		return Problem{File: ResultsFile, Server: rec.Server, Load: recordLabel(waves, rec),
			Field: fmt.Sprintf("records[%d].reasoning_tokens", m.index),
			Msg:   fmt.Sprintf("stored %d, its reasoning_text re-counted with the tokenizer is %d", *rec.ReasoningTokens, m.count)}
	}
	return Problem{File: ResultsFile, Server: rec.Server, Load: recordLabel(waves, rec),
		Field: fmt.Sprintf("records[%d].output_tokens", m.index),
		Msg:   fmt.Sprintf("stored %d, its text re-counted with the tokenizer is %d", rec.OutputTokens, m.count)}
}

// inputProblem is the problem of a record whose input_tokens is not want,
// or nil.
func inputProblem(i int, rec *contract.Record, want int, waves map[int]contract.Wave) *Problem {
	if *rec.InputTokens == want {
		return nil
	}
	return &Problem{File: ResultsFile, Server: rec.Server, Load: recordLabel(waves, rec),
		Field: fmt.Sprintf("records[%d].input_tokens", i),
		Msg:   fmt.Sprintf("stored %d, prompt %d%s re-counted with the tokenizer is %d", *rec.InputTokens, rec.Prompt, historyNote(rec), want)}
}

// promptCount is the tokens of prompt p's message contents, counted with c.
func promptCount(wl *Workload, c Counter, p int) int {
	if p < len(wl.PromptMessages) && wl.PromptMessages[p] != nil {
		want := 0
		for _, m := range wl.PromptMessages[p] {
			want += c.Count(m.Content)
		}
		return want
	}
	return c.Count(wl.Prompts[p])
}

// recountInputs re-counts the input_tokens of every record that has one
// from its prompt's message contents, each prompt counted once, and
// returns the records that disagree and how many were checked.
func recountInputs(res *Results, c Counter, waves map[int]contract.Wave) ([]Problem, int) {
	c = newMemo(c)
	wl := &res.Workload
	counted := map[int]int{}
	count := func(p int) int {
		want, ok := counted[p]
		if !ok {
			want = promptCount(wl, c, p)
			counted[p] = want
		}
		return want
	}
	var prev map[int]int // a session turn's turn before, where there are sessions
	var probs []Problem
	n := 0
	for i := range res.Records {
		rec := &res.Records[i]
		if rec.InputTokens == nil || rec.Prompt < 0 || rec.Prompt >= len(wl.Prompts) {
			continue
		}
		var want int
		if rec.Turn > 0 && rec.Session != nil {
			// A turn sent its session's history: the prompts of its
			// turns so far and the replies before it.
			if prev == nil {
				_, prev = sessionRuns(res, waves)
			}
			ok := true
			for j := i; ; {
				r := &res.Records[j]
				if r.Prompt < 0 || r.Prompt >= len(wl.Prompts) {
					ok = false
					break
				}
				want += count(r.Prompt)
				if r.Turn <= 1 {
					break
				}
				k, found := prev[j]
				if !found || res.Records[k].Redacted {
					// checkRecords reports a broken session; a redacted
					// reply is no longer the history that was sent.
					ok = false
					break
				}
				want += c.Count(res.Records[k].Text)
				j = k
			}
			if !ok {
				continue
			}
		} else {
			want = count(rec.Prompt)
		}
		n++
		if p := inputProblem(i, rec, want, waves); p != nil {
			probs = append(probs, *p)
		}
	}
	return probs, n
}

// historyNote says, for a session's later turn, that its count includes
// its history.
func historyNote(rec *contract.Record) string {
	if rec.Turn > 1 {
		return fmt.Sprintf(" with the history of its turn %d", rec.Turn)
	}
	return ""
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// miscount is a record whose stored count differs from its text's:
// output_tokens, or (reasoning) reasoning_tokens.
type miscount struct {
	index, count int
	reasoning    bool
}

// recount counts every record's text (and reasoning_text, where it has a
// reasoning_tokens) with c on all cores, each core taking
// a contiguous share of the records, and returns the records whose
// output_tokens differ, in record order. Records whose output_tokens cannot
// fit their text at all were reported by checkRecord and are skipped.
func recount(res *Results, c Counter) []miscount {
	recs := res.Records
	workers := max(1, min(runtime.GOMAXPROCS(0), len(recs)/256))
	share := (len(recs) + workers - 1) / workers
	found := make([][]miscount, workers)
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := w*share, min(len(recs), (w+1)*share)
		wg.Go(func() {
			c := newMemo(c)
			for i := lo; i < hi; i++ {
				found[w] = recountOne(i, &recs[i], c, found[w])
			}
		})
	}
	wg.Wait()
	var out []miscount
	for _, f := range found {
		out = append(out, f...)
	}
	return out
}

// recountOne appends rec's miscounts (rec is the i-th record) to found.
func recountOne(i int, rec *contract.Record, c Counter, found []miscount) []miscount {
	if rec.Redacted {
		return found // counted before its secret was scrubbed
	}
	if r := rec.ReasoningTokens; r != nil && *r >= 0 && *r <= maxCount && rec.ReasoningText != "" {
		if n := c.Count(rec.ReasoningText); n != *r {
			found = append(found, miscount{i, n, true})
		}
	}
	if rec.OutputTokens < 0 || rec.OutputTokens > maxCount || tokensForText(rec) != "" {
		return found
	}
	if n := c.Count(rec.Text); n != rec.OutputTokens {
		found = append(found, miscount{i, n, false})
	}
	return found
}

// memoMax is how many distinct texts a memo remembers: enough for every
// prompt and reply of a rehearsal that repeats them, bounded whatever the
// bundle holds.
const memoMax = 1 << 16

// memo is a Counter that counts each distinct text once: counting is a
// pure function of the text, so a remembered count is the count. Rehearsals
// send a pool of prompts again and again, and a server at temperature 0
// answers a prompt with the same text, so their records repeat texts. It
// remembers the first memoMax texts it sees and counts any other each
// time. Not safe for concurrent use: each worker has its own.
type memo struct {
	c Counter
	m map[string]int
}

func newMemo(c Counter) *memo { return &memo{c: c, m: map[string]int{}} }

func (m *memo) Count(text string) int {
	if n, ok := m.m[text]; ok {
		return n
	}
	n := m.c.Count(text)
	if len(m.m) < memoMax {
		m.m[text] = n
	}
	return n
}
