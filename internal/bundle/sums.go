package bundle

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Digest is one line of SHA256SUMS.
type Digest struct {
	File   string
	SHA256 string
}

// HashFile returns the hex SHA-256 of a file.
func HashFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Digests hashes every file of the bundle except SHA256SUMS.
func Digests(dir string) ([]Digest, error) {
	files, err := Files(dir)
	if err != nil {
		return nil, err
	}
	out := make([]Digest, 0, len(files))
	for _, f := range files {
		sum, err := HashFile(filepath.Join(dir, filepath.FromSlash(f)))
		if err != nil {
			return nil, err
		}
		out = append(out, Digest{File: f, SHA256: sum})
	}
	return out, nil
}

// WriteSums writes SHA256SUMS over every file of the bundle, in the format
// of sha256sum(1), so `sha256sum -c SHA256SUMS` checks it too.
func WriteSums(dir string) error {
	return WriteSumsKnown(dir, nil)
}

// WriteSumsKnown writes SHA256SUMS like WriteSums, taking the digest of a
// file from known where it is listed there (the caller hashed it and has
// not changed it since) and hashing only the others: a bundle's logs can
// be large, and a report that lists digests need not hash them twice.
func WriteSumsKnown(dir string, known []Digest) error {
	files, err := Files(dir)
	if err != nil {
		return err
	}
	have := make(map[string]string, len(known))
	for _, d := range known {
		have[d.File] = d.SHA256
	}
	ds := make([]Digest, 0, len(files))
	for _, f := range files {
		sum, ok := have[f]
		if !ok {
			if sum, err = HashFile(filepath.Join(dir, filepath.FromSlash(f))); err != nil {
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

// ReadSums parses dir/SHA256SUMS.
func ReadSums(dir string) ([]Digest, error) {
	path := filepath.Join(dir, SumsFile)
	f, err := os.Open(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, fmt.Errorf("%s: missing", path)
		}
		return nil, err
	}
	defer f.Close()
	var out []Digest
	sc := bufio.NewScanner(f)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if text == "" {
			continue
		}
		sum, name, ok := strings.Cut(text, "  ")
		if !ok || len(sum) != 64 || strings.Trim(sum, "0123456789abcdef") != "" || name == "" {
			return nil, fmt.Errorf("%s:%d: not a line of the form \"<sha256>  <file>\"", path, line)
		}
		out = append(out, Digest{File: strings.TrimPrefix(name, "*"), SHA256: sum})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].File < out[j].File })
	return out, nil
}
