package bundle_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
)

// TestMakeEmptyDir: the one rule of a bundle's folder, for the runner,
// merge and the workers alike: a missing folder is made, an empty one
// taken, one holding a bundle or any other file refused.
func TestMakeEmptyDir(t *testing.T) {
	root := t.TempDir()
	missing := filepath.Join(root, "a", "b")
	if err := bundle.MakeEmptyDir(missing); err != nil {
		t.Fatal(err)
	}
	if err := bundle.MakeEmptyDir(missing); err != nil {
		t.Fatalf("an empty folder: %v", err)
	}
	for _, c := range []struct{ file, want string }{
		{bundle.JournalFile, "already holds a bundle (journal.jsonl): the output folder is not empty (choose another with -o)"},
		{"notes.txt", ": the output folder is not empty (choose another with -o)"},
	} {
		dir := filepath.Join(root, c.file+".d")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, c.file), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		err := bundle.MakeEmptyDir(dir)
		var ne *bundle.NotEmptyError
		if !errors.As(err, &ne) || !strings.HasPrefix(err.Error(), dir) || !strings.HasSuffix(err.Error(), c.want) {
			t.Errorf("%s: got %v", c.file, err)
		}
		if check := bundle.CheckEmptyDir(dir); check == nil || check.Error() != err.Error() {
			t.Errorf("%s: CheckEmptyDir %v, MakeEmptyDir %v", c.file, check, err)
		}
	}
}
