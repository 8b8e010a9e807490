// Package chattemplate renders a prompt through a model's chat template on
// the client, as vLLM's bench serve does for its custom dataset
// (tokenizer.apply_chat_template([{"role": "user", "content": prompt}],
// add_generation_prompt=True, tokenize=False)). The template is the
// chat_template of the tokenizer_config.json beside the model's
// tokenizer.json; it is rendered with github.com/ardanlabs/jinja.
package chattemplate

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ardanlabs/jinja"
)

// ConfigFile is the file beside tokenizer.json that carries the template.
const ConfigFile = "tokenizer_config.json"

// ErrNone is a tokenizer_config.json without a chat_template.
var ErrNone = errors.New("no chat_template")

// Error is a template that could not be read or rendered: File names the
// tokenizer_config.json (or the tokenizer it should have been beside).
type Error struct {
	File string
	Err  error
}

func (e *Error) Error() string { return e.File + ": " + e.Err.Error() }

func (e *Error) Unwrap() error { return e.Err }

// Parse reads a chat_template value: a string, or a list of
// {name, template} (the one named "default"); ErrNone when absent or null.
func Parse(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", ErrNone
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var named []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if err := json.Unmarshal(raw, &named); err != nil {
		return "", errors.New("chat_template is neither a string nor a list of {name, template}")
	}
	for _, t := range named {
		if t.Name == "default" {
			return t.Template, nil
		}
	}
	return "", errors.New("chat_template lists no template named \"default\"")
}

// Template is a compiled chat template with the special tokens its
// tokenizer_config.json names, which transformers passes to it too.
type Template struct {
	file    string
	tmpl    *jinja.Template
	special map[string]any
}

// specialKeys are the special tokens transformers hands the template
// (its special_tokens_map), read from tokenizer_config.json.
var specialKeys = []string{"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}

// Load reads the chat template of the tokenizer_config.json beside the
// tokenizer.json at tokenizerPath (a file, or a folder holding one).
func Load(tokenizerPath string) (*Template, error) {
	dir := tokenizerPath
	if st, err := os.Stat(tokenizerPath); err != nil || !st.IsDir() {
		dir = filepath.Dir(tokenizerPath)
	}
	file := filepath.Join(dir, ConfigFile)
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, &Error{File: file, Err: fmt.Errorf("no chat template: %w", err)}
	}
	return FromConfig(file, data)
}

// FromConfig compiles the chat template of a tokenizer_config.json's
// bytes; file names it in errors.
func FromConfig(file string, data []byte) (*Template, error) {
	var c map[string]json.RawMessage
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, &Error{File: file, Err: fmt.Errorf("not a tokenizer_config.json: %v", err)}
	}
	src, err := Parse(c["chat_template"])
	if err != nil {
		return nil, &Error{File: file, Err: err}
	}
	tmpl, err := jinja.Compile(src)
	if err != nil {
		return nil, &Error{File: file, Err: fmt.Errorf("chat_template does not compile: %v", err)}
	}
	t := &Template{file: file, tmpl: tmpl, special: map[string]any{}}
	for _, k := range specialKeys {
		if name, ok := specialName(c[k]); ok {
			t.special[k] = name
		}
	}
	return t, nil
}

// specialName is a special token's text: a string, or an AddedToken
// object's "content"; false when absent or null.
func specialName(raw json.RawMessage) (string, bool) {
	var s string
	if len(raw) == 0 || string(raw) == "null" {
		return "", false
	}
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	var obj struct {
		Content string `json:"content"`
	}
	if json.Unmarshal(raw, &obj) != nil || obj.Content == "" {
		return "", false
	}
	return obj.Content, true
}

// RenderUser renders prompt as the one user message with the generation
// prompt added; kwargs are extra template variables (vLLM's
// --chat-template-kwargs), over the special tokens as transformers merges
// them.
func (t *Template) RenderUser(prompt string, kwargs map[string]any) (string, error) {
	data := make(map[string]any, len(t.special)+len(kwargs)+2)
	for k, v := range t.special {
		data[k] = v
	}
	for k, v := range kwargs {
		data[k] = v
	}
	data["messages"] = []any{map[string]any{"role": "user", "content": prompt}}
	data["add_generation_prompt"] = true
	out, err := t.tmpl.Render(data)
	if err != nil {
		return "", &Error{File: t.file, Err: fmt.Errorf("chat_template fails to render: %v", err)}
	}
	return out, nil
}
