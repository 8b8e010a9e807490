//go:build tools

// Package deps pins the modules that packages of this repository are about to
// import, so that helpers working in parallel do not race on go.mod.
package deps

import (
	_ "github.com/chromedp/chromedp"
	_ "github.com/goccy/go-yaml"
	_ "github.com/prometheus/client_model/go"
	_ "github.com/prometheus/common/expfmt"
	_ "github.com/schollz/progressbar/v3"
	_ "github.com/spf13/cobra"
	_ "golang.org/x/term"
	_ "gonum.org/v1/gonum/stat"
	_ "gonum.org/v1/plot"
)
