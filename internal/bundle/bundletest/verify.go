package bundletest

import (
	"context"
	"errors"
	"path/filepath"

	"github.com/rehearse/rehearse/internal/bundle"
)

// Verify checks a bundle as `rehearse verify` does with no tokenizer
// (bundle.VerifyWith, output_tokens not re-counted): its problems, with
// an error that kept it from verifying (an entry it could not read) as
// one more problem naming that entry.
func Verify(dir string) []bundle.Problem {
	rep, err := bundle.VerifyWith(context.Background(), dir, bundle.Options{})
	if err == nil {
		return rep.Problems
	}
	var fe *bundle.FileError
	if errors.As(err, &fe) {
		return append(rep.Problems, bundle.Problem{File: fe.Name, Msg: fe.Msg})
	}
	return append(rep.Problems, bundle.Problem{Msg: err.Error()})
}

// HashFile returns the hex SHA-256 of a regular file of a bundle, as
// SHA256SUMS lists it (bundle.Dir.Hash: never through a symbolic link, at
// most bundle.FileLimit bytes).
func HashFile(path string) (string, error) {
	d, err := bundle.OpenDir(filepath.Dir(path))
	if err != nil {
		return "", err
	}
	defer d.Close()
	return d.Hash(context.Background(), filepath.Base(path), bundle.FileLimit)
}

// Files lists the regular files of a bundle relative to dir, sorted, as
// SHA256SUMS covers them (bundle.Dir.Files): every file but the manifest
// itself and hidden files. An entry that is not a regular file or a
// folder is an error naming it.
func Files(dir string) ([]string, error) {
	d, err := bundle.OpenDir(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	files, bad, err := d.Files(context.Background())
	if err == nil && len(bad) > 0 {
		err = bad[0]
	}
	return files, err
}
