package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

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

func runTokens(ctx context.Context, st *State, o tokensOptions) error {
	tok, _, err := tokenizer.Resolve(ctx, o.request())
	var nf *tokenizer.NotFoundError
	switch {
	case errors.As(err, &nf):
		return usageError("%v; pass --tokenizer PATH (the model's tokenizer.json, or a folder holding one)", err)
	case err != nil:
		return usageError("%v", err)
	}
	w := bufio.NewWriter(st.Stdout)
	if o.jsonl {
		err = tokensJSONL(tok, st.Stdin, w)
	} else {
		err = tokensText(tok, st.Stdin, w, o.ids)
	}
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	return err
}

func tokensText(tok *tokenizer.Tokenizer, in io.Reader, w *bufio.Writer, withIDs bool) error {
	text, err := io.ReadAll(in)
	if err != nil {
		return fmt.Errorf("stdin: %v", err)
	}
	ids := tok.Encode(string(text))
	fmt.Fprintln(w, len(ids))
	if withIDs {
		w.Write(appendIDs(nil, ids))
		w.WriteByte('\n')
	}
	return nil
}

// tokensJSONL reads one {"text": ...} object per line and writes one
// {"count": N, "ids": [...]} per line, in order.
func tokensJSONL(tok *tokenizer.Tokenizer, in io.Reader, w *bufio.Writer) error {
	r := bufio.NewReaderSize(in, 1<<16)
	var ids []int
	var out []byte
	for line := 1; ; line++ {
		b, err := r.ReadBytes('\n')
		if len(b) == 0 && errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("stdin: %v", err)
		}
		var rec struct {
			Text *string `json:"text"`
		}
		if len(bytes.TrimSpace(b)) == 0 {
			return &ExitError{Code: 2, Err: fmt.Errorf(`stdin:%d: empty line, want {"text": ...}`, line)}
		}
		if uerr := json.Unmarshal(b, &rec); uerr != nil {
			return &ExitError{Code: 2, Err: fmt.Errorf("stdin:%d: %v", line, uerr)}
		}
		if rec.Text == nil {
			return &ExitError{Code: 2, Err: fmt.Errorf(`stdin:%d: no "text" field`, line)}
		}
		ids = tok.AppendEncode(ids[:0], *rec.Text)
		out = append(out[:0], `{"count":`...)
		out = strconv.AppendInt(out, int64(len(ids)), 10)
		out = append(out, `,"ids":`...)
		out = appendIDs(out, ids)
		out = append(out, "}\n"...)
		if _, werr := w.Write(out); werr != nil {
			return werr
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
	}
}

func appendIDs(dst []byte, ids []int) []byte {
	dst = append(dst, '[')
	for i, id := range ids {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(dst, int64(id), 10)
	}
	return append(dst, ']')
}
