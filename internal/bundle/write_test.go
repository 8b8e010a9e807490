package bundle_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/bundle/bundletest"
)

// A bundle's files are created, never written through a link: a link
// named like one of them, dangling towards a file outside, is refused (the
// journal) or replaced as a directory entry (results.json and the other
// files written atomically), and nothing appears outside.
func TestWritesNeverFollowLinks(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	for _, name := range []string{bundle.JournalFile, bundle.ResultsFile, bundle.ReadmeFile} {
		if err := os.Symlink(filepath.Join(outside, name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	j, err := bundle.CreateJournal(filepath.Join(dir, bundle.JournalFile))
	if err == nil {
		j.WriteHeader(bundletest.SeedLike())
		j.Close()
		t.Error("CreateJournal wrote through a dangling symbolic link")
	} else if want := filepath.Join(dir, bundle.JournalFile) + ": a symbolic link"; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("CreateJournal: %v, want an error starting %q", err, want)
	}
	if err := bundle.WriteResults(dir, bundletest.SeedLike()); err != nil {
		t.Fatal(err)
	}
	if err := bundle.WriteFileAtomic(filepath.Join(dir, bundle.ReadmeFile), []byte("# report\n")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{bundle.ResultsFile, bundle.ReadmeFile} {
		if fi, err := os.Lstat(filepath.Join(dir, name)); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%s: %v, want a regular file in place of the link", name, fi.Mode())
		}
	}
	if entries, _ := os.ReadDir(outside); len(entries) > 0 {
		t.Errorf("written outside the bundle: %v", entries)
	}
}

// A journal is never written over: a second rehearsal into the same folder
// must not truncate the first one's record of what finished.
func TestCreateJournalRefusesAnExistingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), bundle.JournalFile)
	os.WriteFile(path, []byte(`{"header":{}}`+"\n"), 0o644)
	if _, err := bundle.CreateJournal(path); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("CreateJournal over an existing journal: %v", err)
	}
	if data, _ := os.ReadFile(path); len(data) == 0 {
		t.Error("the existing journal was truncated")
	}
}
