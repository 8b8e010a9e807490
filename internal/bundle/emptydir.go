package bundle

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// NotEmptyError is a bundle's folder refused because it holds something: a
// bundle is never written over another, nor mixed with other files.
type NotEmptyError struct {
	Dir string
	// Bundle is the bundle file the folder holds (results.json or
	// journal.jsonl), or "" for other files.
	Bundle string
}

// Error says what the folder holds, and to choose another.
func (e *NotEmptyError) Error() string {
	if e.Bundle != "" {
		return fmt.Sprintf("%s already holds a bundle (%s): the output folder is not empty (choose another with -o)", e.Dir, e.Bundle)
	}
	return fmt.Sprintf("%s: the output folder is not empty (choose another with -o)", e.Dir)
}

// CheckEmptyDir is the one rule for a folder a bundle is to be written
// to, whoever writes it (a rehearsal, a merge, the workers of a split
// plan): it may be missing or empty; one that holds anything is a
// *NotEmptyError, naming the bundle file when it holds a bundle.
func CheckEmptyDir(dir string) error {
	for _, f := range []string{ResultsFile, JournalFile} {
		if _, err := os.Lstat(filepath.Join(dir, f)); err == nil {
			return &NotEmptyError{Dir: dir, Bundle: f}
		}
	}
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case len(entries) > 0:
		return &NotEmptyError{Dir: dir}
	}
	return nil
}

// MakeEmptyDir creates a bundle's folder, and its parents, after
// CheckEmptyDir: a missing folder is created, an empty one taken as it is.
func MakeEmptyDir(dir string) error {
	if err := CheckEmptyDir(dir); err != nil {
		return err
	}
	return os.MkdirAll(dir, 0o755)
}
