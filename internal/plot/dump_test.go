package plot

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rehearse/rehearse/internal/plot/plottest"
)

func TestDumpFigures(t *testing.T) {
	dir := os.Getenv("REHEARSE_FIGURE_DIR")
	if dir == "" {
		t.Skip("set REHEARSE_FIGURE_DIR to write the figures of the synthetic rehearsal there")
	}
	figs, err := Render(plottest.Results(plottest.Default()))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range figs {
		if err := os.WriteFile(filepath.Join(dir, f.Name), f.SVG, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s %d bytes: %s", f.Name, len(f.SVG), f.Title)
	}
}
