package workload

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
)

// SourceChatJSONL is chat JSON Lines: one request per line, {"messages":
// [{"role": …, "content": …}, …]} with an optional "max_tokens" or
// "output_len" (the request's max_tokens).
const SourceChatJSONL = "chat_jsonl"

// resolveChatJSONL reads the file line by line: each non-blank line is one
// prompt, its messages sent whole. A malformed line is an error naming
// file:line and the field; with max_model_len, lines whose input (message
// contents) plus output tokens exceed it are skipped and counted.
func resolveChatJSONL(spec Spec, env Env) (Set, error) {
	ds := Dataset{}
	if spec.Dataset != nil {
		ds = *spec.Dataset
	}
	if ds.MaxModelLen > 0 && env.Tokenizer == nil {
		return Set{}, errors.New("chat_jsonl: max_model_len needs the pinned tokenizer to count tokens")
	}
	f, err := os.Open(spec.Path)
	if err != nil {
		return Set{}, fmt.Errorf("prompts: %w", err)
	}
	defer f.Close()
	digest := newDigestReader(f)
	lr := newLineReader(digest, MaxLineBytes)
	// Without max_model_len, a line's own max_tokens is bounded here; with
	// it, a line over it is skipped below.
	bound := tokenBound{max: MaxSourceTokens}
	if ds.MaxModelLen > 0 {
		bound.max = math.MaxInt
	}
	var set Set
	skipped := map[string]int{}
	for {
		line, n, err := lr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return Set{}, fmt.Errorf("%s:%d: %v", spec.Path, n, err)
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 || (ds.Count > 0 && set.kept(spec) >= ds.Count) {
			continue
		}
		p, err := chatPrompt(line, bound)
		if err != nil {
			return Set{}, fmt.Errorf("%s:%d: %v", spec.Path, n, err)
		}
		if spec.Sessions != nil {
			turns, reason := chatSession(p, ds, env.Tokenizer, spec.Sessions.Turns)
			if reason != "" {
				skipped[reason]++
				continue
			}
			set.addSession(turns)
			continue
		}
		if ds.MaxModelLen > 0 && inputTokens(p, env.Tokenizer)+p.MaxTokens > ds.MaxModelLen {
			skipped[SkipTooLong]++
			continue
		}
		set.Prompts = append(set.Prompts, p)
	}
	if _, err := io.Copy(io.Discard, digest); err != nil {
		return Set{}, fmt.Errorf("%s: %v", spec.Path, err)
	}
	if len(set.Prompts) == 0 {
		return Set{}, fmt.Errorf("%s: no usable lines (skipped: %s)", spec.Path, skipSummary(skipped))
	}
	set.Record = SourceRecord{SHA256: digest.sum(), Params: sessionParams(datasetParams(spec.Path, ds), spec)}
	delete(set.Record.Params, "use_output_len")
	if len(skipped) > 0 {
		set.Record.Skipped = skipped
	}
	return set, nil
}

// chatPrompt parses one line of chat JSONL, its max_tokens within bound.
func chatPrompt(line []byte, bound tokenBound) (Prompt, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(line, &obj); err != nil {
		return Prompt{}, fmt.Errorf("not a JSON object: %v", err)
	}
	raw, ok := obj["messages"]
	if !ok {
		return Prompt{}, errors.New(`no "messages" field`)
	}
	var msgs []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &msgs); err != nil {
		return Prompt{}, fmt.Errorf(`"messages": want a list of {"role", "content"} objects`)
	}
	if len(msgs) == 0 {
		return Prompt{}, errors.New(`"messages": empty`)
	}
	p := Prompt{Messages: make([]Message, len(msgs))}
	for j, m := range msgs {
		var role, content string
		if err := json.Unmarshal(m["role"], &role); err != nil || role == "" {
			return Prompt{}, fmt.Errorf(`"messages[%d].role": want a non-empty string`, j)
		}
		if err := json.Unmarshal(m["content"], &content); err != nil {
			return Prompt{}, fmt.Errorf(`"messages[%d].content": want a string`, j)
		}
		p.Messages[j] = Message{Role: role, Content: content}
		if role == "user" {
			p.Text = content
		}
	}
	if strings.TrimSpace(p.Text) == "" {
		return Prompt{}, errors.New(`"messages": no user message with content`)
	}
	for _, key := range []string{"max_tokens", "output_len"} {
		v, ok := obj[key]
		if !ok {
			continue
		}
		var n int
		if err := json.Unmarshal(v, &n); err != nil || n < 1 {
			return Prompt{}, fmt.Errorf("%q is %s, want a whole number of at least 1", key, v)
		}
		if p.MaxTokens != 0 && p.MaxTokens != n {
			return Prompt{}, fmt.Errorf(`"max_tokens" %d and "output_len" %d disagree`, p.MaxTokens, n)
		}
		if err := bound.check(strconv.Quote(key), n); err != nil {
			return Prompt{}, err
		}
		p.MaxTokens = n
	}
	return p, nil
}

// inputTokens counts a prompt's message contents (its text where it has no
// messages).
func inputTokens(p Prompt, enc Counter) int {
	if p.Messages == nil {
		return enc.Count(p.Text)
	}
	n := 0
	for _, m := range p.Messages {
		n += enc.Count(m.Content)
	}
	return n
}
