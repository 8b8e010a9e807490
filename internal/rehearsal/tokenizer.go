package rehearsal

import (
	"fmt"
	"strings"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/tokenizer"
)

// OpenTokenizer resolves the rehearsal's tokenizer in SPEC §6's order: an
// explicit path; an embedded variant when one is named; the Hugging Face
// cache at the pinned revision (tokenizer.model, else model.id); the bundled
// default. It returns the tokenizer, its provenance, and a note when it fell
// back to the bundled file because the model's own was not in the cache.
func OpenTokenizer(cfg *config.Rehearsal) (*tokenizer.Tokenizer, bundle.Tokenizer, string, error) {
	t := cfg.Tokenizer
	var (
		tok  *tokenizer.Tokenizer
		err  error
		note string
	)
	switch {
	case t.Path != "":
		tok, err = tokenizer.Load(t.Path)
		if err != nil {
			return nil, bundle.Tokenizer{}, "", fmt.Errorf("tokenizer.path: %w", err)
		}
	case t.Variant != "":
		tok, err = tokenizer.Embedded(t.Variant)
		if err != nil {
			return nil, bundle.Tokenizer{}, "", fmt.Errorf("tokenizer.variant: %w", err)
		}
	case t.Model != "":
		path, ferr := tokenizer.FindInCache(t.Model, t.Revision)
		if ferr != nil {
			return nil, bundle.Tokenizer{}, "", fmt.Errorf("tokenizer.model: %w", ferr)
		}
		if tok, err = tokenizer.Load(path); err != nil {
			return nil, bundle.Tokenizer{}, "", fmt.Errorf("tokenizer.model: %w", err)
		}
	default:
		if cfg.Model.ID != "" {
			if path, ferr := tokenizer.FindInCache(cfg.Model.ID, cfg.Model.Revision); ferr == nil {
				if tok, err = tokenizer.Load(path); err != nil {
					return nil, bundle.Tokenizer{}, "", fmt.Errorf("tokenizer of model.id: %w", err)
				}
				break
			}
		}
		variant := tokenizer.VariantQwen3
		if strings.Contains(strings.ToLower(cfg.Model.ID), "qwen2") {
			variant = tokenizer.VariantQwen25
		}
		if tok, err = tokenizer.Embedded(variant); err != nil {
			return nil, bundle.Tokenizer{}, "", err
		}
		if cfg.Model.ID != "" {
			note = fmt.Sprintf("output tokens were counted with the bundled %s tokenizer: %s's own tokenizer.json was not in the Hugging Face cache", variant, cfg.Model.ID)
		}
	}
	info := tok.Info()
	prov := bundle.Tokenizer{Name: info.Name, Source: info.Source, SHA256: info.SHA256}
	if info.Source == "embedded" {
		prov.Variant = info.Name
	}
	return tok, prov, note, nil
}
