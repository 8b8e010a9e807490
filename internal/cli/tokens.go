package cli

import (
	"github.com/spf13/cobra"

	"github.com/rehearse/rehearse/internal/tokenizer"
)

func newTokensCmd(st *State) *cobra.Command {
	var o tokenizer.Command
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
			o.VariantSet = cmd.Flags().Changed("variant")
			return o.Check()
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.Run(cmd.Context(), st.Stdin, st.Stdout)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Path, "tokenizer", "", "tokenizer.json, or a folder holding one, to use (default: the embedded Qwen3 file)")
	f.StringVar(&o.Variant, "variant", tokenizer.VariantQwen3, "embedded tokenizer variant: qwen3 or qwen2.5")
	f.StringVar(&o.Model, "model", "", "model id (org/name[@revision]) whose own tokenizer.json to use")
	f.StringVar(&o.Revision, "revision", "", "revision of --model: commit, branch or tag (default main)")
	f.BoolVar(&o.IDs, "ids", false, "print the token ids too")
	f.BoolVar(&o.JSONL, "jsonl", false, `read JSON Lines {"text": ...}, write {"count": N, "ids": [...]} per line`)
	return cmd
}
