//go:build tools

// Package deps keeps in go.mod the modules that only a generator needs:
// internal/tokenizer/gen_tables.go (build tag ignore, run by go generate)
// uses golang.org/x/text, which go mod tidy would otherwise drop.
package deps

import (
	_ "golang.org/x/text/unicode/norm"
)
