package bundle

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/rehearse/rehearse/internal/contract"
)

// Bounds past which a value of a record is no measurement of a rehearsal:
// a time beyond maxTimeS seconds (about 32 years) or a count beyond
// maxCount tokens. Below them, sums over a million records stay exact to
// the microsecond and within an int.
const (
	maxTimeS = 1e9
	maxCount = 1_000_000_000
)

// Output token sources (provenance.output_tokens_source).
const (
	SourceTokenizer = "tokenizer"
	SourceUsage     = "usage"
)

// InvalidError is the decoders' error for results.json whose waves or records
// break SPEC §2 (a record of no wave, times out of order, an unknown failure
// kind …). It carries the decoded results, so that verify can go on and
// report every problem, while every other reader refuses the file.
type InvalidError struct {
	Results  *Results
	Problems []Problem
}

func (e *InvalidError) Error() string {
	p := e.Problems[0]
	p.File = ""
	msg := strings.TrimPrefix(p.String(), ": ")
	switch n := len(e.Problems) - 1; {
	case n == 1:
		msg += " (and 1 more problem; rehearse verify lists them)"
	case n > 1:
		msg += fmt.Sprintf(" (and %d more problems; rehearse verify lists them)", n)
	}
	return msg
}

// checkRecords checks every wave and record of r against SPEC §2 and §4a,
// and each wave's records against its plan (planCheck): the shape a
// record must have whatever its figures. It does not look at
// aggregates, and does not re-count tokens.
func checkRecords(r *Results) []Problem { return checkRecordsOf(r, true) }

// checkRecordsOf is checkRecords, less the plans where !plans (the
// records went past a visitor and are not here).
func checkRecordsOf(r *Results, plans bool) []Problem {
	probs, waves := checkWaves(r)
	c := recordContext{waves: waves, prompts: len(r.Workload.Prompts), source: r.Provenance.OutputTokensSource, workload: &r.Workload}
	plan := newPlanCheck(r.Waves, &r.Workload, r.Provenance.Worker)
	for i := range r.Records {
		probs = append(probs, checkRecord(i, &r.Records[i], c)...)
		plan.add(i, &r.Records[i])
	}
	probs = append(probs, checkSessionInputs(r, waves)...)
	if !plans {
		return probs
	}
	return append(probs, plan.problems()...)
}

// checkSessionInputs checks the order of every session's turns
// (sessionRuns) and that each turn's input_tokens is no larger than the
// bytes of what it sent, its history included (a token is at least one
// byte).
func checkSessionInputs(r *Results, waves map[int]contract.Wave) []Problem {
	probs, prev := sessionRuns(r, waves)
	wl := &r.Workload
	for i := range r.Records {
		rec := &r.Records[i]
		if rec.Turn < 1 || rec.Session == nil || rec.InputTokens == nil || *rec.InputTokens < 0 || *rec.InputTokens > maxCount {
			continue
		}
		b, ok := sessionInputBytes(r, prev, i, func(p int) int { return promptBytes(wl, p) })
		if ok && *rec.InputTokens > b {
			probs = append(probs, Problem{File: ResultsFile, Server: rec.Server, Load: recordLabel(waves, rec),
				Field: fmt.Sprintf("records[%d].input_tokens", i),
				Msg:   fmt.Sprintf("%d for turn %d of session %d, which sent %d bytes with its history (a token is at least one byte)", *rec.InputTokens, rec.Turn, *rec.Session, b)})
		}
	}
	return probs
}

// promptBytes is the bytes of prompt p's message contents (0 for no prompt).
func promptBytes(wl *Workload, p int) int {
	if p < 0 || p >= len(wl.Prompts) {
		return 0
	}
	if p < len(wl.PromptMessages) && wl.PromptMessages[p] != nil {
		b := 0
		for _, m := range wl.PromptMessages[p] {
			b += len(m.Content)
		}
		return b
	}
	return len(wl.Prompts[p])
}

// checkWaves checks each wave's id, kind, mode and anchor, and returns the
// waves by id (the first of duplicates).
func checkWaves(r *Results) ([]Problem, map[int]contract.Wave) {
	var probs []Problem
	byID := make(map[int]contract.Wave, len(r.Waves))
	index := make(map[int]int, len(r.Waves))
	for i, w := range r.Waves {
		bad := func(field, format string, args ...any) {
			probs = append(probs, Problem{File: ResultsFile, Server: w.Server, Load: waveLabel(w),
				Field: fmt.Sprintf("waves[%d].%s", i, field), Msg: fmt.Sprintf(format, args...)})
		}
		if j, dup := index[w.ID]; dup {
			bad("id", "%d is also the id of waves[%d]", w.ID, j)
		} else {
			index[w.ID], byID[w.ID] = i, w
		}
		switch w.Kind {
		case contract.KindRecorded, contract.KindWarmup, contract.KindMechanismCheck, contract.KindSideProbe:
		default:
			bad("kind", "%q is not %s, %s, %s or %s", w.Kind, contract.KindRecorded, contract.KindWarmup, contract.KindMechanismCheck, contract.KindSideProbe)
		}
		switch w.Mode {
		case "", contract.ModeClosed, contract.ModeSustained, contract.ModeOpen:
		default:
			bad("mode", "%q is not %s, %s or %s", w.Mode, contract.ModeClosed, contract.ModeSustained, contract.ModeOpen)
		}
		if _, err := time.Parse(time.RFC3339, w.StartedAt); err != nil {
			bad("started_at", "%q is not an RFC 3339 time", w.StartedAt)
		}
		if w.Concurrency < 0 {
			bad("concurrency", "%d is negative", w.Concurrency)
		}
		if w.Repeat < 0 {
			bad("repeat", "%d is negative", w.Repeat)
		}
		if w.RequestRateRPS < 0 || w.RequestRateRPS > maxCount {
			bad("request_rate_rps", "%v is not a request rate", w.RequestRateRPS)
		}
	}
	return append(probs, checkSideWaves(r.Waves, byID)...), byID
}

// checkSideWaves checks that each side-probe wave stands beside a
// recorded wave of its server (beside), of its repeat, and that no other
// wave claims to.
func checkSideWaves(waves []contract.Wave, byID map[int]contract.Wave) []Problem {
	var probs []Problem
	for i, w := range waves {
		bad := func(format string, args ...any) {
			probs = append(probs, Problem{File: ResultsFile, Server: w.Server, Load: waveLabel(w),
				Field: fmt.Sprintf("waves[%d].beside", i), Msg: fmt.Sprintf(format, args...)})
		}
		if w.Kind != contract.KindSideProbe {
			if w.Beside != 0 {
				bad("%d on a %s wave: only a side_probe wave stands beside another", w.Beside, w.Kind)
			}
			continue
		}
		b, ok := byID[w.Beside]
		switch {
		case !ok || w.Beside == w.ID:
			bad("%d names no other wave: a side_probe wave stands beside a recorded wave", w.Beside)
		case b.Kind != contract.KindRecorded || b.Server != w.Server || b.Repeat != w.Repeat:
			bad("%d is a %s wave of %s, repeat %d: a side_probe wave stands beside a recorded wave of its server and repeat", w.Beside, b.Kind, b.Server, b.Repeat)
		case w.Mode != contract.ModeOpen:
			probs = append(probs, Problem{File: ResultsFile, Server: w.Server, Load: waveLabel(w),
				Field: fmt.Sprintf("waves[%d].mode", i), Msg: fmt.Sprintf("%q: a side_probe wave is open (probe k is client k)", w.Mode)})
		}
	}
	return probs
}

func waveLabel(w contract.Wave) string {
	return fmt.Sprintf("%s, wave %d", contract.KeyOf(w).LoadLabel(), w.ID)
}

// recordLabel places a record for a Problem: the load and id of its wave.
func recordLabel(waves map[int]contract.Wave, rec *contract.Record) string {
	if w, ok := waves[rec.Wave]; ok {
		return waveLabel(w)
	}
	return fmt.Sprintf("wave %d", rec.Wave)
}

// recordContext is what checking one record needs of the rest of results.json.
type recordContext struct {
	waves   map[int]contract.Wave
	prompts int    // len(workload.prompts); 0: no prompt list to index
	source  string // provenance.output_tokens_source
	// workload holds the prompts and their max_tokens (nil: unknown).
	workload *Workload
}

// checkRecord checks one record against SPEC §2: its wave exists and agrees
// with it; ok holds exactly when there is no error_kind, which is one of
// contract.ErrorKinds; times are finite, non-negative and ordered
// (start_s ≤ first_content_s ≤ end_s, chunk_times_s non-decreasing within
// [start_s, end_s], the first chunk at first_content_s); the text is there
// exactly when chunks are; retry_after_s, where present, is finite, not
// negative and on a 429 or 503 record; the prompt indexes workload.prompts; counts are
// non-negative, and output_tokens fits its text (a token is at least one
// byte) or, counted from usage, equals usage_completion_tokens.
func checkRecord(i int, rec *contract.Record, c recordContext) []Problem {
	var probs []Problem
	w, haveWave := c.waves[rec.Wave]
	bad := func(field, format string, args ...any) {
		probs = append(probs, Problem{File: ResultsFile, Server: rec.Server, Load: recordLabel(c.waves, rec),
			Field: fmt.Sprintf("records[%d].%s", i, field), Msg: fmt.Sprintf(format, args...)})
	}

	if !haveWave {
		bad("wave", "wave %d does not exist", rec.Wave)
	} else {
		checkAgainstWave(rec, w, c.workload, bad)
	}
	checkOutcome(rec, bad)
	checkRetryAfter(rec, bad)
	checkIndexes(rec, c.prompts, c.workload, bad)

	checkTimes(rec, bad)

	checkCount := func(field string, v int) bool {
		switch {
		case v < 0:
			bad(field, "%d is negative", v)
		case v > maxCount:
			bad(field, "%d is beyond %d, not a count of tokens", v, maxCount)
		default:
			return true
		}
		return false
	}
	tokensOK := checkCount("output_tokens", rec.OutputTokens)
	if u := rec.UsageCompletionTokens; u != nil {
		checkCount("usage_completion_tokens", *u)
	}
	if u := rec.UsagePromptTokens; u != nil {
		checkCount("usage_prompt_tokens", *u)
	}
	checkReasoning(rec, c.source, bad, checkCount)
	checkClientAdded(rec, bad)
	checkPromptFields(rec, c, bad, checkCount)
	checkRecordModel(rec, c.workload, bad)
	checkSessionFields(rec, c.workload, bad)
	if tokensOK {
		checkOutputTokens(rec, c.source, bad)
	}
	return probs
}

// checkAgainstWave checks that rec agrees with its wave w (kind, server,
// concurrency, repeat) and, in a trace replay (wl known), that it sent
// its request's prompt at its arrival.
func checkAgainstWave(rec *contract.Record, w contract.Wave, wl *Workload, bad func(field, format string, args ...any)) {
	if rec.Kind != w.Kind {
		bad("kind", "%q, its wave %d says %q", rec.Kind, w.ID, w.Kind)
	}
	if rec.Server != w.Server {
		bad("server", "%q, its wave %d says %q", rec.Server, w.ID, w.Server)
	}
	if rec.Concurrency != w.Concurrency {
		bad("concurrency", "%d, its wave %d says %d", rec.Concurrency, w.ID, w.Concurrency)
	}
	if rec.Repeat != w.Repeat {
		bad("repeat", "%d, its wave %d says %d", rec.Repeat, w.ID, w.Repeat)
	}
	if w.Mode == contract.ModeOpen && w.Arrival == contract.ArrivalTrace && wl != nil {
		// A trace replay sends request i, prompt i, at arrivals_s[i].
		switch {
		case rec.Prompt != rec.Client:
			bad("prompt", "%d, but a trace replay's request %d sends prompt %d", rec.Prompt, rec.Client, rec.Client)
		case rec.Prompt < 0 || rec.Prompt >= len(wl.ArrivalsS):
			bad("prompt", "%d, but workload.arrivals_s has %d arrivals", rec.Prompt, len(wl.ArrivalsS))
		case math.Abs(rec.IntendedStartS-wl.ArrivalsS[rec.Prompt]) > 1e-9:
			bad("intended_start_s", "%v, but workload.arrivals_s[%d] is %v", rec.IntendedStartS, rec.Prompt, wl.ArrivalsS[rec.Prompt])
		}
	}
}

// checkOutcome checks that error_kind is a failure kind, that ok holds
// exactly when there is none, and that http_status is an HTTP status.
func checkOutcome(rec *contract.Record, bad func(field, format string, args ...any)) {
	switch {
	case rec.ErrorKind != "" && !contract.IsErrorKind(rec.ErrorKind):
		bad("error_kind", "%q is not a failure kind (%s)", rec.ErrorKind, strings.Join(contract.ErrorKinds, ", "))
	case rec.OK && rec.ErrorKind != "":
		bad("ok", "true with error_kind %q", rec.ErrorKind)
	case !rec.OK && rec.ErrorKind == "":
		bad("ok", "false without an error_kind")
	}
	if rec.HTTPStatus != 0 && (rec.HTTPStatus < 100 || rec.HTTPStatus > 599) {
		bad("http_status", "%d is not an HTTP status", rec.HTTPStatus)
	}
}

// checkIndexes checks that client and prompt are not negative and that
// prompt indexes workload.prompts (prompts of them; 0: no list).
func checkIndexes(rec *contract.Record, prompts int, wl *Workload, bad func(field, format string, args ...any)) {
	if rec.Client < 0 {
		bad("client", "%d is negative", rec.Client)
	}
	switch {
	case rec.Kind == contract.KindSideProbe:
		checkSideProbe(rec, wl, bad)
	case rec.Prompt < 0:
		bad("prompt", "%d is negative", rec.Prompt)
	case prompts > 0 && rec.Prompt >= prompts:
		bad("prompt", "%d is not an index into workload.prompts (%d prompts)", rec.Prompt, prompts)
	}
}

// checkOutputTokens checks output_tokens (a count) against where source
// says it came from: usage_completion_tokens, or the text re-counted
// (not for a redacted record).
func checkOutputTokens(rec *contract.Record, source string, bad func(field, format string, args ...any)) {
	switch source {
	case SourceUsage:
		switch u := rec.UsageCompletionTokens; {
		case u == nil && rec.OutputTokens != 0:
			bad("output_tokens", "%d, but there is no usage_completion_tokens to take it from (provenance.output_tokens_source is usage)", rec.OutputTokens)
		case u != nil && *u != rec.OutputTokens:
			bad("output_tokens", "%d, usage_completion_tokens %d (provenance.output_tokens_source is usage)", rec.OutputTokens, *u)
		}
	case SourceTokenizer, "":
		// A redacted record was counted before its secret was replaced.
		if msg := tokensForText(rec); msg != "" && !rec.Redacted {
			bad("output_tokens", "%s", msg)
		}
	}
}

// checkSideProbe checks what a side probe's record says it sent: no
// prompt of workload.prompts (prompt −1: workload.side_probes.prompt),
// side_probes' max_tokens, no input_tokens, and no model of its own (it
// asks for the server's).
func checkSideProbe(rec *contract.Record, wl *Workload, bad func(field, format string, args ...any)) {
	if rec.Prompt != -1 {
		bad("prompt", "%d, but a side probe sends workload.side_probes.prompt, none of workload.prompts (prompt -1)", rec.Prompt)
	}
	if rec.InputTokens != nil {
		bad("input_tokens", "%d on a side probe, whose prompt is not counted", *rec.InputTokens)
	}
	if wl == nil || wl.SideProbes == nil {
		return
	}
	if want := wl.SideProbes.MaxTokens; rec.MaxTokens != want {
		bad("max_tokens", "%d, but workload.side_probes.max_tokens is %d", rec.MaxTokens, want)
	}
}

// checkRecordModel checks the model a record says its request asked for
// against the plan, where results.json records one: a recorded (or
// mechanism-check) request asked for its prompt's
// (workload.prompt_models), a warm-up request or side probe for the
// server's (no model).
func checkRecordModel(rec *contract.Record, wl *Workload, bad func(field, format string, args ...any)) {
	if wl == nil || wl.PromptModels == nil {
		return
	}
	want := ""
	if rec.Kind == contract.KindRecorded || rec.Kind == contract.KindMechanismCheck {
		if rec.Prompt < 0 || rec.Prompt >= len(wl.PromptModels) {
			return // checkRecord reports the prompt
		}
		want = wl.PromptModels[rec.Prompt]
	}
	switch {
	case rec.Model == want:
	case want == "":
		bad("model", "%q on a %s request, which asks for the server's model", rec.Model, rec.Kind)
	default:
		bad("model", "%q, but workload.prompt_models[%d] is %q", rec.Model, rec.Prompt, want)
	}
}

// checkRetryAfter checks retry_after_s, where a record has one: a finite
// number of seconds, not negative, on an HTTP 429 or 503 record only.
func checkRetryAfter(rec *contract.Record, bad func(field, format string, args ...any)) {
	v := rec.RetryAfterS
	switch {
	case v == nil:
	case math.IsNaN(*v) || math.IsInf(*v, 0) || *v < 0:
		bad("retry_after_s", "%v is not a number of seconds (want finite and ≥ 0)", *v)
	case rec.HTTPStatus != 429 && rec.HTTPStatus != 503:
		bad("retry_after_s", "%v on a record of http_status %d; only a 429 or 503 keeps Retry-After", *v, rec.HTTPStatus)
	}
}

// checkPromptFields checks what a record says its prompt asked for, where
// it says it: input_tokens is a count no larger than the prompt's bytes (a
// token is at least one byte), and max_tokens is the prompt's own limit or
// the workload's.
func checkPromptFields(rec *contract.Record, c recordContext, bad func(field, format string, args ...any), checkCount func(string, int) bool) {
	wl := c.workload
	known := wl != nil && rec.Prompt >= 0 && rec.Prompt < len(wl.Prompts)
	// A session's turn sends its history too: checkSessionInputs bounds it.
	if n := rec.InputTokens; n != nil && checkCount("input_tokens", *n) && known && rec.Turn == 0 {
		if b := promptBytes(wl, rec.Prompt); *n > b {
			bad("input_tokens", "%d for a prompt of %d bytes (a token is at least one byte)", *n, b)
		}
	}
	if rec.MaxTokens == 0 || !checkCount("max_tokens", rec.MaxTokens) || !known || wl.MaxTokens == 0 {
		return
	}
	want := wl.MaxTokens
	if rec.Prompt < len(wl.PromptMaxTokens) && wl.PromptMaxTokens[rec.Prompt] > 0 {
		want = wl.PromptMaxTokens[rec.Prompt]
	}
	if rec.MaxTokens != want {
		bad("max_tokens", "%d, but prompt %d asks for %d", rec.MaxTokens, rec.Prompt, want)
	}
}

// tokensForText says why output_tokens cannot be the token count of text,
// whatever the tokenizer ("" when it can be): every token of a byte-level
// tokenizer is at least one byte, and a non-empty text is at least one
// token.
func tokensForText(rec *contract.Record) string {
	n := len(rec.Text)
	switch {
	case rec.OutputTokens > n:
		return fmt.Sprintf("%d for %d bytes of text (a token is at least one byte)", rec.OutputTokens, n)
	case rec.OutputTokens == 0 && n > 0:
		return fmt.Sprintf("0 for %d bytes of text", n)
	}
	return ""
}

// validTime is what checkTimes' valid accepts: a finite, non-negative time
// within maxTimeS.
func validTime(v float64) bool {
	return !math.IsNaN(v) && !math.IsInf(v, 0) && v >= 0 && v <= maxTimeS
}

// checkTimes checks a record's times: each finite, non-negative and within
// maxTimeS, then their order. An order is checked only between times that
// are valid themselves, so one bad value is one problem.
func checkTimes(rec *contract.Record, bad func(field, format string, args ...any)) {
	valid := func(field string, v float64) bool {
		switch {
		case math.IsNaN(v) || math.IsInf(v, 0):
			bad(field, "%v is not a finite time", v)
		case v < 0:
			bad(field, "%s is negative", num(v))
		case v > maxTimeS:
			bad(field, "%s is beyond %s s, not a time of a rehearsal", num(v), num(maxTimeS))
		default:
			return true
		}
		return false
	}
	valid("intended_start_s", rec.IntendedStartS)
	startOK := valid("start_s", rec.StartS)
	endOK := valid("end_s", rec.EndS)
	if startOK && endOK && rec.EndS < rec.StartS {
		bad("end_s", "%s is before start_s %s", num(rec.EndS), num(rec.StartS))
		endOK = false
	}
	within := func(field string, v float64) {
		switch {
		case startOK && v < rec.StartS:
			bad(field, "%s is before start_s %s", num(v), num(rec.StartS))
		case endOK && v > rec.EndS:
			bad(field, "%s is after end_s %s", num(v), num(rec.EndS))
		}
	}
	fc := rec.FirstContentS
	fcOK := fc != nil && valid("first_content_s", *fc)
	if fcOK {
		within("first_content_s", *fc)
	}

	chunks := rec.ChunkTimesS
	var outOfOrder, outside bool
	for j, t := range chunks {
		if !validTime(t) {
			valid(fmt.Sprintf("chunk_times_s[%d]", j), t)
			break
		}
		field := func() string { return fmt.Sprintf("chunk_times_s[%d]", j) }
		if j > 0 && t < chunks[j-1] && !outOfOrder {
			bad(field(), "%s is before chunk_times_s[%d] %s", num(t), j-1, num(chunks[j-1]))
			outOfOrder = true
		}
		if !outside && ((startOK && t < rec.StartS) || (endOK && t > rec.EndS)) {
			within(field(), t)
			outside = true
		}
	}
	switch {
	case len(chunks) > 0 && fc == nil:
		bad("first_content_s", "null, but chunk_times_s has %d content chunks", len(chunks))
	case len(chunks) == 0 && fc != nil:
		bad("first_content_s", "%s, but chunk_times_s is empty", num(*fc))
	case fcOK && !near(*fc, chunks[0]):
		bad("first_content_s", "%s is not chunk_times_s[0] %s, the first content chunk", num(*fc), num(chunks[0]))
	}
	switch {
	case len(chunks) > 0 && rec.Text == "":
		bad("text", "empty, but chunk_times_s has %d content chunks", len(chunks))
	case len(chunks) == 0 && rec.Text != "":
		bad("chunk_times_s", "empty, but text has %d bytes", len(rec.Text))
	case len(chunks) > len(rec.Text) && !rec.Redacted:
		bad("chunk_times_s", "%d content chunks for %d bytes of text (a content chunk carries at least one byte)", len(chunks), len(rec.Text))
	}
	if ft := rec.FirstTokenS; ft != nil && valid("first_token_s", *ft) {
		within("first_token_s", *ft)
		if fcOK && *ft > *fc && !near(*ft, *fc) {
			bad("first_token_s", "%s is after first_content_s %s (content is generated text too)", num(*ft), num(*fc))
		}
	}
}

// checkClientAdded checks a record's client_added_s: a count of at least
// one stamped event, and finite quantiles in order (p50 ≤ p99 ≤ max). The
// values may be negative (the server's and the client's stamps are read
// from the same wall clock, which can step between them).
func checkClientAdded(rec *contract.Record, bad func(field, format string, args ...any)) {
	a := rec.ClientAddedS
	if a == nil {
		return
	}
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	switch {
	case a.N < 1:
		bad("client_added_s", "n is %d, want at least 1 stamped event", a.N)
	case !finite(a.P50) || !finite(a.P99) || !finite(a.Max):
		bad("client_added_s", "p50 %v, p99 %v, max %v: want finite numbers", a.P50, a.P99, a.Max)
	case a.P50 > a.P99 || a.P99 > a.Max:
		bad("client_added_s", "p50 %s, p99 %s, max %s are out of order", num(a.P50), num(a.P99), num(a.Max))
	}
}

// checkReasoning checks a record's reasoning_tokens against its
// reasoning_text as output_tokens is checked against text: a count, no
// larger than the text's bytes, not 0 for a text; and, where the tokenizer
// counted (output_tokens_source tokenizer), present exactly when there is
// reasoning text.
func checkReasoning(rec *contract.Record, source string, bad func(field, format string, args ...any), checkCount func(string, int) bool) {
	n, text := rec.ReasoningTokens, rec.ReasoningText
	if n != nil && !checkCount("reasoning_tokens", *n) {
		return
	}
	if source != SourceTokenizer && source != "" {
		return
	}
	switch {
	case n == nil && text != "":
		bad("reasoning_tokens", "null, but reasoning_text has %d bytes", len(text))
	case n == nil:
	case text == "":
		bad("reasoning_tokens", "%d, but reasoning_text is empty (null when no reasoning arrived)", *n)
	case *n > len(text) && !rec.Redacted:
		bad("reasoning_tokens", "%d for %d bytes of reasoning_text (a token is at least one byte)", *n, len(text))
	case *n == 0:
		bad("reasoning_tokens", "0 for %d bytes of reasoning_text", len(text))
	}
}

func num(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// wavesByID maps wave ids to waves, the first of duplicates.
func wavesByID(waves []contract.Wave) map[int]contract.Wave {
	m := make(map[int]contract.Wave, len(waves))
	for _, w := range waves {
		if _, dup := m[w.ID]; !dup {
			m[w.ID] = w
		}
	}
	return m
}
