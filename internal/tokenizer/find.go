package tokenizer

import (
	"errors"
	"fmt"
	"strings"
)

// Want identifies a tokenizer as a bundle's provenance records it: by the
// SHA-256 of its tokenizer.json, with where else it may be found.
type Want struct {
	SHA256 string
	// Variant is the embedded variant (VariantQwen3, VariantQwen25) when
	// the file is the embedded one; "" means the file as it is (Qwen3).
	Variant string
	// Path is a tokenizer.json to try ("" for none).
	Path string
	// Model and Revision name a model whose tokenizer.json the Hugging
	// Face cache may hold ("" for none).
	Model, Revision string
}

// Find returns the tokenizer whose tokenizer.json has want.SHA256: the
// embedded file, in want.Variant, when the digest is the embedded file's;
// else the file at want.Path; else the model's file in the Hugging Face
// cache (FindInCache). Its error says where it looked and what it found.
func Find(want Want) (*Tokenizer, error) {
	if want.SHA256 == "" {
		return nil, errors.New("provenance names no tokenizer sha256 to match")
	}
	if want.SHA256 == EmbeddedSHA256 {
		return Embedded(want.Variant)
	}
	looked := []string{"it is not the embedded file"}
	try := func(path string) (*Tokenizer, bool) {
		t, err := Load(path)
		switch {
		case err != nil:
			looked = append(looked, err.Error())
		case t.Info().SHA256 != want.SHA256:
			looked = append(looked, fmt.Sprintf("%s has sha256 %s", path, t.Info().SHA256))
		default:
			return t, true
		}
		return nil, false
	}
	if want.Path != "" {
		if t, ok := try(want.Path); ok {
			return t, nil
		}
	}
	if want.Model != "" {
		path, err := FindInCache(want.Model, want.Revision)
		if err != nil {
			looked = append(looked, err.Error())
		} else if t, ok := try(path); ok {
			return t, nil
		}
	}
	return nil, fmt.Errorf("no tokenizer with sha256 %s at hand (%s)", want.SHA256, strings.Join(looked, "; "))
}
