package gguf

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rehearse/rehearse/internal/chattemplate"
	"github.com/rehearse/rehearse/internal/tokenizer"
)

// Token types, as llama.cpp's converter writes tokenizer.ggml.token_type.
const (
	tokenNormal      = 1
	tokenControl     = 3
	tokenUserDefined = 4
	tokenUnused      = 5
)

// ChatML is the chat template written when no tokenizer_config.json gives
// one (Qwen2-Instruct's, without the default system message); ollama
// recognises it as its "chatml" template.
const ChatML = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"

// Vocabulary is what a GGUF carries of a tokenizer: every id's token as
// tokenizer.json spells it (byte-level), its type, the merges in rank order
// ("left right"), the special tokens' ids and the chat template.
type Vocabulary struct {
	Tokens       []string
	Types        []int32
	Merges       []string
	BOS, EOS     int32
	Pad          int32
	ChatTemplate string
}

// tokenizerFile is the part of a tokenizer.json a GGUF carries.
type tokenizerFile struct {
	AddedTokens []struct {
		ID      int    `json:"id"`
		Content string `json:"content"`
		Special bool   `json:"special"`
	} `json:"added_tokens"`
	Model struct {
		Vocab  map[string]int    `json:"vocab"`
		Merges []json.RawMessage `json:"merges"`
	} `json:"model"`
}

// tokenizerConfig is the part of a tokenizer_config.json read: the chat
// template and the special tokens, each a string, an AddedToken object or
// null.
type tokenizerConfig struct {
	ChatTemplate json.RawMessage `json:"chat_template"`
	BOS          json.RawMessage `json:"bos_token"`
	EOS          json.RawMessage `json:"eos_token"`
	Pad          json.RawMessage `json:"pad_token"`
}

// ReadVocabulary reads a tokenizer.json's vocabulary, merges and added
// tokens, and the special tokens and chat template of its
// tokenizer_config.json (config; nil when there is none: then ChatML with
// <|im_end|> as eos and <|endoftext|> as bos and pad, the Qwen chat models'
// choice, when the vocabulary has those tokens).
func ReadVocabulary(tokenizerJSON, config []byte) (*Vocabulary, error) {
	var f tokenizerFile
	if err := json.Unmarshal(tokenizerJSON, &f); err != nil {
		return nil, fieldErr("tokenizer", "not a tokenizer.json: %v", err)
	}
	v := &Vocabulary{}
	ids := map[string]int{}
	set := func(id int, token string, typ int32) error {
		if id < 0 || id >= maxVocab {
			return fieldErr("tokenizer", "token %q has id %d, outside 0..%d", token, id, maxVocab-1)
		}
		for len(v.Tokens) <= id {
			v.Tokens = append(v.Tokens, "")
			v.Types = append(v.Types, 0)
		}
		v.Tokens[id], v.Types[id] = token, typ
		ids[token] = id
		return nil
	}
	for token, id := range f.Model.Vocab {
		if err := set(id, token, tokenNormal); err != nil {
			return nil, err
		}
	}
	for _, a := range f.AddedTokens {
		typ := int32(tokenUserDefined)
		if a.Special {
			typ = tokenControl
		}
		if err := set(a.ID, a.Content, typ); err != nil {
			return nil, err
		}
	}
	for id, typ := range v.Types {
		if typ == 0 { // an id nothing names
			v.Tokens[id], v.Types[id] = fmt.Sprintf("[PAD%d]", id), tokenUnused
		}
	}
	var err error
	if v.Merges, err = readMerges(f.Model.Merges); err != nil {
		return nil, err
	}
	return v, v.readSpecials(config, ids)
}

// readMerges accepts both spellings of model.merges: "a b" strings and
// ["a", "b"] pairs.
func readMerges(raw []json.RawMessage) ([]string, error) {
	out := make([]string, len(raw))
	for i, m := range raw {
		var s string
		if json.Unmarshal(m, &s) == nil {
			out[i] = s
			continue
		}
		var pair []string
		if err := json.Unmarshal(m, &pair); err != nil || len(pair) != 2 {
			return nil, fieldErr("tokenizer", "model.merges[%d] is neither \"a b\" nor [\"a\", \"b\"]", i)
		}
		if strings.Contains(pair[0], " ") || strings.Contains(pair[1], " ") {
			return nil, fieldErr("tokenizer", "model.merges[%d] %q holds a space, which GGUF's \"a b\" merges cannot say", i, pair)
		}
		out[i] = pair[0] + " " + pair[1]
	}
	return out, nil
}

// readSpecials sets the special tokens and chat template from config, or
// the ChatML defaults.
func (v *Vocabulary) readSpecials(config []byte, ids map[string]int) error {
	var c tokenizerConfig
	if config != nil {
		if err := json.Unmarshal(config, &c); err != nil {
			return fieldErr("tokenizer-config", "not a tokenizer_config.json: %v", err)
		}
	}
	eos, err := specialName(c.EOS, "<|im_end|>")
	if err != nil {
		return err
	}
	pad, err := specialName(c.Pad, "<|endoftext|>")
	if err != nil {
		return err
	}
	bos, err := specialName(c.BOS, pad)
	if err != nil {
		return err
	}
	for _, s := range []struct {
		name, token string
		id          *int32
	}{{"eos_token", eos, &v.EOS}, {"pad_token", pad, &v.Pad}, {"bos_token", bos, &v.BOS}} {
		id, ok := ids[s.token]
		if !ok {
			return fieldErr("tokenizer-config", "%s %q is not in the tokenizer's vocabulary; pass the model's tokenizer_config.json", s.name, s.token)
		}
		*s.id = int32(id)
	}
	v.ChatTemplate, err = chatTemplate(c.ChatTemplate)
	return err
}

// specialName reads a special token from its config value: a string, an
// object with "content", or null/absent (then def).
func specialName(raw json.RawMessage, def string) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return def, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var obj struct {
		Content string `json:"content"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Content == "" {
		return "", fieldErr("tokenizer-config", "a special token is neither a string nor {\"content\": ...}: %s", raw)
	}
	return obj.Content, nil
}

// chatTemplate reads chat_template as chattemplate.Parse does (the one
// reading bench serve renders with), or ChatML where there is none.
func chatTemplate(raw json.RawMessage) (string, error) {
	s, err := chattemplate.Parse(raw)
	switch {
	case errors.Is(err, chattemplate.ErrNone):
		return ChatML, nil
	case err != nil:
		return "", fieldErr("tokenizer-config", "%v", err)
	}
	return s, nil
}

// Padded returns the tokens and types grown to n ids with unused "[PADi]"
// tokens, as llama.cpp's converter pads Qwen's 151,643 + added tokens to the
// embedding's 151,936 rows.
func (v *Vocabulary) Padded(n int) ([]string, []int32) {
	tokens, types := slices.Clip(v.Tokens), slices.Clip(v.Types)
	for id := len(tokens); id < n; id++ {
		tokens = append(tokens, fmt.Sprintf("[PAD%d]", id))
		types = append(types, tokenUnused)
	}
	return tokens, types
}

// ReadTokenizerFiles reads the tokenizer.json at path (or in the folder
// path: tokenizer.File, as the one resolver reads it) and the
// tokenizer_config.json at configPath, or beside the tokenizer.json when
// configPath is "" (nil when there is none). path "" means the embedded
// Qwen file (nil bytes; New reads it).
func ReadTokenizerFiles(path, configPath string) (tokenizerJSON, config []byte, err error) {
	if path != "" {
		path = tokenizer.File(path)
		if tokenizerJSON, err = os.ReadFile(path); err != nil {
			return nil, nil, fieldErr("tokenizer", "%v", err)
		}
		if configPath == "" {
			beside := filepath.Join(filepath.Dir(path), "tokenizer_config.json")
			if _, err := os.Stat(beside); err == nil {
				configPath = beside
			}
		}
	}
	if configPath != "" {
		if config, err = os.ReadFile(configPath); err != nil {
			return nil, nil, fieldErr("tokenizer-config", "%v", err)
		}
	}
	return tokenizerJSON, config, nil
}
