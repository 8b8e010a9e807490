package bundletest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
)

// Merge merges parts as `rehearse merge` does: each is written as a bundle
// of its own (its aggregates recomputed, then WriteResults and
// SHA256SUMS), read back by bundle.ReadPartSet, merged by PartSet.Merge
// (names label the parts in errors and notes), written by
// MergedParts.Write, and the merged results.json read back. The parts are
// not changed.
func Merge(t testing.TB, parts []*bundle.Results, names []string, o bundle.MergeOptions) (*bundle.Results, error) {
	t.Helper()
	ctx := context.Background()
	root := t.TempDir()
	dirs := make([]string, len(parts))
	for i, p := range parts {
		c := *p
		c.Capacity = slices.Clone(p.Capacity)
		c.Recompute()
		dirs[i] = filepath.Join(root, fmt.Sprintf("part%d", i))
		if err := writeBundle(dirs[i], &c); err != nil {
			t.Fatal(err)
		}
	}
	set, err := bundle.ReadPartSet(ctx, dirs)
	if err != nil {
		t.Fatalf("the parts do not read as a merge reads them: %v", err)
	}
	merged, err := set.Merge(ctx, names, o)
	if err != nil {
		return nil, err
	}
	out := filepath.Join(root, "merged")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := merged.Write(ctx, out); err != nil {
		t.Fatal(err)
	}
	return bundle.ReadResults(out)
}

// writeBundle writes res as the bundle dir: results.json and SHA256SUMS.
func writeBundle(dir string, res *bundle.Results) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	if err := bundle.WriteResults(dir, res); err != nil {
		return err
	}
	return bundle.WriteSumsKnown(dir, nil)
}
