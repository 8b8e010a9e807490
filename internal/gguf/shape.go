package gguf

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Shape is a decoder-only transformer's shape: what a model of random
// weights keeps of a real one. Field names follow the flags of `rehearse
// model write` (FieldError.Field).
type Shape struct {
	Arch     string  // "qwen2" or "llama"
	Layers   int     // block_count
	Embd     int     // embedding_length (hidden size)
	Heads    int     // attention.head_count
	KVHeads  int     // attention.head_count_kv
	FFN      int     // feed_forward_length (intermediate size)
	Vocab    int     // embedding rows; 0: the tokenizer's size
	Context  int     // context_length
	RopeBase float64 // rope.freq_base
	NormEps  float64 // attention.layer_norm_rms_epsilon
	// Tied shares the token embedding with the output layer (no
	// output.weight), as Qwen2.5-1.5B does.
	Tied bool
	// Type is the type of the two-dimensional tensors (F16 by default);
	// norms and biases are always F32, as llama.cpp's converter writes them.
	Type TensorType
}

// Architectures written. Both carry the value bias that holds the word
// constant (see the package doc); qwen2 also has query and key biases.
var archQKBias = map[string]bool{"qwen2": true, "llama": false}

// Architectures lists the architectures written, sorted.
func Architectures() []string {
	names := make([]string, 0, len(archQKBias))
	for n := range archQKBias {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Presets are named shapes. Qwen2.5's are from the models' config.json
// (Qwen/Qwen2.5-0.5B-Instruct, Qwen2.5-1.5B-Instruct). "ci" is the shape
// the end-to-end test and examples/ollama.yaml rehearse on a CPU: 24 layers
// of n_embd 512 (91 M weights in the layers, 78 M in the tied 151,669-token
// embedding; 340 MB). An engine on a CPU pays per sequence for what grows
// with the vocabulary (the output layer and sampling over every token), and
// shares among a batch what the layers cost, so batching pays only where
// the layers dominate: on 2 loaded cores, one ollama thread, 4 sequences
// decode 1.4-1.6x faster together than one after another, 8 sequences
// 2.5x; 8 layers of the same width gained 1.1x.
var Presets = map[string]Shape{
	"qwen2.5-0.5b": {Arch: "qwen2", Layers: 24, Embd: 896, Heads: 14, KVHeads: 2, FFN: 4864,
		Vocab: 151936, Context: 32768, RopeBase: 1e6, NormEps: 1e-6, Tied: true, Type: F16},
	"qwen2.5-1.5b": {Arch: "qwen2", Layers: 28, Embd: 1536, Heads: 12, KVHeads: 2, FFN: 8960,
		Vocab: 151936, Context: 32768, RopeBase: 1e6, NormEps: 1e-6, Tied: true, Type: F16},
	"ci": {Arch: "qwen2", Layers: 24, Embd: 512, Heads: 8, KVHeads: 2, FFN: 2048,
		Context: 4096, RopeBase: 1e6, NormEps: 1e-6, Tied: true, Type: F16},
}

// PresetNames lists the presets, sorted.
func PresetNames() []string {
	names := make([]string, 0, len(Presets))
	for n := range Presets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// FieldError is a shape or option that cannot be written; Field is the
// flag's name (without dashes).
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Limits that keep a typo from asking for a file no disk holds.
const (
	maxLayers = 1024
	maxEmbd   = 1 << 16
	maxFFN    = 1 << 18
	maxVocab  = 1 << 22
)

// Validate checks the shape against a tokenizer of tokenizerVocab ids.
func (s Shape) Validate(tokenizerVocab int) error {
	switch {
	case !slices.Contains(Architectures(), s.Arch):
		return fieldErr("arch", "%q is not written (want %s)", s.Arch, strings.Join(Architectures(), " or "))
	case s.Layers < 1 || s.Layers > maxLayers:
		return fieldErr("layers", "%d is outside 1..%d", s.Layers, maxLayers)
	case s.Heads < 1:
		return fieldErr("heads", "%d is not a positive head count", s.Heads)
	case s.Embd < 2 || s.Embd > maxEmbd || s.Embd%s.Heads != 0:
		return fieldErr("embd", "%d must be in 2..%d and a multiple of --heads (%d)", s.Embd, maxEmbd, s.Heads)
	case (s.Embd/s.Heads)%2 != 0:
		return fieldErr("embd", "the head size %d/%d = %d must be even (rotary embeddings turn pairs)", s.Embd, s.Heads, s.Embd/s.Heads)
	case s.KVHeads < 1 || s.Heads%s.KVHeads != 0:
		return fieldErr("kv-heads", "%d must be positive and divide --heads (%d)", s.KVHeads, s.Heads)
	case s.FFN < 1 || s.FFN > maxFFN:
		return fieldErr("ffn", "%d is outside 1..%d", s.FFN, maxFFN)
	case s.Vocab != 0 && (s.Vocab < tokenizerVocab || s.Vocab > maxVocab):
		return fieldErr("vocab", "%d must be at least the tokenizer's %d ids (and at most %d)", s.Vocab, tokenizerVocab, maxVocab)
	case s.Context < 1:
		return fieldErr("context", "%d is not a positive context length", s.Context)
	case s.RopeBase <= 0:
		return fieldErr("rope-base", "%g must be positive", s.RopeBase)
	case s.NormEps <= 0 || s.NormEps >= 1:
		return fieldErr("norm-eps", "%g must be in (0, 1)", s.NormEps)
	case s.Type != F16 && s.Type != F32:
		return fieldErr("type", "ggml type %d is not written (want F16 or F32)", s.Type)
	}
	return nil
}

// ParseType reads "f16" or "f32".
func ParseType(s string) (TensorType, error) {
	switch strings.ToLower(s) {
	case "f16":
		return F16, nil
	case "f32":
		return F32, nil
	}
	return 0, fieldErr("type", "%q is not f16 or f32", s)
}

// headDim is the size of one attention head.
func (s Shape) headDim() int { return s.Embd / s.Heads }
