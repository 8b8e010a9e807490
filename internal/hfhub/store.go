package hfhub

import (
	"os"
	"path/filepath"
)

// store writes body into the cache as huggingface_hub lays it out and
// returns the snapshot path: blobs/ETAG, snapshots/COMMIT/FILE linking to
// it (a copy where links cannot be made), refs/REVISION holding the commit.
// Every file is written whole under a temporary name and renamed, so
// processes downloading at once leave a complete file.
func (c *Client) store(repo Repo, file, commit, etag string, body []byte) (string, error) {
	dir := filepath.Join(c.CacheDir, repo.folder())
	blob := filepath.Join(dir, "blobs", etag)
	if err := writeWhole(blob, body); err != nil {
		return "", err
	}
	pointer := filepath.Join(dir, "snapshots", commit, filepath.FromSlash(file))
	if err := linkTo(blob, pointer); err != nil {
		if err := writeWhole(pointer, body); err != nil {
			return "", err
		}
	}
	if rev := repo.rev(); rev != commit {
		if err := writeWhole(filepath.Join(dir, "refs", rev), []byte(commit)); err != nil {
			return "", err
		}
	}
	return pointer, nil
}

// writeWhole writes data to path through a temporary file in its folder.
func writeWhole(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.incomplete")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// linkTo makes pointer a relative symbolic link to blob, replacing what
// was there.
func linkTo(blob, pointer string) error {
	if err := os.MkdirAll(filepath.Dir(pointer), 0o755); err != nil {
		return err
	}
	rel, err := filepath.Rel(filepath.Dir(pointer), blob)
	if err != nil {
		return err
	}
	// A name of its own for the new link, so that writers at once do not
	// meet.
	f, err := os.CreateTemp(filepath.Dir(pointer), filepath.Base(pointer)+".*.incomplete")
	if err != nil {
		return err
	}
	tmp := f.Name()
	f.Close()
	os.Remove(tmp)
	if err := os.Symlink(rel, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, pointer); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
