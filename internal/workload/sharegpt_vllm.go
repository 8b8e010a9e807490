package workload

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// resolveShareGPTVLLM samples a ShareGPT file as vllm bench serve does
// (OrderVLLM, OrderVLLMUnshuffled): every entry of two turns or more is
// read, shuffled with vLLM's seed unless unshuffled, and taken in that
// order while vLLM's length checks keep it.
func resolveShareGPTVLLM(spec Spec, env Env, ds Dataset) (Set, error) {
	if ds.Order != OrderVLLM && ds.Order != OrderVLLMUnshuffled {
		return Set{}, fmt.Errorf("sharegpt: order %q: want %s or %s", ds.Order, OrderVLLM, OrderVLLMUnshuffled)
	}
	if spec.Sessions != nil {
		return Set{}, fmt.Errorf("sharegpt: vLLM's order samples single prompts, not sessions")
	}
	turns, sum, err := shareGPTPairs(spec.Path)
	if err != nil {
		return Set{}, err
	}
	if ds.Order == OrderVLLM && ds.Seed < 0 {
		return Set{}, fmt.Errorf("sharegpt: seed %d: vLLM's shuffle takes a seed of 0 or more", ds.Seed)
	}
	if ds.Order == OrderVLLM {
		newPyRandom(uint64(ds.Seed)).shuffle(len(turns), func(i, j int) { turns[i], turns[j] = turns[j], turns[i] })
	}
	var set Set
	skipped := map[string]int{}
	for _, t := range turns {
		if ds.Count > 0 && len(set.Prompts) >= ds.Count {
			break
		}
		in := env.Tokenizer.Count(t[0])
		out := ds.OutputLen
		if ds.UseOutputLen || out == 0 {
			out = env.Tokenizer.Count(t[1])
		}
		switch {
		case !vllmValidSequence(in, out, !ds.UseOutputLen && ds.OutputLen > 0):
			skipped[SkipVLLMLength]++
			continue
		case ds.MaxModelLen > 0 && in+out > ds.MaxModelLen:
			skipped[SkipTooLong]++
			continue
		}
		p := Prompt{Text: t[0]}
		if ds.UseOutputLen {
			p.MaxTokens = out
		}
		set.Prompts = append(set.Prompts, p)
	}
	if len(set.Prompts) == 0 {
		return Set{}, fmt.Errorf("%s: no entry passes vLLM's length checks (prompt 4 to 1024 tokens, output at least 4, both at most 2048)", spec.Path)
	}
	params := datasetParams(spec.Path, ds)
	params["order"] = ds.Order
	if ds.Order == OrderVLLM {
		params["seed"] = ds.Seed
	}
	if ds.OutputLen > 0 && !ds.UseOutputLen {
		params["output_len"] = ds.OutputLen
	}
	set.Record = SourceRecord{SHA256: sum, Params: params}
	if len(skipped) > 0 {
		set.Record.Skipped = skipped
	}
	return set, nil
}

// vllmValidSequence is vLLM's is_valid_sequence with its defaults.
func vllmValidSequence(promptLen, outputLen int, fixedOutput bool) bool {
	return promptLen >= 4 && (fixedOutput || outputLen >= 4) && promptLen <= 1024 && promptLen+outputLen <= 2048
}

// shareGPTPairs reads the first two turns' texts of every entry with two
// turns or more, in file order, as vLLM's load_data keeps them, and the
// file's SHA-256.
func shareGPTPairs(path string) ([][2]string, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, "", fmt.Errorf("prompts: %w", err)
	}
	defer f.Close()
	digest := newDigestReader(f)
	bound := &entryBound{r: bufio.NewReaderSize(digest, 1<<20), max: MaxLineBytes}
	bound.from(0)
	dec := json.NewDecoder(bound)
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return nil, "", fmt.Errorf("%s: want a JSON list of {\"conversations\": [...]} entries", path)
	}
	var out [][2]string
	for i := 0; ; i++ {
		bound.from(dec.InputOffset())
		if !dec.More() {
			break
		}
		var e shareGPTEntry
		if err := dec.Decode(&e); err != nil {
			return nil, "", fmt.Errorf("%s: entry %d (byte %d): %v", path, i, dec.InputOffset(), err)
		}
		if c := e.Conversations; len(c) >= 2 {
			out = append(out, [2]string{c[0].Value, c[1].Value})
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, "", fmt.Errorf("%s: the list does not end: %v", path, err)
	}
	if _, err := io.Copy(io.Discard, digest); err != nil {
		return nil, "", fmt.Errorf("%s: %v", path, err)
	}
	return out, digest.sum(), nil
}
