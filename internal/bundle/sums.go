package bundle

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Digest is one line of SHA256SUMS.
type Digest struct {
	File   string
	SHA256 string
}

// DigestOf is the digest of data about to be written as file.
func DigestOf(file string, data []byte) Digest {
	sum := sha256.Sum256(data)
	return Digest{File: file, SHA256: hex.EncodeToString(sum[:])}
}

// Digests hashes every file of the bundle except SHA256SUMS and those
// named in except, stopping when ctx ends.
func Digests(ctx context.Context, dir string, except ...string) ([]Digest, error) {
	d, err := OpenDir(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	files, err := d.regularFiles(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Digest, 0, len(files))
	for _, f := range files {
		if slices.Contains(except, f) {
			continue
		}
		sum, err := d.Hash(ctx, f, limitFor(f))
		if err != nil {
			return nil, err
		}
		out = append(out, Digest{File: f, SHA256: sum})
	}
	return out, nil
}

// WriteSumsKnown writes SHA256SUMS over every file of the bundle, in the
// format of sha256sum(1), so `sha256sum -c SHA256SUMS` checks it too. It
// takes the digest of a file from known where it is listed there (the
// caller hashed it and has not changed it since) and hashes only the
// others (nil known: it hashes every file): a bundle's logs can be large,
// and a report that lists digests need not hash them twice.
// A bundle holding an entry that is not a regular file gets no manifest.
func WriteSumsKnown(dir string, known []Digest) error {
	d, err := OpenDir(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	ctx := context.Background()
	files, err := d.regularFiles(ctx)
	if err != nil {
		return err
	}
	have := make(map[string]string, len(known))
	for _, k := range known {
		have[k.File] = k.SHA256
	}
	ds := make([]Digest, 0, len(files))
	for _, f := range files {
		sum, ok := have[f]
		if !ok {
			if sum, err = d.Hash(ctx, f, limitFor(f)); err != nil {
				return err
			}
		}
		ds = append(ds, Digest{File: f, SHA256: sum})
	}
	var b strings.Builder
	for _, d := range ds {
		fmt.Fprintf(&b, "%s  %s\n", d.SHA256, d.File)
	}
	return WriteFileAtomic(filepath.Join(dir, SumsFile), []byte(b.String()))
}

// ListedDigests is SHA256SUMS's digests, for a command that re-renders a
// bundle (rehearse report): it keeps them for every file it does not write
// itself instead of hashing the files again, so that a file changed since
// it was listed is still flagged by verify after the re-render rather than
// listed anew. nil, with no error, where the bundle has no SHA256SUMS (a
// rehearsal that crashed before writing it); an error for a manifest that
// cannot be read or that names a file outside the bundle.
func ListedDigests(ctx context.Context, dir string) ([]Digest, error) {
	d, err := OpenDir(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	ds, err := d.sums(ctx)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	for _, x := range ds {
		if err := d.checkName(x.File); err != nil {
			return nil, err
		}
	}
	return ds, nil
}

// ReadSums parses dir/SHA256SUMS.
func ReadSums(dir string) ([]Digest, error) {
	d, err := OpenDir(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.sums(context.Background())
}

// sums reads and parses SHA256SUMS. The names it lists are not checked
// here: every one is opened through d, which refuses those outside.
func (d *Dir) sums(ctx context.Context) ([]Digest, error) {
	data, err := d.ReadFile(ctx, SumsFile, SumsLimit)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, d.fail(SumsFile, "missing", err)
		}
		return nil, err
	}
	var out []Digest
	for i, text := range bytes.Split(data, []byte("\n")) {
		if len(text) == 0 {
			continue
		}
		sum, name, ok := strings.Cut(string(text), "  ")
		if !ok || len(sum) != 64 || strings.Trim(sum, "0123456789abcdef") != "" || name == "" {
			return nil, d.fail(SumsFile, fmt.Sprintf("line %d: not a line of the form \"<sha256>  <file>\"", i+1), nil)
		}
		out = append(out, Digest{File: strings.TrimPrefix(name, "*"), SHA256: sum})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].File < out[j].File })
	return out, nil
}
