package bundle

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rehearse/rehearse/internal/contract"
)

func ptr[T any](v T) *T { return &v }

// validRecord is an ok record of wave 4 (8 clients) that checkRecord
// accepts: three chunks of a three-token text.
func validRecord() contract.Record {
	return contract.Record{
		Kind: contract.KindRecorded, Server: "a", Concurrency: 8, Repeat: 1, Wave: 4, Client: 3, Prompt: 1,
		IntendedStartS: 0, StartS: 0.01, EndS: 0.5, FirstContentS: ptr(0.1), ChunkTimesS: []float64{0.1, 0.2, 0.5},
		OK: true, FinishReason: "stop", Text: " a b c", OutputTokens: 3,
		UsageCompletionTokens: ptr(3), UsagePromptTokens: ptr(20),
		InputTokens: ptr(2), MaxTokens: 16,
	}
}

func TestCheckRecord(t *testing.T) {
	c := recordContext{
		waves:    map[int]contract.Wave{4: {ID: 4, Server: "a", Concurrency: 8, Repeat: 1, Kind: contract.KindRecorded}},
		prompts:  2,
		source:   SourceTokenizer,
		workload: &Workload{Prompts: []string{"p0", "p one"}, MaxTokens: 8, PromptMaxTokens: []int{0, 16}},
	}
	failed := func(r *contract.Record) { r.OK, r.ErrorKind, r.FinishReason = false, contract.ErrTimeout, "" }
	tests := []struct {
		name   string
		edit   func(*contract.Record)
		source string // provenance.output_tokens_source, when not the tokenizer
		want   []string
	}{
		{name: "valid", edit: func(*contract.Record) {}},
		{name: "valid failure with content", edit: failed},
		{name: "valid failure before any content", edit: func(r *contract.Record) {
			failed(r)
			r.ErrorKind, r.FirstContentS, r.ChunkTimesS, r.Text, r.OutputTokens = contract.ErrConnect, nil, nil, "", 0
		}},
		{name: "valid client failure", edit: func(r *contract.Record) {
			failed(r)
			r.ErrorKind = contract.ErrClient
		}},
		{name: "valid http status", edit: func(r *contract.Record) {
			failed(r)
			r.ErrorKind, r.HTTPStatus = contract.ErrHTTPStatus, 503
		}},
		{name: "valid client added", edit: func(r *contract.Record) {
			r.ClientAddedS = &contract.ClientAdded{N: 4, P50: -1e-6, P99: 2e-4, Max: 2e-4}
		}},
		{name: "client added out of order", edit: func(r *contract.Record) {
			r.ClientAddedS = &contract.ClientAdded{N: 4, P50: 3e-4, P99: 2e-4, Max: 2e-4}
		}, want: []string{"records[0].client_added_s: p50 0.0003, p99 0.0002, max 0.0002 are out of order"}},
		{name: "client added without events", edit: func(r *contract.Record) { r.ClientAddedS = &contract.ClientAdded{} },
			want: []string{"records[0].client_added_s: n is 0, want at least 1 stamped event"}},
		{name: "missing wave", edit: func(r *contract.Record) { r.Wave = 9 },
			want: []string{"records[0].wave: wave 9 does not exist"}},
		{name: "kind", edit: func(r *contract.Record) { r.Kind = contract.KindWarmup },
			want: []string{`records[0].kind: "warmup", its wave 4 says "recorded"`}},
		{name: "server", edit: func(r *contract.Record) { r.Server = "b" },
			want: []string{`records[0].server: "b", its wave 4 says "a"`}},
		{name: "concurrency and repeat", edit: func(r *contract.Record) { r.Concurrency, r.Repeat = 64, 2 },
			want: []string{"records[0].concurrency: 64, its wave 4 says 8", "records[0].repeat: 2, its wave 4 says 1"}},
		{name: "unknown error kind", edit: func(r *contract.Record) { failed(r); r.ErrorKind = "oops" },
			want: []string{`records[0].error_kind: "oops" is not a failure kind (timeout, connect, http_status, stream_truncated, stream_malformed, server_error, canceled, client)`}},
		{name: "ok with error kind", edit: func(r *contract.Record) { r.ErrorKind = contract.ErrServerError },
			want: []string{`records[0].ok: true with error_kind "server_error"`}},
		{name: "failed without error kind", edit: func(r *contract.Record) { failed(r); r.ErrorKind = "" },
			want: []string{"records[0].ok: false without an error_kind"}},
		// SPEC §2: ok is a stream ending in [DONE] or a finish_reason;
		// another tool's record may have the first without the second.
		{name: "ok without finish reason", edit: func(r *contract.Record) { r.FinishReason = "" }},
		{name: "http status", edit: func(r *contract.Record) { failed(r); r.ErrorKind, r.HTTPStatus = contract.ErrHTTPStatus, 42 },
			want: []string{"records[0].http_status: 42 is not an HTTP status"}},
		{name: "negative client and prompt", edit: func(r *contract.Record) { r.Client, r.Prompt = -1, -2 },
			want: []string{"records[0].client: -1 is negative", "records[0].prompt: -2 is negative"}},
		{name: "prompt past the list", edit: func(r *contract.Record) { r.Prompt = 2 },
			want: []string{"records[0].prompt: 2 is not an index into workload.prompts (2 prompts)"}},
		{name: "negative times", edit: func(r *contract.Record) { r.IntendedStartS, r.StartS = -1, -0.01 },
			want: []string{"records[0].intended_start_s: -1 is negative", "records[0].start_s: -0.01 is negative"}},
		{name: "not finite", edit: func(r *contract.Record) { r.EndS = math.Inf(1) },
			want: []string{"records[0].end_s: +Inf is not a finite time"}},
		{name: "NaN chunk", edit: func(r *contract.Record) { r.ChunkTimesS[1] = math.NaN() },
			want: []string{"records[0].chunk_times_s[1]: NaN is not a finite time"}},
		{name: "huge", edit: func(r *contract.Record) { r.EndS = 1e18 },
			want: []string{"records[0].end_s: 1e+18 is beyond 1e+09 s"}},
		{name: "end before start", edit: func(r *contract.Record) {
			r.StartS, r.FirstContentS, r.ChunkTimesS = 0.6, nil, nil
			r.Text, r.OutputTokens = "", 0
		},
			want: []string{"records[0].end_s: 0.5 is before start_s 0.6"}},
		{name: "first content after end", edit: func(r *contract.Record) { r.FirstContentS, r.ChunkTimesS[0] = ptr(0.7), 0.7 },
			want: []string{"records[0].first_content_s: 0.7 is after end_s 0.5", "records[0].chunk_times_s[0]: 0.7 is after end_s 0.5", "records[0].chunk_times_s[1]: 0.2 is before chunk_times_s[0] 0.7"}},
		{name: "chunk before start", edit: func(r *contract.Record) { r.StartS = 0.15; r.FirstContentS = ptr(0.15); r.ChunkTimesS[0] = 0.14 },
			want: []string{"records[0].chunk_times_s[0]: 0.14 is before start_s 0.15", "records[0].first_content_s: 0.15 is not chunk_times_s[0] 0.14"}},
		{name: "chunks out of order", edit: func(r *contract.Record) { r.ChunkTimesS[1], r.ChunkTimesS[2] = 0.5, 0.2 },
			want: []string{"records[0].chunk_times_s[2]: 0.2 is before chunk_times_s[1] 0.5"}},
		{name: "first content without chunks", edit: func(r *contract.Record) { r.ChunkTimesS = []float64{} },
			want: []string{"records[0].first_content_s: 0.1, but chunk_times_s is empty", "records[0].chunk_times_s: empty, but text has 6 bytes"}},
		{name: "chunks without first content", edit: func(r *contract.Record) { r.FirstContentS = nil },
			want: []string{"records[0].first_content_s: null, but chunk_times_s has 3 content chunks"}},
		{name: "chunks without text", edit: func(r *contract.Record) { r.Text, r.OutputTokens = "", 0 },
			want: []string{"records[0].text: empty, but chunk_times_s has 3 content chunks"}},
		{name: "more chunks than bytes", edit: func(r *contract.Record) { r.Text, r.OutputTokens = "ab", 1 },
			want: []string{"records[0].chunk_times_s: 3 content chunks for 2 bytes of text"}},
		{name: "negative counts", edit: func(r *contract.Record) {
			r.OutputTokens, r.UsageCompletionTokens, r.UsagePromptTokens = -1, ptr(-2), ptr(-3)
		},
			want: []string{"records[0].output_tokens: -1 is negative", "records[0].usage_completion_tokens: -2 is negative", "records[0].usage_prompt_tokens: -3 is negative"}},
		{name: "huge count", edit: func(r *contract.Record) { r.UsagePromptTokens = ptr(math.MaxInt) },
			want: []string{"records[0].usage_prompt_tokens: 9223372036854775807 is beyond 1000000000"}},
		{name: "more tokens than bytes", edit: func(r *contract.Record) { r.OutputTokens = 5000 },
			want: []string{"records[0].output_tokens: 5000 for 6 bytes of text (a token is at least one byte)"}},
		{name: "no tokens for text", edit: func(r *contract.Record) { r.OutputTokens = 0 },
			want: []string{"records[0].output_tokens: 0 for 6 bytes of text"}},
		{name: "no prompt fields", edit: func(r *contract.Record) { r.InputTokens, r.MaxTokens = nil, 0 }},
		{name: "negative input tokens", edit: func(r *contract.Record) { r.InputTokens = ptr(-1) },
			want: []string{"records[0].input_tokens: -1 is negative"}},
		{name: "more input tokens than prompt bytes", edit: func(r *contract.Record) { r.InputTokens = ptr(6) },
			want: []string{"records[0].input_tokens: 6 for a prompt of 5 bytes"}},
		{name: "max tokens not the prompt's", edit: func(r *contract.Record) { r.MaxTokens = 8 },
			want: []string{"records[0].max_tokens: 8, but prompt 1 asks for 16"}},
		{name: "max tokens the workload's", edit: func(r *contract.Record) { r.Prompt, r.MaxTokens = 0, 8 }},
		{name: "valid reasoning", edit: func(r *contract.Record) {
			r.FirstTokenS, r.ReasoningText, r.ReasoningTokens = ptr(0.05), " think", ptr(1)
		}},
		{name: "first token is first content", edit: func(r *contract.Record) { r.FirstTokenS = ptr(0.1) }},
		{name: "first token after first content", edit: func(r *contract.Record) { r.FirstTokenS = ptr(0.2) },
			want: []string{"records[0].first_token_s: 0.2 is after first_content_s 0.1"}},
		{name: "first token before start", edit: func(r *contract.Record) { r.FirstTokenS = ptr(0.001) },
			want: []string{"records[0].first_token_s: 0.001 is before start_s 0.01"}},
		{name: "first token not finite", edit: func(r *contract.Record) { r.FirstTokenS = ptr(math.NaN()) },
			want: []string{"records[0].first_token_s: NaN is not a finite time"}},
		{name: "reasoning text without tokens", edit: func(r *contract.Record) { r.ReasoningText = " think" },
			want: []string{"records[0].reasoning_tokens: null, but reasoning_text has 6 bytes"}},
		{name: "reasoning tokens without text", edit: func(r *contract.Record) { r.ReasoningTokens = ptr(0) },
			want: []string{"records[0].reasoning_tokens: 0, but reasoning_text is empty"}},
		{name: "more reasoning tokens than bytes", edit: func(r *contract.Record) { r.ReasoningText, r.ReasoningTokens = " a", ptr(3) },
			want: []string{"records[0].reasoning_tokens: 3 for 2 bytes of reasoning_text"}},
		{name: "no reasoning tokens for text", edit: func(r *contract.Record) { r.ReasoningText, r.ReasoningTokens = " a", ptr(0) },
			want: []string{"records[0].reasoning_tokens: 0 for 2 bytes of reasoning_text"}},
		{name: "negative reasoning tokens", edit: func(r *contract.Record) { r.ReasoningText, r.ReasoningTokens = " a", ptr(-1) },
			want: []string{"records[0].reasoning_tokens: -1 is negative"}},
		{name: "usage source, reasoning text without tokens", source: SourceUsage, edit: func(r *contract.Record) { r.ReasoningText = " think" }},
		{name: "usage source agrees", source: SourceUsage, edit: func(*contract.Record) {}},
		{name: "usage source disagrees", source: SourceUsage, edit: func(r *contract.Record) { r.OutputTokens = 4 },
			want: []string{"records[0].output_tokens: 4, usage_completion_tokens 3 (provenance.output_tokens_source is usage)"}},
		{name: "usage source without usage", source: SourceUsage, edit: func(r *contract.Record) { r.UsageCompletionTokens = nil },
			want: []string{"records[0].output_tokens: 3, but there is no usage_completion_tokens"}},
		{name: "usage source, empty text", source: SourceUsage, edit: func(r *contract.Record) { r.OutputTokens = 5000; r.UsageCompletionTokens = ptr(5000) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := validRecord()
			tt.edit(&rec)
			cc := c
			if tt.source != "" {
				cc.source = tt.source
			}
			var got []string
			for _, p := range checkRecord(0, &rec, cc) {
				got = append(got, p.String())
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d problems %q, want %d: %q", len(got), got, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d: %q does not contain %q", i, got[i], w)
				}
				if !strings.HasPrefix(got[i], "results.json: server ") {
					t.Errorf("problem %q does not name file and server first", got[i])
				}
			}
		})
	}
}

// recordsEqual lists contract.Record's fields by hand; a field added to the
// record must be added there too, or journal comparison would miss it.
func TestRecordsEqualSeesEveryField(t *testing.T) {
	sessionRecord := func() contract.Record {
		r := validRecord()
		r.Session, r.Turn, r.Replica = ptr(0), 1, ptr(1) // every pointer set, so that nil is a change
		r.FirstTokenS, r.ReasoningTokens, r.ReasoningText = ptr(0.05), ptr(2), " x y"
		r.ClientAddedS = &contract.ClientAdded{N: 3, P50: 1e-4, P99: 2e-4, Max: 3e-4}
		r.Worker, r.RetryAfterS, r.Request = ptr(1), ptr(2.0), ptr(3)
		return r
	}
	base := sessionRecord()
	typ := reflect.TypeOf(base)
	for i := range typ.NumField() {
		changed := sessionRecord()
		f := reflect.ValueOf(&changed).Elem().Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(f.String() + "x")
		case reflect.Int:
			f.SetInt(f.Int() + 1)
		case reflect.Float64:
			f.SetFloat(f.Float() + 1)
		case reflect.Bool:
			f.SetBool(!f.Bool())
		case reflect.Pointer:
			f.Set(reflect.Zero(f.Type()))
		case reflect.Slice:
			f.Set(reflect.Append(f, reflect.Zero(f.Type().Elem())))
		default:
			t.Fatalf("field %s: kind %s not handled by this test", typ.Field(i).Name, f.Kind())
		}
		if recordsEqual(&base, &changed) {
			t.Errorf("recordsEqual does not see a change of %s", typ.Field(i).Name)
		}
	}
	same := sessionRecord()
	if !recordsEqual(&base, &same) {
		t.Error("equal records compare unequal")
	}
	same.ChunkTimesS, base.ChunkTimesS = nil, []float64{}
	if !recordsEqual(&base, &same) {
		t.Error("a null chunk_times_s and an empty one compare unequal")
	}
}

// countingCounter counts words and how many texts it was asked to count.
type countingCounter struct{ calls atomic.Int64 }

func (c *countingCounter) Count(text string) int {
	c.calls.Add(1)
	return len(strings.Fields(text))
}

// Re-counting is one pass over the records, shared among the cores: each
// text is counted once, whatever the number of records; a text repeated
// is counted once by each core (memo).
func TestRecountCountsEachTextOnce(t *testing.T) {
	for _, n := range []int{1, 255, 256, 1000, 4099} {
		res := &Results{}
		for i := range n {
			rec := validRecord()
			rec.Text = fmt.Sprintf(" a b t%d", i) // three words, every text its own
			if i%7 == 3 {
				rec.OutputTokens = 4 // a miscount
			}
			res.Records = append(res.Records, rec)
		}
		var c countingCounter
		bad := recount(res, &c)
		if got := c.calls.Load(); got != int64(n) {
			t.Errorf("%d records: %d texts counted", n, got)
		}
		want := 0
		for i := range n {
			if i%7 == 3 {
				if want >= len(bad) || bad[want].index != i || bad[want].count != 3 {
					t.Fatalf("%d records: miscounts %v, want record %d (count 3) next", n, bad, i)
				}
				want++
			}
		}
		if want != len(bad) {
			t.Errorf("%d records: %d miscounts, want %d", n, len(bad), want)
		}
	}
}

// input_tokens are re-counted from the prompts, each prompt once; a
// conversation counts its message contents.
func TestRecountInputs(t *testing.T) {
	res := &Results{Workload: Workload{Prompts: []string{"one two", "three"},
		PromptMessages: [][]Message{nil, {{Role: "system", Content: "a b"}, {Role: "user", Content: "three"}}}}}
	for i := range 6 {
		rec := validRecord()
		rec.Prompt = i % 2
		rec.InputTokens = ptr([]int{2, 3}[i%2])
		if i == 4 {
			rec.InputTokens = ptr(9)
		}
		if i == 5 {
			rec.InputTokens = nil
		}
		res.Records = append(res.Records, rec)
	}
	var c countingCounter
	probs, n := recountInputs(res, &c, nil)
	if n != 5 || c.calls.Load() != 3 {
		t.Fatalf("%d records checked, %d texts counted; want 5 and 3", n, c.calls.Load())
	}
	if len(probs) != 1 || !strings.Contains(probs[0].String(), "records[4].input_tokens: stored 9, prompt 0 re-counted with the tokenizer is 2") {
		t.Fatalf("problems %v", probs)
	}
}
