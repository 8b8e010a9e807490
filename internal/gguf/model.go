package gguf

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/rehearse/rehearse/internal/tokenizer"
)

// The whole-word construction's constants (see the package doc).
const (
	weightStd  = 0.02 // random weights, as Hugging Face initialises them
	wordMargin = 4    // ± in dimension 0 of a token's output weights
	valueConst = 8    // attn_v.bias[0]: value channel 0 of kv head 0
	outputGain = 8    // attn_output.weight[0][0]: that channel into dimension 0
)

// Model is a model of a given shape with seeded random weights and a real
// tokenizer's vocabulary, ready to be written.
type Model struct {
	Shape Shape
	Seed  uint64
	// Name is general.name.
	Name string
	// Tokenizer is the tokenizer.json the vocabulary came from.
	Tokenizer tokenizer.Info
	// Words is how many ids the model may emit (WordTokens).
	Words int
	vocab *Vocabulary
	words []bool
}

// New checks shape against the tokenizer (tokenizerJSON nil: the embedded
// Qwen file) and its tokenizer_config.json (nil: none), and returns the
// model to write. Its errors are *FieldError naming the flag at fault.
func New(shape Shape, seed uint64, tokenizerJSON, tokenizerConfig []byte) (*Model, error) {
	var tok *tokenizer.Tokenizer
	var err error
	if tokenizerJSON == nil {
		if tokenizerJSON, err = tokenizer.EmbeddedJSON(); err != nil {
			return nil, err
		}
		tok, err = tokenizer.Default()
	} else {
		tok, err = tokenizer.Parse(tokenizerJSON)
	}
	if err != nil {
		return nil, fieldErr("tokenizer", "rehearse cannot count with it: %v", err)
	}
	vocab, err := ReadVocabulary(tokenizerJSON, tokenizerConfig)
	if err != nil {
		return nil, err
	}
	if len(vocab.Tokens) != tok.VocabSize() {
		return nil, fieldErr("tokenizer", "names %d ids but counts with %d", len(vocab.Tokens), tok.VocabSize())
	}
	if shape.Vocab == 0 {
		shape.Vocab = len(vocab.Tokens)
	}
	if err := shape.Validate(len(vocab.Tokens)); err != nil {
		return nil, err
	}
	m := &Model{Shape: shape, Seed: seed, Tokenizer: tok.Info(), vocab: vocab}
	m.words, m.Words = WordTokens(tok, shape.Vocab)
	if m.Words < minWords {
		return nil, fieldErr("tokenizer", "has %d whole-word tokens (a space and ASCII letters); a model needs %d to say varied text that re-tokenizes exactly", m.Words, minWords)
	}
	m.Name = fmt.Sprintf("rehearse random %s %dL %dd seed %d", shape.Arch, shape.Layers, shape.Embd, seed)
	return m, nil
}

// Metadata is the model's GGUF metadata, under llama.cpp's key names.
func (m *Model) Metadata() []KV {
	s, a := m.Shape, m.Shape.Arch
	tokens, types := m.vocab.Padded(s.Vocab)
	fileType := uint32(0) // LLAMA_FTYPE_ALL_F32
	if s.Type == F16 {
		fileType = 1 // LLAMA_FTYPE_MOSTLY_F16
	}
	return []KV{
		{"general.architecture", a},
		{"general.name", m.Name},
		{"general.alignment", uint32(Alignment)},
		{"general.file_type", fileType},
		{a + ".block_count", uint32(s.Layers)},
		{a + ".context_length", uint32(s.Context)},
		{a + ".embedding_length", uint32(s.Embd)},
		{a + ".feed_forward_length", uint32(s.FFN)},
		{a + ".attention.head_count", uint32(s.Heads)},
		{a + ".attention.head_count_kv", uint32(s.KVHeads)},
		{a + ".attention.layer_norm_rms_epsilon", float32(s.NormEps)},
		{a + ".rope.freq_base", float32(s.RopeBase)},
		{"tokenizer.ggml.model", "gpt2"},
		{"tokenizer.ggml.pre", "qwen2"},
		{"tokenizer.ggml.tokens", tokens},
		{"tokenizer.ggml.token_type", types},
		{"tokenizer.ggml.merges", m.vocab.Merges},
		{"tokenizer.ggml.bos_token_id", uint32(m.vocab.BOS)},
		{"tokenizer.ggml.eos_token_id", uint32(m.vocab.EOS)},
		{"tokenizer.ggml.padding_token_id", uint32(m.vocab.Pad)},
		{"tokenizer.ggml.add_bos_token", false},
		{"tokenizer.chat_template", m.vocab.ChatTemplate},
	}
}

// Tensors lists the model's tensors under llama.cpp's names, in the order
// its converter writes them, each with the fill that makes its values.
func (m *Model) Tensors() []Tensor {
	s := m.Shape
	n, kv, ff, vocab := uint64(s.Embd), uint64(s.KVHeads*s.headDim()), uint64(s.FFN), uint64(s.Vocab)
	mat := func(name string, in, out uint64, fill Fill) Tensor {
		return Tensor{TensorInfo{name, []uint64{in, out}, s.Type}, fill}
	}
	vec := func(name string, size uint64, fill Fill) Tensor {
		return Tensor{TensorInfo{name, []uint64{size}, F32}, fill}
	}
	rnd := func(name string) Fill { return uniform(m.Seed, name, weightStd) }
	embd := constant(0)
	if s.Tied {
		embd = m.wordSign
	}
	ts := []Tensor{mat("token_embd.weight", n, vocab, setCols(rnd("token_embd.weight"), n, []uint64{0}, embd))}
	for l := range s.Layers {
		ts = append(ts, m.layer(l, n, kv, ff, mat, vec, rnd)...)
	}
	ts = append(ts, vec("output_norm.weight", n, ones))
	if !s.Tied {
		ts = append(ts, mat("output.weight", n, vocab, setCols(rnd("output.weight"), n, []uint64{0}, m.wordSign)))
	}
	return ts
}

// wordSign is a token's output weight in dimension 0: + for a word, − else.
func (m *Model) wordSign(id uint64) float32 {
	if m.words[id] {
		return wordMargin
	}
	return -wordMargin
}

// layer lists block l's tensors. Dimension 0 of the residual stream is
// written by nothing but value channel 0 of kv head 0 (a constant, its
// weights zero and its bias valueConst) through attn_output[0][0].
func (m *Model) layer(l int, n, kv, ff uint64,
	mat func(string, uint64, uint64, Fill) Tensor, vec func(string, uint64, Fill) Tensor,
	rnd func(string) Fill) []Tensor {
	name := func(t string) string { return fmt.Sprintf("blk.%d.%s", l, t) }
	zero := constant(0)
	var headCh0 []uint64 // channel 0 of every query head, in attn_output's input
	for h := range uint64(m.Shape.Heads) {
		headCh0 = append(headCh0, h*uint64(m.Shape.headDim()))
	}
	out := setCols(rnd(name("attn_output.weight")), n, headCh0, zero)
	out = setRow(out, n, 0, func(col uint64) float32 {
		if col == 0 {
			return outputGain
		}
		return 0
	})
	ts := []Tensor{vec(name("attn_norm.weight"), n, ones), mat(name("attn_q.weight"), n, n, rnd(name("attn_q.weight")))}
	if archQKBias[m.Shape.Arch] {
		ts = append(ts, vec(name("attn_q.bias"), n, zeros))
	}
	ts = append(ts, mat(name("attn_k.weight"), n, kv, rnd(name("attn_k.weight"))))
	if archQKBias[m.Shape.Arch] {
		ts = append(ts, vec(name("attn_k.bias"), kv, zeros))
	}
	return append(ts,
		mat(name("attn_v.weight"), n, kv, setRow(rnd(name("attn_v.weight")), n, 0, zero)),
		vec(name("attn_v.bias"), kv, setCols(zeros, kv, []uint64{0}, constant(valueConst))),
		mat(name("attn_output.weight"), n, n, out),
		vec(name("ffn_norm.weight"), n, ones),
		mat(name("ffn_gate.weight"), n, ff, rnd(name("ffn_gate.weight"))),
		mat(name("ffn_up.weight"), n, ff, rnd(name("ffn_up.weight"))),
		mat(name("ffn_down.weight"), ff, n, setRow(rnd(name("ffn_down.weight")), ff, 0, zero)),
	)
}

// Params is the number of weights.
func (m *Model) Params() int64 {
	var p int64
	for _, t := range m.Tensors() {
		p += int64(t.Elements())
	}
	return p
}

// Write writes the model as a GGUF v3 file to w and returns its size.
func (m *Model) Write(w io.Writer) (int64, error) {
	return Encode(w, m.Metadata(), m.Tensors())
}

// WriteFile writes the model to path through a temporary file beside it,
// renamed into place once whole.
func (m *Model) WriteFile(path string) (int64, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	defer os.Remove(f.Name())
	n, err := m.Write(f)
	if err == nil {
		// CreateTemp makes it 0600; a model is read by an engine that may
		// run as another user.
		err = f.Chmod(0o644)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, fmt.Errorf("%s: %w", path, err)
	}
	return n, os.Rename(f.Name(), path)
}
