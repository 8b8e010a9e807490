package tokenizer

import (
	"context"
	"errors"
	"io"

	"github.com/rehearse/rehearse/internal/exitcode"
)

// Command is what `rehearse tokens` was asked to do, as its flags give
// it: which tokenizer (a file, a model's own, or an embedded variant) and
// how to write the counts.
type Command struct {
	Path       string // --tokenizer: a tokenizer.json, or a folder holding one
	Model      string // --model, whose own tokenizer the resolver finds
	Revision   string // --revision of Model
	Variant    string // --variant, for the embedded file
	VariantSet bool   // whether --variant was given
	IDs        bool   // --ids
	JSONL      bool   // --jsonl
}

// Check refuses flags that name two tokenizers, or a variant there is
// not: exit 2, one line naming the flag.
func (c Command) Check() error {
	switch {
	case c.Path != "" && c.Model != "":
		return exitcode.Usagef("--tokenizer and --model both name a tokenizer; give one")
	case c.Revision != "" && c.Model == "":
		return exitcode.Usagef("--revision needs --model")
	case c.VariantSet && (c.Path != "" || c.Model != ""):
		return exitcode.Usagef("--variant applies to the embedded tokenizer, not to --tokenizer or --model")
	case c.Variant != VariantQwen3 && c.Variant != VariantQwen25:
		return exitcode.Usagef("--variant %q: want %s or %s", c.Variant, VariantQwen3, VariantQwen25)
	}
	return nil
}

// request is the tokenizer c names, for the one resolver.
func (c Command) request() Request {
	switch {
	case c.Path != "":
		return Request{Path: c.Path}
	case c.Model != "":
		return Request{Model: c.Model, Revision: c.Revision}
	}
	return Request{Variant: c.Variant}
}

// Run counts in with the tokenizer c names, found through the one
// resolver (Resolve), and writes the counts to out (WriteCounts): a
// tokenizer not found, or a bad JSON Lines line, exits 2.
func (c Command) Run(ctx context.Context, in io.Reader, out io.Writer) error {
	tok, _, err := Resolve(ctx, c.request())
	var nf *NotFoundError
	switch {
	case errors.As(err, &nf):
		return exitcode.Usagef("%v; pass --tokenizer PATH (the model's tokenizer.json, or a folder holding one)", err)
	case err != nil:
		return exitcode.Usagef("%v", err)
	}
	err = tok.WriteCounts(in, out, CountOptions{Name: "stdin", JSONL: c.JSONL, IDs: c.IDs})
	if _, bad := errors.AsType[*LineError](err); bad {
		return &exitcode.Error{Code: 2, Err: err}
	}
	return err
}
