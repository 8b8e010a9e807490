package workload

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

var builtin = []string{
	"Explain in three short paragraphs how a hash map handles collisions, and when open addressing beats chaining.",
	"Write a Python function that returns the n-th Fibonacci number in O(log n) time, with a docstring and two doctests.",
	"Summarize the causes of the 2008 financial crisis for a high-school student, in plain language and under 200 words.",
	"A train leaves at 14:05 and travels 210 km at an average of 84 km/h. At what time does it arrive? Show your reasoning step by step.",
	"Draft a polite email to a landlord asking for the heating to be repaired before the weekend, mentioning that it stopped working on Monday.",
	"Translate into French and then into German: \"The meeting has been moved to Thursday afternoon because the projector is broken.\"",
	"List the pros and cons of running a relational database on Kubernetes compared with a managed cloud database service.",
	"Write a short story of about 150 words about a lighthouse keeper who finds a message in a bottle written in her own handwriting.",
}

// BuiltinPrompts returns the eight default prompts: explanation, code,
// summary, arithmetic reasoning, correspondence, translation, comparison and
// fiction, so that output lengths and token mixes vary as real traffic does.
// A test helper: the binary resolves them as the builtin source.
func BuiltinPrompts() []string { return append([]string(nil), builtin...) }

// PromptIndex is the prompt request (or client) i of a wave sends, of n
// prompts: they are assigned round-robin, i mod n.
func PromptIndex(i, n int) int { return i % n }

// LoadPrompts reads prompts from path: JSON Lines (.jsonl, .ndjson) with a
// string "prompt" field per line, or text (.txt) with one prompt per line.
// Blank lines are skipped. It reads a line of at most MaxLineBytes at a
// time. Errors name the file and line.
func LoadPrompts(path string) ([]string, error) {
	var parse func(line []byte) (string, error)
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".jsonl", ".ndjson":
		parse = jsonlPrompt
	case ".txt":
		parse = func(line []byte) (string, error) { return string(line), nil }
	default:
		return nil, fmt.Errorf("%s: unknown prompts format %q (want .jsonl with a \"prompt\" field per line, or .txt with one prompt per line)", path, ext)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("prompts: %w", err)
	}
	defer f.Close()
	var prompts []string
	lr := newLineReader(f, MaxLineBytes)
	for {
		line, no, err := lr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, no, err)
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		p, err := parse(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, no, err)
		}
		prompts = append(prompts, p)
	}
	if len(prompts) == 0 {
		return nil, fmt.Errorf("%s: no prompts", path)
	}
	return prompts, nil
}

// jsonlPrompt is the "prompt" of one line of a prompts JSONL file.
func jsonlPrompt(line []byte) (string, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(line, &obj); err != nil {
		return "", fmt.Errorf("not a JSON object: %v", err)
	}
	raw, ok := obj["prompt"]
	if !ok {
		return "", errors.New(`no "prompt" field`)
	}
	var p string
	if err := json.Unmarshal(raw, &p); err != nil {
		return "", fmt.Errorf(`"prompt" is %s, want a string`, raw)
	}
	if strings.TrimSpace(p) == "" {
		return "", errors.New(`empty "prompt"`)
	}
	return p, nil
}
