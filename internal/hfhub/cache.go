// Package hfhub finds a file of a Hugging Face model repository the way
// huggingface_hub does: in the local hub cache (HF_HUB_CACHE, HF_HOME/hub or
// ~/.cache/huggingface/hub; models--ORG--NAME/refs/REVISION and
// snapshots/COMMIT/FILE), else by downloading it from the Hub (HF_ENDPOINT,
// HF_TOKEN, never when HF_HUB_OFFLINE is set) into that same layout, blobs/
// included, so the next run and Python tools find it. A download has a short
// connect timeout and an overall deadline; the token is sent only to the Hub
// and never printed or written.
package hfhub

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// ErrNotCached is wrapped by Cached's error when the cache lacks the file.
var ErrNotCached = errors.New("not in the Hugging Face cache")

// Repo is a model repository at a revision: ID is "org/name"; Revision is
// a commit hash, or a branch or tag name ("" means main).
type Repo struct {
	ID       string
	Revision string
}

// ParseRepo reads "org/name" or "org/name@revision".
func ParseRepo(s string) (Repo, error) {
	id, rev, _ := strings.Cut(s, "@")
	r := Repo{ID: id, Revision: rev}
	return r, r.check()
}

// String is "org/name" or "org/name@revision".
func (r Repo) String() string {
	if r.Revision == "" {
		return r.ID
	}
	return r.ID + "@" + r.Revision
}

// rev is the revision, main when none is given.
func (r Repo) rev() string {
	if r.Revision == "" {
		return "main"
	}
	return r.Revision
}

var (
	namePart = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	// safeName is what a header value may be before it names a file or
	// folder of the cache: a commit hash, an ETag.
	safeName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)
)

// check refuses an id that is not org/name, and a revision that could
// leave the cache's folders.
func (r Repo) check() error {
	org, name, ok := strings.Cut(r.ID, "/")
	if !ok || !namePart.MatchString(org) || !namePart.MatchString(name) || strings.Contains(r.ID, "..") {
		return fmt.Errorf("model id %q is not a Hugging Face repository id of the form org/name", r.ID)
	}
	if rev := r.Revision; rev != "" && (strings.ContainsAny(rev, `/\`) || rev == "." || rev == ".." || strings.TrimSpace(rev) != rev) {
		return fmt.Errorf("revision %q is not a commit, branch or tag name", rev)
	}
	return nil
}

// folder is the repository's folder name in the cache.
func (r Repo) folder() string {
	return "models--" + strings.ReplaceAll(r.ID, "/", "--")
}

// CacheDir is the hub cache: $HF_HUB_CACHE, else $HF_HOME/hub, else
// ~/.cache/huggingface/hub, as huggingface_hub reads them.
func CacheDir() (string, error) {
	if d := os.Getenv("HF_HUB_CACHE"); d != "" {
		return d, nil
	}
	if d := os.Getenv("HF_HOME"); d != "" {
		return filepath.Join(d, "hub"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("the Hugging Face cache: no HF_HUB_CACHE, HF_HOME or home directory: %v", err)
	}
	return filepath.Join(home, ".cache", "huggingface", "hub"), nil
}

// Cached returns the path of file of repo in the hub cache at cacheDir:
// snapshots/COMMIT/file, where COMMIT is refs/REVISION's content or the
// revision itself. Its error wraps ErrNotCached when the file is not there.
func Cached(cacheDir string, repo Repo, file string) (string, error) {
	if err := repo.check(); err != nil {
		return "", err
	}
	dir := filepath.Join(cacheDir, repo.folder())
	commit := repo.rev()
	if ref, err := os.ReadFile(filepath.Join(dir, "refs", commit)); err == nil {
		commit = strings.TrimSpace(string(ref))
	}
	if !safeName.MatchString(commit) {
		return "", fmt.Errorf("%s: refs/%s holds %q, not a commit hash", dir, repo.rev(), commit)
	}
	path := filepath.Join(dir, "snapshots", commit, file)
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("%s of %s at revision %s is %w (looked for %s)", file, repo.ID, repo.rev(), ErrNotCached, path)
		}
		return "", err
	}
	return path, nil
}

// SnapshotOf reads a path of the cache's layout, .../models--ORG--NAME/
// snapshots/COMMIT/FILE, back into the repository at that commit; false
// for any other path.
func SnapshotOf(path string) (Repo, bool) {
	commitDir := filepath.Dir(filepath.Clean(path))
	snapshots := filepath.Dir(commitDir)
	folder := filepath.Base(filepath.Dir(snapshots))
	if filepath.Base(snapshots) != "snapshots" || !strings.HasPrefix(folder, "models--") {
		return Repo{}, false
	}
	org, name, ok := strings.Cut(strings.TrimPrefix(folder, "models--"), "--")
	r := Repo{ID: org + "/" + name, Revision: filepath.Base(commitDir)}
	if !ok || r.check() != nil || !safeName.MatchString(r.Revision) {
		return Repo{}, false
	}
	return r, true
}
