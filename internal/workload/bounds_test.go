package workload

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// refusedInOneLine fails t unless err is one line containing want.
func refusedInOneLine(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Errorf("error %v, want one line containing %q", err, want)
	}
}

// TestTraceLengthBounds: a trace line's lengths past max_model_len, or
// without one past MaxSourceTokens, and values that are no lengths or no
// time, are refused in one line naming file:line, the field and the
// value, before the line's prompt is built (2e9 tokens used to crash the
// process out of memory; 1e8 took gigabytes and minutes).
func TestTraceLengthBounds(t *testing.T) {
	mooncake := func(in, out string) string {
		return `{"timestamp": 0, "input_length": ` + in + `, "output_length": ` + out + "}\n"
	}
	azure := func(in, out string) string {
		return "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900," + in + "," + out + "\n"
	}
	two := `{"timestamp": 0, "input_length": 3, "output_length": 1}` + "\n" + `{"timestamp": 1000, "input_length": 3, "output_length": 1}` + "\n"
	cases := []struct {
		name, file, content string
		modelLen            int
		tr                  Trace
		want                string
	}{
		{"mooncake_2e9", "t.jsonl", mooncake("2000000000", "1"), 0, Trace{}, "t.jsonl:1: input_length: 2000000000: more than 1048576 tokens"},
		{"mooncake_1e8", "t.jsonl", mooncake("100000000", "1"), 0, Trace{}, "t.jsonl:1: input_length: 100000000: more than 1048576 tokens"},
		{"mooncake_ceiling_plus_1", "t.jsonl", mooncake("1048577", "1"), 0, Trace{}, "t.jsonl:1: input_length: 1048577: more than 1048576 tokens"},
		{"mooncake_2e9_under_max_model_len", "t.jsonl", mooncake("2000000000", "1"), 4096, Trace{}, "t.jsonl:1: input_length: 2000000000: over max_model_len 4096"},
		{"mooncake_sum_over_max_model_len", "t.jsonl", mooncake("4000", "200"), 4096, Trace{}, "t.jsonl:1: input_length 4000 + output_length 200 = 4200 tokens: over max_model_len 4096"},
		{"mooncake_float_2e9", "t.jsonl", mooncake("2e9", "1"), 0, Trace{}, "t.jsonl:1: input_length: want int, got a JSON number 2e9"},
		{"mooncake_1e300", "t.jsonl", mooncake("1e300", "1"), 0, Trace{}, "t.jsonl:1: input_length: want int, got a JSON number 1e300"},
		{"mooncake_NaN", "t.jsonl", mooncake("NaN", "1"), 0, Trace{}, "t.jsonl:1: not a JSON object"},
		{"mooncake_minus_1", "t.jsonl", mooncake("-1", "1"), 0, Trace{}, "t.jsonl:1: input_length: -1: want at least 1 token"},
		{"mooncake_output_2e9", "t.jsonl", mooncake("10", "2000000000"), 0, Trace{}, "t.jsonl:1: output_length: 2000000000: more than 1048576 tokens"},
		{"mooncake_output_over_max_model_len", "t.jsonl", mooncake("10", "5000"), 4096, Trace{}, "t.jsonl:1: output_length: 5000: over max_model_len 4096"},
		{"mooncake_timestamp_1e300", "t.jsonl", two + `{"timestamp": 1e300, "input_length": 3, "output_length": 1}` + "\n", 0, Trace{},
			"t.jsonl:3: timestamp 1e+300: 1e+300 ms after the first line's (time scale 1): past the 292 years"},
		{"mooncake_time_scale_1e300", "t.jsonl", two, 0, Trace{TimeScale: 1e300}, "t.jsonl:2: timestamp 1000: 1000 ms after the first line's (time scale 1e+300): past the 292 years"},
		{"azure_2e9", "t.csv", azure("2000000000", "1"), 0, Trace{}, "t.csv:2: ContextTokens: 2000000000: more than 1048576 tokens"},
		{"azure_1e8", "t.csv", azure("100000000", "1"), 0, Trace{}, "t.csv:2: ContextTokens: 100000000: more than 1048576 tokens"},
		{"azure_1e300", "t.csv", azure("1e300", "1"), 0, Trace{}, `t.csv:2: ContextTokens: "1e300" is not a whole number`},
		{"azure_NaN", "t.csv", azure("NaN", "1"), 0, Trace{}, `t.csv:2: ContextTokens: "NaN" is not a whole number`},
		{"azure_minus_1", "t.csv", azure("-1", "1"), 0, Trace{}, "t.csv:2: ContextTokens: -1: want at least 1 token"},
		{"azure_output_2e9", "t.csv", azure("10", "2000000000"), 0, Trace{}, "t.csv:2: GeneratedTokens: 2000000000: more than 1048576 tokens"},
		{"azure_sum_over_max_model_len", "t.csv", azure("4000", "200"), 4096, Trace{}, "t.csv:2: ContextTokens 4000 + GeneratedTokens 200 = 4200 tokens: over max_model_len 4096"},
	}
	tok := qwen(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := c.tr
			_, err := Resolve(Spec{Source: SourceTrace, Path: writeFile(t, c.file, c.content), Trace: &tr}, Env{Tokenizer: tok, MaxModelLen: c.modelLen})
			refusedInOneLine(t, err, c.want)
		})
	}
}

// TestTokenBound: max_model_len, when known, is the bound even above
// MaxSourceTokens; an output of 0 is sent as 1 and counted so.
func TestTokenBound(t *testing.T) {
	b := Env{MaxModelLen: 2 * MaxSourceTokens}.tokenBound()
	if err := b.check("input_length", MaxSourceTokens+1); err != nil {
		t.Errorf("under a max_model_len of 2^21: %v", err)
	}
	if err := (Env{}).tokenBound().check("input_length", MaxSourceTokens); err != nil {
		t.Errorf("at the ceiling: %v", err)
	}
	if err := checkLine(traceLine{input: 4096}, Env{MaxModelLen: 4096}.tokenBound(), "t", "in", "out"); err == nil {
		t.Error("4096 input tokens and an output of 0 (sent as 1) fit a max_model_len of 4096")
	}
}

// TestDatasetLengthBounds: a chat JSONL line's own max_tokens or
// output_len is bounded as a trace's output is; with max_model_len the
// line is skipped and counted instead, as any line over it is.
func TestDatasetLengthBounds(t *testing.T) {
	line := func(key, v string) string {
		return `{"messages": [{"role": "user", "content": "hi"}], "` + key + `": ` + v + "}\n"
	}
	cases := []struct{ name, content, want string }{
		{"max_tokens_2e9", line("max_tokens", "2000000000"), `c.jsonl:1: "max_tokens": 2000000000: more than 1048576 tokens`},
		{"output_len_1e8", line("output_len", "100000000"), `c.jsonl:1: "output_len": 100000000: more than 1048576 tokens`},
		{"output_len_1e300", line("output_len", "1e300"), `c.jsonl:1: "output_len" is 1e300, want a whole number`},
		{"max_tokens_minus_1", line("max_tokens", "-1"), `c.jsonl:1: "max_tokens" is -1, want a whole number of at least 1`},
		{"max_tokens_NaN", line("max_tokens", "NaN"), "c.jsonl:1: not a JSON object"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Resolve(Spec{Source: SourceChatJSONL, Path: writeFile(t, "c.jsonl", c.content)}, Env{})
			refusedInOneLine(t, err, c.want)
		})
	}
	path := writeFile(t, "c.jsonl", line("max_tokens", "2000000000")+line("max_tokens", "5"))
	set, err := Resolve(Spec{Source: SourceChatJSONL, Path: path, Dataset: &Dataset{MaxModelLen: 4096}}, Env{Tokenizer: qwen(t)})
	if err != nil || len(set.Prompts) != 1 || set.Record.Skipped[SkipTooLong] != 1 {
		t.Errorf("max_model_len 4096: %d prompts, skipped %v, %v; want 1 kept, 1 too_long", len(set.Prompts), set.Record.Skipped, err)
	}
}

// TestSyntheticLengthBounds: the synthetic and prefix_repetition sources'
// lengths and counts are bounded before a prompt is built: each length by
// MaxSourceTokens, a drawn one by max_model_len where known, the prompts
// by MaxSourcePrompts and their tokens by MaxSourceTotalTokens.
func TestSyntheticLengthBounds(t *testing.T) {
	ok := Length{Fixed: 8}
	cases := []struct {
		name     string
		s        Synthetic
		sessions *Sessions
		modelLen int
		want     string
	}{
		{"fixed_2e9", Synthetic{InputLen: Length{Fixed: 2_000_000_000}, OutputLen: ok, Count: 1}, nil, 0, "input_len: fixed 2000000000: must be at most 1048576"},
		{"mean_1e300", Synthetic{InputLen: Length{Mean: 1e300}, OutputLen: ok, Count: 1}, nil, 0, "input_len: mean 1e+300: must be at most 1048576"},
		{"range_past_ceiling", Synthetic{InputLen: Length{Mean: 1e6, RangeRatio: 0.5}, OutputLen: ok, Count: 1}, nil, 0, "input_len: mean 1e+06, range_ratio 0.5: draws up to 1.5e+06, more than 1048576"},
		{"sd_1e300", Synthetic{InputLen: Length{Mean: 10, SD: 1e300}, OutputLen: ok, Count: 1}, nil, 0, "input_len: sd 1e+300: must be at most 1048576"},
		{"output_fixed_2e9", Synthetic{InputLen: ok, OutputLen: Length{Fixed: 2_000_000_000}, Count: 1}, nil, 0, "output_len: fixed 2000000000: must be at most 1048576"},
		{"count_2e9", Synthetic{InputLen: ok, OutputLen: ok, Count: 2_000_000_000}, nil, 0, "count: 2000000000: must be at most 1000000"},
		{"total_tokens", Synthetic{InputLen: Length{Fixed: 1 << 20}, OutputLen: ok, Count: 1000}, nil, 0, "count: 1000 prompts of up to 1.048576e+06 input tokens: 1.048576e+09 tokens in all, more than 100000000"},
		{"session_turns", Synthetic{InputLen: ok, OutputLen: ok, Count: 1000}, &Sessions{Turns: 2_000_000_000}, 0, "synthetic sessions: count: 1000 sessions × 2000000000 turns = 2000000000000 prompts: more than 1000000"},
		{"over_max_model_len", Synthetic{InputLen: Length{Fixed: 5000}, OutputLen: ok, Count: 3}, nil, 4096, "synthetic prompt 0: input_len: 5000: over max_model_len 4096"},
		{"prefix_over_max_model_len", Synthetic{InputLen: Length{Fixed: 100}, OutputLen: ok, Count: 3, PrefixLen: 4000}, nil, 4096, "synthetic prompt 0: prefix_len + input_len: 4100: over max_model_len 4096"},
		{"session_over_max_model_len", Synthetic{InputLen: Length{Fixed: 5000}, OutputLen: ok, Count: 3}, &Sessions{Turns: 2}, 4096, "synthetic session 0, turn 1: input_len: 5000: over max_model_len 4096"},
		{"normal_draw_over_max_model_len", Synthetic{InputLen: Length{Mean: 4096, SD: 2000}, OutputLen: ok, Count: 100}, nil, 4096, ": input_len: "},
	}
	tok := qwen(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := c.s
			_, err := Resolve(Spec{Source: SourceSynthetic, Synthetic: &s, Sessions: c.sessions}, Env{Tokenizer: tok, MaxModelLen: c.modelLen})
			refusedInOneLine(t, err, c.want)
			if c.modelLen > 0 && err != nil && !strings.Contains(err.Error(), "over max_model_len 4096") {
				t.Errorf("error %v does not name max_model_len", err)
			}
		})
	}
	t.Run("prefix_repetition_over_max_model_len", func(t *testing.T) {
		p := PrefixRepetition{NumPrefixes: 1, PrefixLen: 3000, SuffixLen: 2000, Count: 2, OutputLen: ok}
		_, err := Resolve(Spec{Source: SourcePrefixRepetition, Prefix: &p}, Env{Tokenizer: tok, MaxModelLen: 4096})
		refusedInOneLine(t, err, "prefix_repetition: prefix_len + suffix_len: 5000: over max_model_len 4096")
	})
}

// TestLineReader: lines end at "\n" or "\r\n" or the end of the input; a
// line of exactly max bytes is read, one byte more is refused with its
// number, by lineReader and by boundedLines alike.
func TestLineReader(t *testing.T) {
	const max = 8
	in := "12345678\r\n\n123\n123456789\nlast"
	lr := newLineReader(strings.NewReader(in), max)
	for _, want := range []string{"12345678", "", "123"} {
		line, _, err := lr.next()
		if err != nil || string(line) != want {
			t.Fatalf("line %q, %v; want %q", line, err, want)
		}
	}
	if _, no, err := lr.next(); no != 4 || err == nil || err.Error() != "the line is longer than 8 bytes, the most one line of a trace or dataset may take" {
		t.Errorf("line %d: %v; want line 4 refused", no, err)
	}
	lr = newLineReader(strings.NewReader("a\nlast"), max)
	lr.next()
	if line, no, err := lr.next(); string(line) != "last" || no != 2 || err != nil {
		t.Errorf("a last line without its newline: %q, line %d, %v", line, no, err)
	}
	if _, _, err := lr.next(); err != io.EOF {
		t.Errorf("after the last line: %v, want io.EOF", err)
	}
	b := newBoundedLines(iotest.OneByteReader(strings.NewReader(in)), max)
	_, err := io.ReadAll(b)
	var tl *LineTooLongError
	if !errors.As(err, &tl) || tl.Line != 4 {
		t.Errorf("boundedLines: %v, want line 4 refused", err)
	}
	if _, err := io.ReadAll(newBoundedLines(strings.NewReader(in[:strings.Index(in, "123456789")]), max)); err != nil {
		t.Errorf("boundedLines of lines within max: %v", err)
	}
}
