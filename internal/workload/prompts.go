package workload

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
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
func BuiltinPrompts() []string { return append([]string(nil), builtin...) }

// PromptIndex is the prompt request (or client) i of a wave sends, of n
// prompts: they are assigned round-robin, i mod n.
func PromptIndex(i, n int) int { return i % n }

// LoadPrompts reads prompts from path: JSON Lines (.jsonl, .ndjson) with a
// string "prompt" field per line, or text (.txt) with one prompt per line.
// Blank lines are skipped. Errors name the file and line.
func LoadPrompts(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("prompts: %w", err)
	}
	var prompts []string
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".jsonl", ".ndjson":
		prompts, err = parseJSONL(path, data)
	case ".txt":
		prompts, err = parseText(path, data)
	default:
		return nil, fmt.Errorf("%s: unknown prompts format %q (want .jsonl with a \"prompt\" field per line, or .txt with one prompt per line)", path, ext)
	}
	if err != nil {
		return nil, err
	}
	if len(prompts) == 0 {
		return nil, fmt.Errorf("%s: no prompts", path)
	}
	return prompts, nil
}

func lines(data []byte) *bufio.Scanner {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	return sc
}

func parseJSONL(path string, data []byte) ([]string, error) {
	var out []string
	sc := lines(data)
	n := 0
	for sc.Scan() {
		n++
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(line, &obj); err != nil {
			return nil, fmt.Errorf("%s:%d: not a JSON object: %v", path, n, err)
		}
		raw, ok := obj["prompt"]
		if !ok {
			return nil, fmt.Errorf("%s:%d: no \"prompt\" field", path, n)
		}
		var p string
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, fmt.Errorf("%s:%d: \"prompt\" is %s, want a string", path, n, raw)
		}
		if strings.TrimSpace(p) == "" {
			return nil, fmt.Errorf("%s:%d: empty \"prompt\"", path, n)
		}
		out = append(out, p)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %v", path, n+1, err)
	}
	return out, nil
}

func parseText(path string, data []byte) ([]string, error) {
	var out []string
	sc := lines(data)
	n := 0
	for sc.Scan() {
		n++
		p := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(p) == "" {
			continue
		}
		out = append(out, p)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %v", path, n+1, err)
	}
	return out, nil
}
