package report

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sort"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/plot"
)

// Write renders a bundle whose results.json is already written: the
// figures, README.md, report.html, and last SHA256SUMS over every file.
func Write(dir string, res *bundle.Results) error {
	return WriteContext(context.Background(), dir, res)
}

// WriteContext is Write stopping when ctx ends. It looks at ctx only while
// it renders and hashes the bundle's files, before it writes any: an
// interrupted report leaves the bundle as it was, and one that has begun
// writing finishes, so a bundle is never left half re-rendered.
func WriteContext(ctx context.Context, dir string, res *bundle.Results) error {
	return WriteKnown(ctx, dir, res, nil)
}

// WriteKnown is WriteContext taking the digest of a file from known where
// it is listed there (the caller hashed it as it read it, and it has not
// changed since: bundle.ReadReport hashes results.json in the pass that
// decodes it) instead of hashing it again.
func WriteKnown(ctx context.Context, dir string, res *bundle.Results, known []bundle.Digest) error {
	figs, err := plot.Render(res)
	if err != nil {
		return fmt.Errorf("figures: %w", err)
	}
	refs := make([]FigureRef, 0, len(figs))
	skip := []string{bundle.ReadmeFile, HTMLFile}
	var listed []bundle.Digest
	for _, f := range figs {
		refs = append(refs, FigureRef{File: f.Name, Title: f.Title, Caption: f.Caption})
		skip = append(skip, f.Name)
		listed = append(listed, bundle.DigestOf(f.Name, f.SVG))
	}
	// Every file but README.md, report.html and the figures, which are
	// about to be written, is hashed as it is now.
	for _, k := range known {
		if !slices.Contains(skip, k.File) {
			skip = append(skip, k.File)
			listed = append(listed, k)
		}
	}
	hashed, err := bundle.Digests(ctx, dir, skip...)
	if err != nil {
		return err
	}
	listed = append(listed, hashed...)
	sort.Slice(listed, func(i, j int) bool { return listed[i].File < listed[j].File })
	readme := Markdown(res, refs, listed)
	page, err := HTML(res, readme, figs)
	if err != nil {
		return fmt.Errorf("%s: %w", HTMLFile, err)
	}
	if err := ctx.Err(); err != nil {
		return bundle.Interrupted(ctx)
	}
	for _, f := range figs {
		if err := bundle.WriteFileAtomic(filepath.Join(dir, f.Name), f.SVG); err != nil {
			return err
		}
	}
	if err := bundle.WriteFileAtomic(filepath.Join(dir, bundle.ReadmeFile), readme); err != nil {
		return err
	}
	if err := bundle.WriteFileAtomic(filepath.Join(dir, HTMLFile), page); err != nil {
		return err
	}
	// Every file but README.md and report.html is as it was hashed above.
	return bundle.WriteSumsKnown(dir, listed)
}

// HTMLFile is the self-contained web page of a bundle.
const HTMLFile = "report.html"
