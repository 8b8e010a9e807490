package gguf

import (
	"fmt"
	"io"
	"time"
)

// With is s with the fields of given that set names replaced, by their
// flag names (FieldError.Field): arch, layers, embd, heads, kv-heads,
// ffn, vocab, context, rope-base, norm-eps, tied. A preset's shape with
// the shape flags given keeps the preset's other fields.
func (s Shape) With(given Shape, set func(field string) bool) Shape {
	for field, take := range map[string]func(){
		"arch": func() { s.Arch = given.Arch }, "layers": func() { s.Layers = given.Layers },
		"embd": func() { s.Embd = given.Embd }, "heads": func() { s.Heads = given.Heads },
		"kv-heads": func() { s.KVHeads = given.KVHeads }, "ffn": func() { s.FFN = given.FFN },
		"vocab": func() { s.Vocab = given.Vocab }, "context": func() { s.Context = given.Context },
		"rope-base": func() { s.RopeBase = given.RopeBase }, "norm-eps": func() { s.NormEps = given.NormEps },
		"tied": func() { s.Tied = given.Tied },
	} {
		if set(field) {
			take()
		}
	}
	return s
}

// CreateOptions is a model file to write.
type CreateOptions struct {
	Shape Shape
	Seed  uint64
	// Tokenizer is the tokenizer.json, or a folder holding one ("": the
	// embedded Qwen file); TokenizerConfig its tokenizer_config.json ("":
	// the one beside it, if any; ReadTokenizerFiles).
	Tokenizer, TokenizerConfig string
	// Path is the GGUF file written.
	Path string
}

// Create reads the tokenizer files, builds the model (New) and writes it
// to Path: a line on log says what it writes once the shape is checked,
// a line on out what it wrote (size, time, tokenizer, the whole-word
// tokens it may emit). A shape or tokenizer refused is a *FieldError
// naming the flag.
func Create(o CreateOptions, out, log io.Writer) error {
	start := time.Now()
	tokJSON, config, err := ReadTokenizerFiles(o.Tokenizer, o.TokenizerConfig)
	if err != nil {
		return err
	}
	m, err := New(o.Shape, o.Seed, tokJSON, config)
	if err != nil {
		return err
	}
	s := m.Shape
	fmt.Fprintf(log, "writing %s: %s, %d layers, n_embd %d, %d heads (%d kv), ffn %d, vocab %d, tied %v, %s, seed %d, %d parameters\n",
		o.Path, s.Arch, s.Layers, s.Embd, s.Heads, s.KVHeads, s.FFN, s.Vocab, s.Tied, s.Type, m.Seed, m.Params())
	n, err := m.WriteFile(o.Path)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "wrote %s: %d bytes (%.1f MiB) in %.1f s; tokenizer %s (sha256 %s), %d whole-word tokens it may emit\n",
		o.Path, n, float64(n)/(1<<20), time.Since(start).Seconds(), m.Tokenizer.Name, m.Tokenizer.SHA256, m.Words)
	return nil
}
