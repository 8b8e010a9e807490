package rehearsal

import (
	"fmt"
	"strings"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/tokenizer"
)

// tokenizerChoice is where the tokenizer comes from: a file, or an
// embedded variant.
type tokenizerChoice struct {
	Path    string
	Variant string
	// Field names the config key the choice came from, for errors.
	Field string
	Note  string
}

// chooseTokenizer applies SPEC §6's lookup order: an explicit path; an
// embedded variant when one is named; the Hugging Face cache at the pinned
// revision (tokenizer.model, else model.id); the bundled default, with a
// note saying why.
func chooseTokenizer(cfg *config.Rehearsal) (tokenizerChoice, error) {
	t := cfg.Tokenizer
	switch {
	case t.Variant == VariantUsage:
		return tokenizerChoice{Variant: VariantUsage, Field: "tokenizer.variant"}, nil
	case t.Path != "":
		return tokenizerChoice{Path: t.Path, Field: "tokenizer.path"}, nil
	case t.Variant != "":
		return tokenizerChoice{Variant: t.Variant, Field: "tokenizer.variant"}, nil
	case t.Model != "":
		path, err := tokenizer.FindInCache(t.Model, t.Revision)
		if err != nil {
			return tokenizerChoice{}, fmt.Errorf("tokenizer.model: %w", err)
		}
		return tokenizerChoice{Path: path, Field: "tokenizer.model"}, nil
	}
	if cfg.Model.ID != "" {
		if path, err := tokenizer.FindInCache(cfg.Model.ID, cfg.Model.Revision); err == nil {
			return tokenizerChoice{Path: path, Field: "model.id"}, nil
		}
	}
	c := tokenizerChoice{Variant: tokenizer.VariantQwen3, Field: "tokenizer"}
	if strings.Contains(strings.ToLower(cfg.Model.ID), "qwen2") {
		c.Variant = tokenizer.VariantQwen25
	}
	if cfg.Model.ID != "" {
		c.Note = fmt.Sprintf("output tokens were counted with the bundled %s tokenizer: %s's own tokenizer.json was not in the Hugging Face cache", c.Variant, cfg.Model.ID)
	}
	return c, nil
}

// VariantUsage is the tokenizer variant that counts no text: output_tokens
// are the server's own usage.completion_tokens.
const VariantUsage = "usage"

// OpenTokenizer loads the rehearsal's tokenizer (see chooseTokenizer for the
// order) and returns it with its provenance and, when it fell back to the
// bundled file, a note for the bundle. With the variant "usage" the
// tokenizer is nil: the servers' usage counts. It is the one resolver of
// run, demo and bench.
func OpenTokenizer(cfg *config.Rehearsal) (*tokenizer.Tokenizer, bundle.Tokenizer, string, error) {
	c, err := chooseTokenizer(cfg)
	if err != nil {
		return nil, bundle.Tokenizer{}, "", err
	}
	if c.Variant == VariantUsage {
		return nil, bundle.Tokenizer{Name: VariantUsage, Source: "the server's usage.completion_tokens"}, "", nil
	}
	var tok *tokenizer.Tokenizer
	if c.Path != "" {
		tok, err = tokenizer.Load(c.Path)
	} else {
		tok, err = tokenizer.Embedded(c.Variant)
	}
	if err != nil {
		return nil, bundle.Tokenizer{}, "", fmt.Errorf("%s: %w", c.Field, err)
	}
	info := tok.Info()
	prov := bundle.Tokenizer{Name: info.Name, Source: info.Source, SHA256: info.SHA256}
	if info.Source == "embedded" {
		prov.Variant = info.Name
	}
	return tok, prov, c.Note, nil
}
