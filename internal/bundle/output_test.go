//go:build unix

package bundle_test

import (
	"bytes"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
)

// Issue 28 row 3: an output a user names is written over nothing or a
// regular file only; "-" is standard output; a symbolic link (even to a
// regular file), a named pipe, a socket, a folder or a device is refused by
// name before anything is written, and what is there is left as it was.
func TestWriteOutputOnlyOverARegularFileOrNothing(t *testing.T) {
	dir := t.TempDir()
	at := func(name string) string { return filepath.Join(dir, name) }
	os.WriteFile(at("regular"), []byte("old"), 0o644)
	os.WriteFile(at("target"), []byte("kept"), 0o644)
	os.Symlink(at("target"), at("link"))
	os.Symlink(at("nowhere"), at("dangling"))
	os.Symlink("/proc/self/fd/1", at("stdout-link"))
	os.Mkdir(at("folder"), 0o755)
	if err := syscall.Mkfifo(at("fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", at("socket"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	for _, name := range []string{"new", "regular"} {
		if err := bundle.WriteOutput(at(name), []byte("data"), nil); err != nil {
			t.Errorf("%s: %v", name, err)
		} else if got, _ := os.ReadFile(at(name)); string(got) != "data" {
			t.Errorf("%s holds %q", name, got)
		}
	}
	var stdout bytes.Buffer
	if err := bundle.WriteOutput("-", []byte("data"), &stdout); err != nil || stdout.String() != "data" {
		t.Errorf(`"-": %v, standard output got %q`, err, stdout.String())
	}
	refused := map[string]string{
		"link": "a symbolic link (to " + at("target") + ")", "dangling": "a symbolic link",
		"stdout-link": "a symbolic link (to /proc/self/fd/1)", "folder": "a directory",
		"fifo": "a named pipe", "socket": "a socket",
	}
	for name, what := range refused {
		before, _ := os.Lstat(at(name))
		err := bundle.WriteOutput(at(name), []byte("data"), nil)
		var oe *bundle.OutputError
		if !errors.As(err, &oe) || oe.Path != at(name) || !strings.HasPrefix(err.Error(), at(name)+": "+what) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line refusing it as %s", name, err, what)
		}
		if after, _ := os.Lstat(at(name)); after == nil || after.Mode() != before.Mode() {
			t.Errorf("%s was replaced", name)
		}
	}
	if got, _ := os.ReadFile(at("target")); string(got) != "kept" {
		t.Errorf("written through the link: target holds %q", got)
	}
	// A device is refused on sight (checked, never written: this is the
	// machine's /dev/null).
	var oe *bundle.OutputError
	if err := bundle.CheckOutput("/dev/null"); !errors.As(err, &oe) || !strings.Contains(err.Error(), "a character device") {
		t.Errorf("/dev/null: %v, want refused as a character device", err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}
