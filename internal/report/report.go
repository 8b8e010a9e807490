package report

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/plot"
)

// Write renders a bundle whose results.json is already written: the
// figures, README.md, report.html, and last SHA256SUMS over every file.
func Write(dir string, res *bundle.Results) error {
	figs, refs, err := writeFigureFiles(dir, res)
	if err != nil {
		return err
	}
	digests, err := bundle.Digests(context.Background(), dir)
	if err != nil {
		return err
	}
	var listed []bundle.Digest
	for _, d := range digests {
		if d.File != bundle.ReadmeFile && d.File != HTMLFile {
			listed = append(listed, d)
		}
	}
	readme := Markdown(res, refs, listed)
	if err := bundle.WriteFileAtomic(filepath.Join(dir, bundle.ReadmeFile), readme); err != nil {
		return err
	}
	if err := writeHTML(dir, res, readme, figs); err != nil {
		return err
	}
	// Every file but README.md and report.html is as it was hashed above.
	return bundle.WriteSumsKnown(dir, listed)
}

// HTMLFile is the self-contained web page of a bundle.
const HTMLFile = "report.html"

func writeFigureFiles(dir string, res *bundle.Results) ([]plot.Figure, []FigureRef, error) {
	figs, err := plot.Render(res)
	if err != nil {
		return nil, nil, fmt.Errorf("figures: %w", err)
	}
	refs := make([]FigureRef, 0, len(figs))
	for _, f := range figs {
		if err := bundle.WriteFileAtomic(filepath.Join(dir, f.Name), f.SVG); err != nil {
			return nil, nil, err
		}
		refs = append(refs, FigureRef{File: f.Name, Title: f.Title, Caption: f.Caption})
	}
	return figs, refs, nil
}

func writeHTML(dir string, res *bundle.Results, readme []byte, figs []plot.Figure) error {
	page, err := HTML(res, readme, figs)
	if err != nil {
		return fmt.Errorf("%s: %w", HTMLFile, err)
	}
	return bundle.WriteFileAtomic(filepath.Join(dir, HTMLFile), page)
}
