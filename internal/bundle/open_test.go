//go:build unix

package bundle_test

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
)

func openDir(t *testing.T, dir string) *bundle.Dir {
	t.Helper()
	d, err := bundle.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func TestDirOpenRefusesNamesOutsideTheBundle(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.log"), []byte("a\n"), 0o644)
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	d := openDir(t, dir)
	for _, name := range []string{"", ".", "..", "../a.log", "sub/../a.log", "./a.log", "sub//a.log", "/etc/passwd", "a.log/", "a\x00.log", `sub\a.log`} {
		_, err := d.Open(context.Background(), name, bundle.FileLimit)
		var fe *bundle.FileError
		if !errors.As(err, &fe) || !strings.Contains(fe.Msg, "not a file name inside the bundle") || fe.Name != name {
			t.Errorf("Open(%q): %v, want a FileError naming it as not inside the bundle", name, err)
		}
	}
}

func TestDirOpenRefusesWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(outside, []byte("secret\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "a.log"), []byte("a\n"), 0o644)
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	os.Symlink(outside, filepath.Join(dir, "out.log"))
	os.Symlink("a.log", filepath.Join(dir, "in.log")) // even a link inside
	os.Symlink(filepath.Dir(outside), filepath.Join(dir, "linked"))
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := openDir(t, dir)
	for name, want := range map[string]string{
		"out.log":       "a symbolic link",
		"in.log":        "a symbolic link",
		"linked/secret": "linked is a symbolic link",
		"fifo":          "not a regular file (a named pipe)",
		"sub":           "not a regular file (a directory)",
		"a.log/x":       "a.log is not a directory",
		"none":          "missing",
	} {
		_, err := d.Open(context.Background(), name, bundle.FileLimit)
		var fe *bundle.FileError
		if !errors.As(err, &fe) || !strings.HasPrefix(fe.Msg, want) {
			t.Errorf("Open(%q): %v, want %q", name, err, want)
		}
	}
	if _, err := d.Open(context.Background(), "none", bundle.FileLimit); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file: %v, want fs.ErrNotExist", err)
	}
}

func TestDirOpenSizeLimitAndGrowingFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "grows.log")
	os.WriteFile(path, []byte("0123456789"), 0o644)
	d := openDir(t, dir)
	small := bundle.Limit{Kind: "a test file", Bytes: 9}
	_, err := d.Open(context.Background(), "grows.log", small)
	if err == nil || err.Error() != path+": 10 bytes, more than the 9 bytes a test file may hold" {
		t.Errorf("over the limit: %v", err)
	}
	f, err := d.Open(context.Background(), "grows.log", bundle.FileLimit)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// The file grows after it was opened: the read stops at the size seen
	// at open, so a file that keeps growing cannot keep a reader going.
	w, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	w.WriteString("more that was not there at open")
	w.Close()
	data, err := io.ReadAll(f)
	if err != nil || string(data) != "0123456789" || f.Size() != 10 {
		t.Errorf("read %q (size %d), %v; want the 10 bytes there at open", data, f.Size(), err)
	}
}

func TestDirReadStopsWhenTheContextEnds(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.log"), []byte("a\n"), 0o644)
	d := openDir(t, dir)
	ctx, cancel := context.WithCancel(context.Background())
	f, err := d.Open(ctx, "a.log", bundle.FileLimit)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cancel()
	if _, err := f.Read(make([]byte, 8)); !errors.Is(err, context.Canceled) || !bundle.IsInterrupted(ctx, err) {
		t.Errorf("read after cancel: %v, want the interruption", err)
	}
	if _, err := d.Hash(ctx, "a.log", bundle.FileLimit); !bundle.IsInterrupted(ctx, err) {
		t.Errorf("hash after cancel: %v, want the interruption", err)
	}
}

func TestFilesNeverFollowsLinksAndNamesWhatIsNotRegular(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o644)
	for _, f := range []string{"results.json", "a.log", "figs/x.svg", "figs-2.svg", ".hidden", ".git/config", bundle.SumsFile} {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755)
		os.WriteFile(filepath.Join(dir, f), []byte(f), 0o644)
	}
	os.Symlink(outside, filepath.Join(dir, "linked"))
	os.Symlink(filepath.Join(outside, "nowhere"), filepath.Join(dir, bundle.JournalFile))
	syscall.Mkfifo(filepath.Join(dir, "figs", "fifo"), 0o644)
	files, bad, err := openDir(t, dir).Files(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a.log", "figs-2.svg", "figs/x.svg", "results.json"}; !reflect.DeepEqual(files, want) {
		t.Errorf("files %q, want %q", files, want)
	}
	var got []string
	for _, b := range bad {
		got = append(got, b.Name+": "+b.Msg)
	}
	want := []string{
		"figs/fifo: not a regular file (a named pipe)",
		"journal.jsonl: a symbolic link (a bundle holds only regular files)",
		"linked: a symbolic link (a bundle holds only regular files)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("bad entries:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// A bundle holding a link gets no manifest: it could not cover it.
	if err := bundle.WriteSumsKnown(dir, nil); err == nil || !strings.Contains(err.Error(), "figs/fifo: not a regular file") {
		t.Errorf("WriteSumsKnown over a bundle with a FIFO and links: %v", err)
	}
}
