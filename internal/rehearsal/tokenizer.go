package rehearsal

import (
	"context"
	"errors"
	"path/filepath"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/hfhub"
	"github.com/rehearse/rehearse/internal/tokenizer"
)

// VariantUsage is the tokenizer variant that counts no text: output_tokens
// are the server's own usage.completion_tokens.
const VariantUsage = "usage"

// TokenizerError stops a rehearsal before any request for want of its
// tokenizer: the model's own is not at hand (a *tokenizer.NotFoundError),
// or what was found cannot be counted exactly (a *tokenizer.RefusedError),
// or the file named is not there. Field is the key that named what was
// looked for: tokenizer.path, tokenizer.variant, tokenizer.model or
// model.id.
type TokenizerError struct {
	Field string
	Err   error
}

func (e *TokenizerError) Error() string { return e.Field + ": " + e.Err.Error() }

func (e *TokenizerError) Unwrap() error { return e.Err }

// OpenedTokenizer is the rehearsal's tokenizer as OpenTokenizer found it.
type OpenedTokenizer struct {
	// Tokenizer counts; nil with the variant usage (the servers' usage
	// counts).
	Tokenizer *tokenizer.Tokenizer
	// Provenance names it by the SHA-256 of the file read.
	Provenance bundle.Tokenizer
	// Note is a line for the bundle where its origin needs saying (the
	// embedded file for a model of its family, a download); "" else.
	Note string
}

// OpenTokenizer finds the rehearsal's tokenizer, once, through the one
// resolver, tokenizer.Resolve: tokenizer.path or tokenizer.variant as named,
// else the own tokenizer.json of tokenizer.model, or of model.id, at its
// revision (the Hugging Face cache, the embedded file for a Qwen2/2.5/3
// model, the Hub). Run, demo, bench and capacity open it here, before the
// prompts (Prompts counts with it) and before any request.
func OpenTokenizer(ctx context.Context, cfg *config.Rehearsal) (OpenedTokenizer, error) {
	t := cfg.Tokenizer
	if t.Variant == VariantUsage {
		return OpenedTokenizer{Provenance: bundle.Tokenizer{Name: VariantUsage, Source: "the server's usage.completion_tokens"}}, nil
	}
	req := tokenizer.Request{Path: t.Path, Variant: t.Variant, Model: t.Model, Revision: t.Revision}
	field := "tokenizer.model"
	switch {
	case t.Path != "":
		field = "tokenizer.path"
	case t.Variant != "":
		field = "tokenizer.variant"
	case t.Model == "":
		req.Model, req.Revision = cfg.Model.ID, cfg.Model.Revision
		field = "model.id"
	}
	tok, origin, err := tokenizer.Resolve(ctx, req)
	if err != nil {
		return OpenedTokenizer{}, &TokenizerError{Field: field, Err: err}
	}
	info := tok.Info()
	prov := bundle.Tokenizer{Name: info.Name, Source: info.Source, SHA256: info.SHA256}
	if info.Source == "embedded" {
		prov.Variant = info.Name
	}
	return OpenedTokenizer{Tokenizer: tok, Provenance: prov, Note: origin.Note}, nil
}

// RecountTokenizer finds again, through the one resolver, the tokenizer a
// bundle's provenance names by SHA-256, for verify to re-count its records:
// see recountRequest for where it looks.
func RecountTokenizer(ctx context.Context, p bundle.Provenance, path string) (*tokenizer.Tokenizer, error) {
	if p.Tokenizer.SHA256 == "" {
		return nil, errors.New("provenance names no tokenizer sha256 to match")
	}
	tok, _, err := tokenizer.Resolve(ctx, recountRequest(p, path))
	return tok, err
}

// recountRequest asks for the file of the provenance's SHA-256: at path
// when one is given, else where the rehearsal read it, else the model's
// own at its revision (or at the commit of the cache snapshot it was read
// from); the embedded file in its variant when the digest is its own.
func recountRequest(p bundle.Provenance, path string) tokenizer.Request {
	req := tokenizer.Request{SHA256: p.Tokenizer.SHA256, Variant: p.Tokenizer.Variant, Path: path,
		Model: p.Model.ID, Revision: p.Model.Revision}
	if path == "" && filepath.IsAbs(p.Tokenizer.Source) {
		req.Path = p.Tokenizer.Source
	}
	if snap, ok := hfhub.SnapshotOf(p.Tokenizer.Source); ok && snap.ID == req.Model && req.Revision == "" {
		req.Revision = snap.Revision
	}
	return req
}
