package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rehearse/rehearse/internal/gguf"
)

// modelWriteOptions is what `rehearse model write` was asked to do.
type modelWriteOptions struct {
	gguf.CreateOptions
	preset string
	typ    string
}

func newModelCmd(st *State) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "model",
		Short: "Write models of a given shape with random weights",
	}
	cmd.AddCommand(newModelWriteCmd(st))
	return cmd
}

func newModelWriteCmd(st *State) *cobra.Command {
	var o modelWriteOptions
	cmd := &cobra.Command{
		Use:   "write -o MODEL.gguf",
		Short: "Write a GGUF model of a given shape with seeded random weights and a real vocabulary",
		Long: `Write a GGUF v3 model for llama.cpp-based engines (ollama, llama.cpp's server):
a decoder-only transformer of the given shape with seeded random weights, and the
vocabulary, merges, special tokens and chat template of a tokenizer.json, so the
engine and rehearse count the same tokens. The model only ever emits whole-word
tokens (a space and ASCII letters), so its text re-tokenizes exactly; rehearse it
with temperature > 0 (greedy decoding repeats one word). Serving cost depends on
the shape, not on the weights' values.

  rehearse model write -o ci.gguf                               the "ci" preset (24 layers, n_embd 512)
  rehearse model write --preset qwen2.5-1.5b -o qwen-1.5b.gguf  Qwen2.5-1.5B's shape (3.1 GB)
  rehearse model write --layers 2 --embd 64 --heads 4 --kv-heads 2 --ffn 256 -o toy.gguf
  rehearse model write --preset qwen2.5-0.5b --tokenizer DIR -o m.gguf   DIR's tokenizer.json
                                                                and tokenizer_config.json

A preset's fields are the defaults; every shape flag given overrides one.
Presets: ` + strings.Join(gguf.PresetNames(), ", ") + `.`,
		Args: cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			return o.resolve(cmd.Flags())
		},
		RunE: func(*cobra.Command, []string) error {
			return flagFault(gguf.Create(o.CreateOptions, st.Stdout, st.Stderr))
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.preset, "preset", "ci", "the shape to start from: "+strings.Join(gguf.PresetNames(), ", "))
	f.StringVar(&o.Shape.Arch, "arch", "", "architecture: "+strings.Join(gguf.Architectures(), " or ")+" (default: the preset's)")
	f.IntVar(&o.Shape.Layers, "layers", 0, "decoder layers (block_count; default: the preset's)")
	f.IntVar(&o.Shape.Embd, "embd", 0, "hidden size (embedding_length; default: the preset's)")
	f.IntVar(&o.Shape.Heads, "heads", 0, "attention heads (default: the preset's)")
	f.IntVar(&o.Shape.KVHeads, "kv-heads", 0, "key/value heads, for grouped-query attention (default: the preset's)")
	f.IntVar(&o.Shape.FFN, "ffn", 0, "feed-forward size (intermediate_size; default: the preset's)")
	f.IntVar(&o.Shape.Vocab, "vocab", 0, "embedding rows, padded with unused tokens (default: the preset's, else the tokenizer's ids)")
	f.IntVar(&o.Shape.Context, "context", 0, "context length (default: the preset's)")
	f.Float64Var(&o.Shape.RopeBase, "rope-base", 0, "rotary embedding base (rope.freq_base; default: the preset's)")
	f.Float64Var(&o.Shape.NormEps, "norm-eps", 0, "RMSNorm epsilon (default: the preset's)")
	f.BoolVar(&o.Shape.Tied, "tied", false, "share the token embedding with the output layer, no output.weight (default: the preset's; every preset ties)")
	f.StringVar(&o.typ, "type", "f16", "type of the matrices: f16 or f32 (norms and biases are f32)")
	f.Uint64Var(&o.Seed, "seed", 1, "seed of the random weights: one seed, one file")
	f.StringVar(&o.Tokenizer, "tokenizer", "", "tokenizer.json, or a folder holding one (default: the embedded Qwen file)")
	f.StringVar(&o.TokenizerConfig, "tokenizer-config", "", "tokenizer_config.json with the chat template and special tokens (default: the one beside --tokenizer; else ChatML with <|im_end|>)")
	f.StringVarP(&o.Path, "output", "o", "", "the GGUF file to write (required)")
	return cmd
}

// resolve starts from the preset and keeps every shape flag given.
func (o *modelWriteOptions) resolve(flags *pflag.FlagSet) error {
	if o.Path == "" {
		return usageError("--output: required (the GGUF file to write)")
	}
	if st, err := os.Stat(filepath.Dir(o.Path)); err != nil || !st.IsDir() {
		return usageError("--output %s: its folder %s does not exist", o.Path, filepath.Dir(o.Path))
	}
	preset, ok := gguf.Presets[o.preset]
	if !ok {
		return usageError("--preset %q: want one of %s", o.preset, strings.Join(gguf.PresetNames(), ", "))
	}
	o.Shape = preset.With(o.Shape, flags.Changed)
	typ, err := gguf.ParseType(o.typ)
	if err != nil {
		return flagFault(err)
	}
	o.Shape.Type = typ
	return nil
}

// flagFault turns a gguf.FieldError into exit 2 naming its flag.
func flagFault(err error) error {
	var fe *gguf.FieldError
	if errors.As(err, &fe) {
		return usageError("--%s: %s", fe.Field, fe.Msg)
	}
	return err
}
