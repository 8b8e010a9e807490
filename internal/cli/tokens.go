package cli

import (
	"context"
	"errors"

	"github.com/spf13/cobra"

	"github.com/rehearse/rehearse/internal/tokenizer"
)

// tokensOptions is what `rehearse tokens` was asked to do.
type tokensOptions struct {
	tokenizerPath string // --tokenizer
	variant       string // --variant, for the embedded file
	variantSet    bool
	model         string // --model, looked up in the Hugging Face cache
	revision      string // --revision
	ids           bool   // --ids
	jsonl         bool   // --jsonl
}

func newTokensCmd(st *State) *cobra.Command {
	var o tokensOptions
	cmd := &cobra.Command{
		Use:   "tokens",
		Short: "Count the tokens of text on stdin with a tokenizer.json",
		Long: `Count the tokens of the text on stdin exactly as the Hugging Face tokenizers
library does (no special tokens added), with the embedded Qwen3 tokenizer, a
tokenizer.json file (or a folder holding one), or a model's own tokenizer.json:
from the Hugging Face cache, the embedded file for a Qwen2/2.5/3 model, else
downloaded from the Hub into the cache (HF_ENDPOINT, HF_TOKEN; never when
HF_HUB_OFFLINE is set).

  rehearse tokens < text.txt                  prints the count
  rehearse tokens --ids < text.txt            prints the count, then the ids as a JSON list
  rehearse tokens --jsonl < in.jsonl          reads {"text": ...} per line and writes
                                              {"count": N, "ids": [...]} per line, in order
  rehearse tokens --variant qwen2.5           the embedded file less Qwen3's four added tokens
  rehearse tokens --tokenizer tokenizer.json
  rehearse tokens --model Qwen/Qwen2.5-1.5B-Instruct --revision 989aa7980e4cf806f80c7fef2b1adb7bc71aa306
  rehearse tokens --model meta-llama/Llama-3.1-8B-Instruct@main`,
		Args: cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			o.variantSet = cmd.Flags().Changed("variant")
			return o.validate()
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runTokens(cmd.Context(), st, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.tokenizerPath, "tokenizer", "", "tokenizer.json, or a folder holding one, to use (default: the embedded Qwen3 file)")
	f.StringVar(&o.variant, "variant", tokenizer.VariantQwen3, "embedded tokenizer variant: qwen3 or qwen2.5")
	f.StringVar(&o.model, "model", "", "model id (org/name[@revision]) whose own tokenizer.json to use")
	f.StringVar(&o.revision, "revision", "", "revision of --model: commit, branch or tag (default main)")
	f.BoolVar(&o.ids, "ids", false, "print the token ids too")
	f.BoolVar(&o.jsonl, "jsonl", false, `read JSON Lines {"text": ...}, write {"count": N, "ids": [...]} per line`)
	return cmd
}

func (o tokensOptions) validate() error {
	if o.tokenizerPath != "" && o.model != "" {
		return usageError("--tokenizer and --model both name a tokenizer; give one")
	}
	if o.revision != "" && o.model == "" {
		return usageError("--revision needs --model")
	}
	if o.variantSet && (o.tokenizerPath != "" || o.model != "") {
		return usageError("--variant applies to the embedded tokenizer, not to --tokenizer or --model")
	}
	if o.variant != tokenizer.VariantQwen3 && o.variant != tokenizer.VariantQwen25 {
		return usageError("--variant %q: want %s or %s", o.variant, tokenizer.VariantQwen3, tokenizer.VariantQwen25)
	}
	return nil
}

// request is the tokenizer the options name, for the one resolver: the
// file, the model's own, or the embedded variant.
func (o tokensOptions) request() tokenizer.Request {
	switch {
	case o.tokenizerPath != "":
		return tokenizer.Request{Path: o.tokenizerPath}
	case o.model != "":
		return tokenizer.Request{Model: o.model, Revision: o.revision}
	}
	return tokenizer.Request{Variant: o.variant}
}

// runTokens counts stdin with the tokenizer the flags name, found through
// the one resolver: a bad JSON Lines line exits 2.
func runTokens(ctx context.Context, st *State, o tokensOptions) error {
	tok, _, err := tokenizer.Resolve(ctx, o.request())
	var nf *tokenizer.NotFoundError
	switch {
	case errors.As(err, &nf):
		return usageError("%v; pass --tokenizer PATH (the model's tokenizer.json, or a folder holding one)", err)
	case err != nil:
		return usageError("%v", err)
	}
	err = tok.WriteCounts(st.Stdin, st.Stdout, tokenizer.CountOptions{Name: "stdin", JSONL: o.jsonl, IDs: o.ids})
	if _, bad := errors.AsType[*tokenizer.LineError](err); bad {
		return &ExitError{Code: 2, Err: err}
	}
	return err
}
