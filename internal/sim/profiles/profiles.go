// Package profiles holds the simulator's built-in profiles as data: each
// NAME.json is a profile (package engine reads it as an engine.Profile) and
// NAME.md beside it derives every number. measure/ keeps the script and
// the raw output the H200 profiles were measured with.
package profiles

import "embed"

// FS holds every built-in profile's JSON and its markdown derivation, at
// the top of the tree.
//
//go:embed *.json *.md
var FS embed.FS
