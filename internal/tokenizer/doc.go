// Package tokenizer counts tokens exactly as the Hugging Face tokenizers
// library does for byte-level BPE tokenizer.json files (Qwen2/2.5/3, Llama 3,
// GPT-2 style): added tokens split out on the raw text, NFC with the
// library's Unicode tables, the pre-tokenizer regex run by a hand-written
// splitter with the library's \p{L}, \p{N} and \s, ByteLevel, and BPE merges
// by rank. A tokenizer.json with any other component is refused.
//
// The Qwen3 tokenizer.json is embedded (Default); Qwen25 is the same file less
// the four tokens Qwen3 added.
//
// Resolve is the one way every command finds a model's tokenizer.json
// (SPEC §6): an explicit path or variant, the Hugging Face cache, the
// embedded file for a Qwen2/2.5/3 model, then the Hub (package hfhub). It
// never answers with another model's tokenizer: it says what it tried.
// File is how every --tokenizer path is read: a file, or the
// tokenizer.json in a folder.
//
// WriteCounts is rehearse tokens: the count (and ids) of a text, or of
// every line of JSON Lines.
package tokenizer

//go:generate go run gen_tables.go
