package workload

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

func resolveTraceFile(t *testing.T, path string, tr Trace) Set {
	t.Helper()
	set, err := Resolve(Spec{Source: SourceTrace, Path: path, Trace: &tr}, Env{Tokenizer: qwen(t)})
	if err != nil {
		t.Fatal(err)
	}
	return set
}

const mooncakeSample = `{"timestamp": 0, "input_length": 1100, "output_length": 12, "hash_ids": [0, 1, 2]}
{"timestamp": 250, "input_length": 700, "output_length": 5, "hash_ids": [0, 3]}

{"timestamp": 250, "input_length": 1024, "output_length": 7, "hash_ids": [0, 1]}
{"timestamp": 1500, "input_length": 90, "output_length": 3, "hash_ids": [4]}
{"timestamp": 1750, "input_length": 300, "output_length": 0, "hash_ids": []}
`

// TestTraceMooncake: exact input lengths, traced max_tokens, arrivals at
// the timestamps less the first, scaled.
func TestTraceMooncake(t *testing.T) {
	tok := qwen(t)
	path := writeFile(t, "trace.jsonl", mooncakeSample)
	set := resolveTraceFile(t, path, Trace{TimeScale: 2})
	wantIn := []int{1100, 700, 1024, 90, 300}
	wantOut := []int{12, 5, 7, 3, 1}
	wantAt := []time.Duration{0, 500 * time.Millisecond, 500 * time.Millisecond, 3 * time.Second, 3500 * time.Millisecond}
	if len(set.Prompts) != 5 || len(set.Arrivals) != 5 {
		t.Fatalf("%d prompts, %d arrivals, want 5", len(set.Prompts), len(set.Arrivals))
	}
	for i, p := range set.Prompts {
		if got := tok.Count(p.Text); got != wantIn[i] {
			t.Errorf("prompt %d: %d tokens, want %d", i, got, wantIn[i])
		}
		if p.MaxTokens != wantOut[i] {
			t.Errorf("prompt %d: max_tokens %d, want %d", i, p.MaxTokens, wantOut[i])
		}
		if set.Arrivals[i] != wantAt[i] {
			t.Errorf("prompt %d: arrival %v, want %v", i, set.Arrivals[i], wantAt[i])
		}
	}
	r := set.Record
	if r.Name != SourceTrace || r.SHA256 != mustFileSHA(t, path) || r.Params["format"] != TraceMooncake || r.Params["time_scale"] != 2.0 ||
		r.Params["block_size"] != 512 || r.Params["output_length_0_sent_as_1"] != 1 || r.Params["lines"] != 5 {
		t.Errorf("record %+v", r)
	}
	// Unscaled, the arrivals are the timestamps less the first.
	set = resolveTraceFile(t, path, Trace{})
	if set.Arrivals[3] != 1500*time.Millisecond {
		t.Errorf("time scale 1: arrival 3 at %v", set.Arrivals[3])
	}
}

func mustFileSHA(t *testing.T, path string) string {
	t.Helper()
	s, err := fileSHA256(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestTraceSharedBlocks: prompts that share leading hash ids share the
// identical prefix text of those blocks, and no more.
func TestTraceSharedBlocks(t *testing.T) {
	tok := qwen(t)
	set := resolveTraceFile(t, writeFile(t, "trace.jsonl", mooncakeSample), Trace{})
	a, b, c := set.Prompts[0].Text, set.Prompts[1].Text, set.Prompts[2].Text
	block0 := leadingWords(a, 512)
	if tok.Count(block0) != 512 {
		t.Fatalf("block 0: %d tokens", tok.Count(block0))
	}
	if !strings.HasPrefix(b, block0+" ") || !strings.HasPrefix(c, block0+" ") {
		t.Error("prompts 1 and 2 do not start with prompt 0's block 0")
	}
	// Prompt 2 is blocks 0 and 1 exactly: prompt 0's first 1024 tokens.
	if c != leadingWords(a, 1024) {
		t.Error("prompt 2 (hash ids 0, 1) is not prompt 0's first two blocks")
	}
	// Prompt 1's second block (id 3) differs from prompt 0's (id 1).
	if leadingWords(b, 600) == leadingWords(a, 600) {
		t.Error("different hash ids gave the same block")
	}
	// Same seed, same texts; another seed, other texts.
	again := resolveTraceFile(t, writeFile(t, "trace.jsonl", mooncakeSample), Trace{})
	other := resolveTraceFile(t, writeFile(t, "trace.jsonl", mooncakeSample), Trace{Seed: 1})
	if again.Prompts[1].Text != b || other.Prompts[1].Text == b {
		t.Error("the texts are not a function of the seed")
	}
	// A smaller block size shares smaller blocks.
	small := resolveTraceFile(t, writeFile(t, "trace.jsonl", mooncakeSample), Trace{BlockSize: 100})
	if p := small.Prompts; leadingWords(p[0].Text, 100) != leadingWords(p[1].Text, 100) || leadingWords(p[0].Text, 101) == leadingWords(p[1].Text, 101) {
		t.Error("block size 100: prompts 0 and 1 should share exactly their first 100 words")
	}
}

func TestTraceAzure(t *testing.T) {
	tok := qwen(t)
	set := resolveTraceFile(t, "testdata/azure-sample.csv", Trace{})
	wantIn := []int{374, 396, 879, 12}
	wantOut := []int{44, 109, 55, 1}
	wantAt := []time.Duration{0, 4314579 * time.Microsecond, 4541877 * time.Microsecond, 4541877 * time.Microsecond}
	for i, p := range set.Prompts {
		if got := tok.Count(p.Text); got != wantIn[i] || p.MaxTokens != wantOut[i] {
			t.Errorf("line %d: %d tokens, max_tokens %d; want %d, %d", i+2, got, p.MaxTokens, wantIn[i], wantOut[i])
		}
		if d := set.Arrivals[i] - wantAt[i]; d < -time.Microsecond || d > time.Microsecond {
			t.Errorf("line %d: arrival %v, want %v", i+2, set.Arrivals[i], wantAt[i])
		}
	}
	if set.Record.Params["format"] != TraceAzure {
		t.Errorf("format %v", set.Record.Params["format"])
	}
	// 2024's form, with an offset, and columns in another order; count
	// keeps the first lines.
	path := writeFile(t, "t.csv", "GeneratedTokens,TIMESTAMP,ContextTokens\n10,2024-05-10 00:00:00.009930+00:00,20\n11,2024-05-10 00:00:01.509930+00:00,30\n12,2024-05-10 00:00:02+00:00,40\n")
	set = resolveTraceFile(t, path, Trace{Count: 2, TimeScale: 0.5})
	if len(set.Prompts) != 2 || set.Arrivals[1] != 750*time.Millisecond || tok.Count(set.Prompts[1].Text) != 30 || set.Prompts[1].MaxTokens != 11 {
		t.Errorf("2024 form: %d prompts, arrivals %v", len(set.Prompts), set.Arrivals)
	}
}

// TestTraceRefusals: each bad trace is one line naming file:line and the
// field or both values.
func TestTraceRefusals(t *testing.T) {
	cases := []struct{ name, content, want string }{
		{"t.jsonl", "{\"timestamp\": 5, \"input_length\": 3, \"output_length\": 1}\n{\"timestamp\": 4, \"input_length\": 3, \"output_length\": 1}\n",
			"t.jsonl:2: timestamp 4 is before 5 of line 1"},
		{"t.jsonl", "{\"timestamp\": 5, \"input_length\": 3}\n", "t.jsonl:1: output_length: missing"},
		{"t.jsonl", "{\"timestamp\": 5, \"input_length\": \"3\", \"output_length\": 1}\n", "t.jsonl:1: input_length: want int, got a JSON string"},
		{"t.jsonl", "{\"timestamp\": 5, \"input_length\": 3, \"output_length\": 1}\nnot json\n", "t.jsonl:2: not a JSON object"},
		{"t.jsonl", "{\"timestamp\": 5, \"input_length\": -3, \"output_length\": 1}\n", "t.jsonl:1: input_length: -3: want at least 1"},
		{"t.jsonl", "{\"timestamp\": 5, \"input_length\": 3, \"output_length\": -1}\n", "t.jsonl:1: output_length: -1: want 0 or more"},
		{"t.jsonl", "\n\n", "t.jsonl: an empty trace"},
		{"t.csv", "", "t.csv: an empty trace"},
		{"t.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n", "t.csv: an empty trace"},
		{"t.csv", "TIMESTAMP,Context,GeneratedTokens\n2023-11-16 18:15:46.6805900,1,1\n", "t.csv:1: the header lacks the ContextTokens column"},
		{"t.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,1,1\n2023-11-16 18:15:45,1,1\n", `t.csv:3: timestamp "2023-11-16 18:15:45" is before "2023-11-16 18:15:46" of line 2`},
		{"t.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,1,1\n", `t.csv:2: TIMESTAMP: "yesterday" is not a datetime`},
		{"t.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,x,1\n", `t.csv:2: ContextTokens: "x" is not a whole number`},
		{"t.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,5,-2\n", "t.csv:2: GeneratedTokens: -2: want 0 or more"},
		{"t.txt", "x\n", "give the trace's format"},
	}
	for _, c := range cases {
		_, err := Resolve(Spec{Source: SourceTrace, Path: writeFile(t, c.name, c.content)}, Env{Tokenizer: qwen(t)})
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s %q: error %v, want one line containing %q", c.name, c.content, err, c.want)
		}
	}
	// A bad line after the count is still refused: the whole file is checked.
	path := writeFile(t, "t.jsonl", "{\"timestamp\": 5, \"input_length\": 3, \"output_length\": 1}\n{\"timestamp\": 1, \"input_length\": 3, \"output_length\": 1}\n")
	if _, err := Resolve(Spec{Source: SourceTrace, Path: path, Trace: &Trace{Count: 1}}, Env{Tokenizer: qwen(t)}); err == nil {
		t.Error("a backwards timestamp after count lines was accepted")
	}
	if _, err := Resolve(Spec{Source: SourceTrace, Path: path}, Env{}); err == nil || !strings.Contains(err.Error(), "tokenizer") {
		t.Errorf("no tokenizer: %v", err)
	}
	if probs := (Trace{Format: "csv", TimeScale: -1, BlockSize: -2, Count: -1}).Check(); len(probs) != 4 {
		t.Errorf("Check: %q", probs)
	}
}

// BenchmarkTraceMooncake resolves a Mooncake-like trace of 100 lines of
// 8,000 input tokens each (16 hash blocks of 512, the first 8 shared by
// every line, the rest their own): the cost of building exact prompts.
func BenchmarkTraceMooncake(b *testing.B) {
	var sb strings.Builder
	next := 8
	for i := range 100 {
		ids := []string{"0", "1", "2", "3", "4", "5", "6", "7"}
		for range 8 {
			ids = append(ids, strconv.Itoa(next))
			next++
		}
		fmt.Fprintf(&sb, "{\"timestamp\": %d, \"input_length\": 8000, \"output_length\": 100, \"hash_ids\": [%s]}\n", i*100, strings.Join(ids, ", "))
	}
	path := writeFile(b, "bench.jsonl", sb.String())
	tok := qwen(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Resolve(Spec{Source: SourceTrace, Path: path}, Env{Tokenizer: tok}); err != nil {
			b.Fatal(err)
		}
	}
}
