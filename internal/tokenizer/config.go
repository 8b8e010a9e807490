package tokenizer

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// The pre-tokenizer regexes this package implements by hand, exactly as the
// tokenizers library's Oniguruma engine runs them. Any other pattern is refused.
const (
	qwen2Pattern  = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	llama3Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	gpt2Pattern   = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
)

// fileJSON is the part of a tokenizer.json this package reads. Components are
// kept raw so each can be checked against what is implemented.
type fileJSON struct {
	Version       string           `json:"version"`
	Truncation    json.RawMessage  `json:"truncation"`
	Padding       json.RawMessage  `json:"padding"`
	AddedTokens   []addedTokenJSON `json:"added_tokens"`
	Normalizer    json.RawMessage  `json:"normalizer"`
	PreTokenizer  json.RawMessage  `json:"pre_tokenizer"`
	PostProcessor json.RawMessage  `json:"post_processor"`
	Decoder       json.RawMessage  `json:"decoder"`
	Model         modelJSON        `json:"model"`
}

type addedTokenJSON struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

type modelJSON struct {
	Type                    string   `json:"type"`
	Dropout                 *float64 `json:"dropout"`
	UnkToken                *string  `json:"unk_token"`
	ContinuingSubwordPrefix *string  `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string  `json:"end_of_word_suffix"`
	FuseUnk                 bool     `json:"fuse_unk"`
	ByteFallback            bool     `json:"byte_fallback"`
	IgnoreMerges            bool     `json:"ignore_merges"`
}

type componentJSON struct {
	Type           string            `json:"type"`
	Normalizers    []json.RawMessage `json:"normalizers"`
	Pretokenizers  []json.RawMessage `json:"pretokenizers"`
	Processors     []json.RawMessage `json:"processors"`
	Decoders       []json.RawMessage `json:"decoders"`
	Pattern        *patternJSON      `json:"pattern"`
	Behavior       string            `json:"behavior"`
	Invert         bool              `json:"invert"`
	AddPrefixSpace bool              `json:"add_prefix_space"`
	TrimOffsets    bool              `json:"trim_offsets"`
	UseRegex       *bool             `json:"use_regex"`
}

type patternJSON struct {
	Regex  *string `json:"Regex"`
	String *string `json:"String"`
}

// config is a validated tokenizer.json: what Encode needs, nothing guessed.
type config struct {
	nfc          bool
	ignoreMerges bool // a piece found whole in the vocabulary is one token, reachable by merges or not
	split        splitKind
	vocab        map[string]int // key: raw bytes of the token
	merges       [][2]string    // raw bytes of each side, in rank order
	addedTokens  []addedTokenJSON
	model        *bpe
	sha256       string // of the tokenizer.json bytes
}

// maxID bounds token ids, so a corrupt file cannot ask for a huge table.
const maxID = 1 << 24

func isNull(m json.RawMessage) bool {
	t := bytes.TrimSpace(m)
	return len(t) == 0 || string(t) == "null"
}

func parseConfig(data []byte) (*config, error) {
	var f fileJSON
	vocab, merges, err := splitFile(data, &f)
	if err != nil {
		// A tokenizer of another kind fails the scan (a Unigram vocabulary
		// is a list, a SentencePiece-style one is not byte-level): name the
		// component that makes it so.
		if cerr := componentError(data); cerr != nil {
			return nil, cerr
		}
		return nil, fmt.Errorf("not a tokenizer.json: %v", err)
	}
	c := &config{ignoreMerges: f.Model.IgnoreMerges, vocab: vocab, merges: merges}
	if c.nfc, c.split, err = checkComponents(&f); err != nil {
		return nil, err
	}
	if len(vocab) == 0 {
		return nil, fmt.Errorf("model.vocab is empty")
	}

	for i := 0; i < 256; i++ {
		if _, ok := c.vocab[string([]byte{byte(i)})]; !ok {
			return nil, fmt.Errorf("model.vocab lacks the token for byte 0x%02x; byte-level BPE needs all 256", i)
		}
	}
	for _, a := range f.AddedTokens {
		if a.SingleWord || a.LStrip || a.RStrip {
			return nil, fmt.Errorf("added token %q (id %d) uses single_word/lstrip/rstrip, which are not implemented", a.Content, a.ID)
		}
		if a.Content == "" {
			return nil, fmt.Errorf("added token id %d has empty content", a.ID)
		}
		if a.ID < 0 {
			return nil, fmt.Errorf("added token %q has negative id %d", a.Content, a.ID)
		}
	}
	c.addedTokens = f.AddedTokens
	for b, id := range c.vocab {
		if id >= maxID {
			return nil, fmt.Errorf("model.vocab token %q has id %d, over the %d this package allows", byteLevelEncode([]byte(b)), id, maxID)
		}
	}
	for _, a := range c.addedTokens {
		if a.ID >= maxID {
			return nil, fmt.Errorf("added token %q has id %d, over the %d this package allows", a.Content, a.ID, maxID)
		}
	}
	if c.model, err = newBPE(c.vocab, c.merges); err != nil {
		return nil, err
	}
	c.merges = nil // the model holds them now
	sum := sha256.Sum256(data)
	c.sha256 = hex.EncodeToString(sum[:])
	return c, nil
}

// checkComponents refuses, by name, every component of f that this package
// does not implement, and returns what the implemented ones ask for.
func checkComponents(f *fileJSON) (nfc bool, split splitKind, err error) {
	m := f.Model
	switch {
	case m.Type != "BPE":
		return false, 0, fmt.Errorf("model.type %q is not implemented (only BPE)", m.Type)
	case m.ByteFallback:
		return false, 0, fmt.Errorf("model.byte_fallback true: a SentencePiece-style BPE (Llama 2, Mistral, Gemma) is not implemented, only byte-level BPE")
	case !isNull(f.Truncation):
		return false, 0, fmt.Errorf("truncation is set; only a tokenizer.json without truncation is implemented")
	case !isNull(f.Padding):
		return false, 0, fmt.Errorf("padding is set; only a tokenizer.json without padding is implemented")
	case m.Dropout != nil && *m.Dropout != 0:
		return false, 0, fmt.Errorf("model.dropout %v is not implemented (BPE dropout is random)", *m.Dropout)
	case m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "":
		return false, 0, fmt.Errorf("model.continuing_subword_prefix %q is not implemented", *m.ContinuingSubwordPrefix)
	case m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "":
		return false, 0, fmt.Errorf("model.end_of_word_suffix %q is not implemented", *m.EndOfWordSuffix)
	}
	if nfc, err = parseNormalizer(f.Normalizer); err != nil {
		return false, 0, err
	}
	if split, err = parsePreTokenizer(f.PreTokenizer); err != nil {
		return false, 0, err
	}
	if err := parseDecoder(f.Decoder); err != nil {
		return false, 0, err
	}
	if err := parsePostProcessor(f.PostProcessor); err != nil {
		return false, 0, err
	}
	return nfc, split, nil
}

// componentError is the first component of the tokenizer.json in data that
// this package does not implement; nil when there is none or data is not
// JSON.
func componentError(data []byte) error {
	var f fileJSON
	if json.Unmarshal(data, &f) != nil {
		return nil
	}
	_, _, err := checkComponents(&f)
	return err
}

func parseNormalizer(raw json.RawMessage) (nfc bool, err error) {
	if isNull(raw) {
		return false, nil
	}
	var n componentJSON
	if err := json.Unmarshal(raw, &n); err != nil {
		return false, fmt.Errorf("normalizer: %v", err)
	}
	switch n.Type {
	case "NFC":
		return true, nil
	case "Sequence":
		for _, sub := range n.Normalizers {
			s, err := parseNormalizer(sub)
			if err != nil {
				return false, err
			}
			nfc = nfc || s
		}
		if len(n.Normalizers) > 1 {
			return false, fmt.Errorf("normalizer: a Sequence of %d normalizers is not implemented", len(n.Normalizers))
		}
		return nfc, nil
	}
	return false, fmt.Errorf("normalizer type %q is not implemented (only NFC or none)", n.Type)
}

func parsePreTokenizer(raw json.RawMessage) (splitKind, error) {
	if isNull(raw) {
		return 0, fmt.Errorf("pre_tokenizer is null; only byte-level pre-tokenizers are implemented")
	}
	var p componentJSON
	if err := json.Unmarshal(raw, &p); err != nil {
		return 0, fmt.Errorf("pre_tokenizer: %v", err)
	}
	switch p.Type {
	case "ByteLevel":
		if err := checkByteLevel("pre_tokenizer", p); err != nil {
			return 0, err
		}
		if p.UseRegex == nil || *p.UseRegex {
			return splitGPT2, nil
		}
		return 0, fmt.Errorf("pre_tokenizer: ByteLevel without regex and without a Split before it is not implemented")
	case "Sequence":
		if len(p.Pretokenizers) != 2 {
			return 0, fmt.Errorf("pre_tokenizer: a Sequence of %d pre-tokenizers is not implemented (only Split then ByteLevel)", len(p.Pretokenizers))
		}
		var sp, bl componentJSON
		if err := json.Unmarshal(p.Pretokenizers[0], &sp); err != nil {
			return 0, fmt.Errorf("pre_tokenizer: %v", err)
		}
		if err := json.Unmarshal(p.Pretokenizers[1], &bl); err != nil {
			return 0, fmt.Errorf("pre_tokenizer: %v", err)
		}
		if sp.Type != "Split" || bl.Type != "ByteLevel" {
			return 0, fmt.Errorf("pre_tokenizer: Sequence of %s, %s is not implemented (only Split then ByteLevel)", sp.Type, bl.Type)
		}
		if err := checkByteLevel("pre_tokenizer", bl); err != nil {
			return 0, err
		}
		if bl.UseRegex == nil || *bl.UseRegex {
			return 0, fmt.Errorf("pre_tokenizer: ByteLevel with use_regex after a Split is not implemented")
		}
		if sp.Behavior != "Isolated" || sp.Invert {
			return 0, fmt.Errorf("pre_tokenizer: Split behavior %q invert %v is not implemented (only Isolated, not inverted)", sp.Behavior, sp.Invert)
		}
		if sp.Pattern == nil || sp.Pattern.Regex == nil {
			return 0, fmt.Errorf("pre_tokenizer: Split without a Regex pattern is not implemented")
		}
		switch *sp.Pattern.Regex {
		case qwen2Pattern:
			return splitQwen2, nil
		case llama3Pattern:
			return splitLlama3, nil
		case gpt2Pattern:
			return splitGPT2, nil
		}
		return 0, fmt.Errorf("pre_tokenizer: Split regex %q is not implemented (only the Qwen2, Llama 3 and GPT-2 patterns)", shortened(*sp.Pattern.Regex))
	}
	if p.Type == "Metaspace" {
		return 0, fmt.Errorf("pre_tokenizer type %q is not implemented (a SentencePiece-style tokenizer; only byte-level pre-tokenizers are)", p.Type)
	}
	return 0, fmt.Errorf("pre_tokenizer type %q is not implemented", p.Type)
}

// shortened is s cut to 80 characters, for a message of one line.
func shortened(s string) string {
	if r := []rune(s); len(r) > 80 {
		return string(r[:80]) + "…"
	}
	return s
}

func checkByteLevel(where string, p componentJSON) error {
	if p.AddPrefixSpace {
		return fmt.Errorf("%s: ByteLevel add_prefix_space true is not implemented", where)
	}
	return nil
}

func parseDecoder(raw json.RawMessage) error {
	if isNull(raw) {
		return fmt.Errorf("decoder is null; only the ByteLevel decoder is implemented")
	}
	var d componentJSON
	if err := json.Unmarshal(raw, &d); err != nil {
		return fmt.Errorf("decoder: %v", err)
	}
	if d.Type != "ByteLevel" {
		return fmt.Errorf("decoder type %q is not implemented (only ByteLevel)", d.Type)
	}
	return nil
}

// parsePostProcessor accepts what adds nothing when no special tokens are
// requested: none, or ByteLevel (offsets only).
func parsePostProcessor(raw json.RawMessage) error {
	if isNull(raw) {
		return nil
	}
	var d componentJSON
	if err := json.Unmarshal(raw, &d); err != nil {
		return fmt.Errorf("post_processor: %v", err)
	}
	switch d.Type {
	case "ByteLevel", "TemplateProcessing", "RobertaProcessing", "BertProcessing":
		// Only consulted when special tokens are added; Encode never adds them.
		return nil
	case "Sequence":
		for _, sub := range d.Processors {
			if err := parsePostProcessor(sub); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("post_processor type %q is not implemented", d.Type)
}
