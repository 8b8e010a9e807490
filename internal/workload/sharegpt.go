package workload

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// Dataset are the parameters of a dataset source (sharegpt, chat_jsonl).
type Dataset struct {
	// UseOutputLen sets each request's max_tokens from the dataset: the
	// token length of ShareGPT's first reply, chat JSONL's output_len.
	UseOutputLen bool
	// MaxModelLen, when positive, skips entries whose input plus output
	// tokens exceed it.
	MaxModelLen int
	// Count, when positive, keeps the first Count usable entries.
	Count int
	// Order is "" for the file's order, or how vllm bench serve samples a
	// ShareGPT file (OrderVLLM, OrderVLLMUnshuffled; sharegpt only).
	Order string
	// Seed shuffles the entries under OrderVLLM (vLLM's --seed).
	Seed int64
	// OutputLen, under vLLM's orders without UseOutputLen, is the fixed
	// output length vLLM checks each entry's lengths with
	// (--sharegpt-output-len).
	OutputLen int
}

// vLLM's orders of a ShareGPT file (vllm/benchmarks/datasets.py,
// ShareGPTDataset): the entries of two turns or more, shuffled as
// random.seed(seed); random.shuffle(entries) does in CPython (OrderVLLM)
// or left in file order (OrderVLLMUnshuffled, its --disable-shuffle);
// then each entry's first turn is the prompt and its second turn's token
// length the output length (or OutputLen), and an entry is kept where
// vLLM's is_valid_sequence keeps it (prompt at least 4 tokens and at most
// 1024, output at least 4 unless fixed, both at most 2048), until Count.
const (
	OrderVLLM           = "vllm"
	OrderVLLMUnshuffled = "vllm_unshuffled"
)

// Skip reasons counted in SourceRecord.Skipped.
const (
	SkipEmpty   = "empty"    // no human turn, or an empty one
	SkipNoReply = "no_reply" // use_output_len without a reply to measure
	SkipTooLong = "too_long" // input + output over max_model_len
	// SkipVLLMLength: outside vLLM's is_valid_sequence (vLLM's orders).
	SkipVLLMLength = "vllm_length"
)

// SourceShareGPT is ShareGPT JSON: [{"conversations": [{"from": "human"|"gpt", "value": …}]}].
const SourceShareGPT = "sharegpt"

type shareGPTEntry struct {
	Conversations []struct {
		From  string `json:"from"`
		Value string `json:"value"`
	} `json:"conversations"`
}

// resolveShareGPT streams the file with the JSON decoder's token API, one
// entry of at most MaxLineBytes in memory at a time: the first human turn is the prompt; with
// use_output_len, the token length of the reply after it is the request's
// max_tokens. Empty entries and, with max_model_len, too long ones are
// skipped and counted.
func resolveShareGPT(spec Spec, env Env) (Set, error) {
	ds := Dataset{}
	if spec.Dataset != nil {
		ds = *spec.Dataset
	}
	if (ds.UseOutputLen || ds.MaxModelLen > 0 || ds.Order != "") && env.Tokenizer == nil {
		return Set{}, errors.New("sharegpt: use_output_len, max_model_len and vLLM's order need the pinned tokenizer to count tokens")
	}
	if ds.Order != "" {
		return resolveShareGPTVLLM(spec, env, ds)
	}
	f, err := os.Open(spec.Path)
	if err != nil {
		return Set{}, fmt.Errorf("prompts: %w", err)
	}
	defer f.Close()
	digest := newDigestReader(f)
	bound := &entryBound{r: bufio.NewReaderSize(digest, 1<<20), max: MaxLineBytes}
	bound.from(0)
	dec := json.NewDecoder(bound)
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return Set{}, fmt.Errorf("%s: want a JSON list of {\"conversations\": [...]} entries", spec.Path)
	}
	var set Set
	skipped := map[string]int{}
	for i := 0; ; i++ {
		bound.from(dec.InputOffset())
		if !dec.More() {
			break
		}
		var e shareGPTEntry
		if err := dec.Decode(&e); err != nil {
			return Set{}, fmt.Errorf("%s: entry %d (byte %d): %v", spec.Path, i, dec.InputOffset(), err)
		}
		if ds.Count > 0 && set.kept(spec) >= ds.Count {
			continue
		}
		if spec.Sessions != nil {
			turns, reason := shareGPTSession(e, ds, env.Tokenizer, spec.Sessions.Turns)
			if reason != "" {
				skipped[reason]++
				continue
			}
			set.addSession(turns)
			continue
		}
		p, reason := shareGPTPrompt(e, ds, env.Tokenizer)
		if reason != "" {
			skipped[reason]++
			continue
		}
		set.Prompts = append(set.Prompts, p)
	}
	if _, err := dec.Token(); err != nil {
		return Set{}, fmt.Errorf("%s: the list does not end: %v", spec.Path, err)
	}
	if _, err := io.Copy(io.Discard, digest); err != nil {
		return Set{}, fmt.Errorf("%s: %v", spec.Path, err)
	}
	if len(set.Prompts) == 0 {
		return Set{}, fmt.Errorf("%s: no usable entries (skipped: %s)", spec.Path, skipSummary(skipped))
	}
	set.Record = SourceRecord{SHA256: digest.sum(), Params: sessionParams(datasetParams(spec.Path, ds), spec)}
	if len(skipped) > 0 {
		set.Record.Skipped = skipped
	}
	return set, nil
}

func shareGPTPrompt(e shareGPTEntry, ds Dataset, enc Encoder) (Prompt, string) {
	turns := e.Conversations
	h := -1
	for j, t := range turns {
		if t.From == "human" || t.From == "user" {
			h = j
			break
		}
	}
	if h < 0 || strings.TrimSpace(turns[h].Value) == "" {
		return Prompt{}, SkipEmpty
	}
	p := Prompt{Text: turns[h].Value}
	if ds.UseOutputLen {
		if h+1 >= len(turns) || strings.TrimSpace(turns[h+1].Value) == "" {
			return Prompt{}, SkipNoReply
		}
		p.MaxTokens = max(1, enc.Count(turns[h+1].Value))
	}
	if ds.MaxModelLen > 0 && enc.Count(p.Text)+p.MaxTokens > ds.MaxModelLen {
		return Prompt{}, SkipTooLong
	}
	return p, ""
}

func datasetParams(path string, ds Dataset) map[string]any {
	m := map[string]any{"path": path, "use_output_len": ds.UseOutputLen}
	if ds.MaxModelLen > 0 {
		m["max_model_len"] = ds.MaxModelLen
	}
	if ds.Count > 0 {
		m["count"] = ds.Count
	}
	return m
}

func skipSummary(skipped map[string]int) string {
	if len(skipped) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range []string{SkipEmpty, SkipNoReply, SkipTooLong, SkipVLLMLength} {
		if n := skipped[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, k))
		}
	}
	return strings.Join(parts, ", ")
}
