package gguf

import (
	"errors"
	"testing"

	"github.com/rehearse/rehearse/internal/tokenizer"
)

func TestReadVocabularyEmbedded(t *testing.T) {
	data, err := tokenizer.EmbeddedJSON()
	if err != nil {
		t.Fatal(err)
	}
	v, err := ReadVocabulary(data, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Tokens) != 151669 || len(v.Types) != 151669 || len(v.Merges) != 151387 {
		t.Fatalf("tokens %d, types %d, merges %d; want 151669, 151669, 151387", len(v.Tokens), len(v.Types), len(v.Merges))
	}
	for _, c := range []struct {
		id    int
		token string
		typ   int32
	}{
		{0, "!", tokenNormal}, {220, "Ġ", tokenNormal}, {151643, "<|endoftext|>", tokenControl},
		{151645, "<|im_end|>", tokenControl}, {151657, "<tool_call>", tokenUserDefined}, {151668, "</think>", tokenUserDefined},
	} {
		if v.Tokens[c.id] != c.token || v.Types[c.id] != c.typ {
			t.Errorf("id %d: %q type %d; want %q type %d", c.id, v.Tokens[c.id], v.Types[c.id], c.token, c.typ)
		}
	}
	if v.Merges[0] != "Ġ Ġ" || v.Merges[2] != "i n" {
		t.Errorf("merges start %q, %q, %q", v.Merges[0], v.Merges[1], v.Merges[2])
	}
	if v.EOS != 151645 || v.BOS != 151643 || v.Pad != 151643 || v.ChatTemplate != ChatML {
		t.Errorf("eos %d bos %d pad %d template %q", v.EOS, v.BOS, v.Pad, v.ChatTemplate)
	}
	tokens, types := v.Padded(151936)
	if len(tokens) != 151936 || tokens[151669] != "[PAD151669]" || types[151935] != tokenUnused {
		t.Errorf("padded: %d tokens, [151669] %q, type[151935] %d", len(tokens), tokens[151669], types[151935])
	}
	if len(v.Tokens) != 151669 {
		t.Errorf("Padded grew the vocabulary itself to %d", len(v.Tokens))
	}
}

// A small tokenizer.json with pair merges, a gap in its ids, and a config
// whose special tokens and template take every accepted form.
const smallTokenizer = `{"added_tokens": [{"id": 5, "content": "<s>", "special": true}, {"id": 6, "content": "</s>", "special": true}],
 "model": {"vocab": {"a": 0, "b": 1, "ab": 2, "Ġ": 3}, "merges": [["a", "b"]]}}`

func TestReadVocabularyConfigForms(t *testing.T) {
	for _, c := range []struct {
		name, config string
		bos, eos     int32
		template     string
	}{
		{"strings", `{"bos_token": "<s>", "eos_token": "</s>", "pad_token": "</s>", "chat_template": "T"}`, 5, 6, "T"},
		// A null bos_token falls back to the pad token.
		{"objects, null and a named list", `{"bos_token": null, "eos_token": {"content": "</s>"}, "pad_token": {"content": "<s>"},
		  "chat_template": [{"name": "tool_use", "template": "U"}, {"name": "default", "template": "D"}]}`, 5, 6, "D"},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, err := ReadVocabulary([]byte(smallTokenizer), []byte(c.config))
			if err != nil {
				t.Fatal(err)
			}
			if v.BOS != c.bos || v.EOS != c.eos || v.ChatTemplate != c.template {
				t.Errorf("bos %d eos %d template %q", v.BOS, v.EOS, v.ChatTemplate)
			}
			if v.Merges[0] != "a b" || v.Tokens[4] != "[PAD4]" || v.Types[4] != tokenUnused || v.Types[5] != tokenControl {
				t.Errorf("merges %q, token 4 %q type %d, type 5 %d", v.Merges, v.Tokens[4], v.Types[4], v.Types[5])
			}
		})
	}
}

func TestReadVocabularyRefuses(t *testing.T) {
	for _, c := range []struct {
		name, tok, config, field string
	}{
		{"no config and no Qwen specials", smallTokenizer, "", "tokenizer-config"},
		{"eos not in the vocabulary", smallTokenizer, `{"eos_token": "<|eot|>", "pad_token": "<s>"}`, "tokenizer-config"},
		{"no default template", smallTokenizer, `{"eos_token": "</s>", "pad_token": "<s>", "chat_template": [{"name": "x", "template": "X"}]}`, "tokenizer-config"},
		{"not JSON", `{`, "", "tokenizer"},
		{"a merge of three", `{"model": {"vocab": {"a": 0}, "merges": [["a", "b", "c"]]}}`, "", "tokenizer"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var cfg []byte
			if c.config != "" {
				cfg = []byte(c.config)
			}
			_, err := ReadVocabulary([]byte(c.tok), cfg)
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != c.field {
				t.Fatalf("error %v; want a %s error", err, c.field)
			}
		})
	}
}
