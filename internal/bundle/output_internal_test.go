//go:build unix

package bundle

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// What appears at an output's path while it is being written (here a
// named pipe) is checked again just before the rename, and refused: the
// rename would have replaced it.
func TestWriteOutputChecksAgainBeforeTheRename(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.json")
	err := writeAtomic(path, CheckOutput, func(w io.Writer) error {
		if err := syscall.Mkfifo(path, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := w.Write([]byte("data"))
		return err
	})
	var oe *OutputError
	if !errors.As(err, &oe) || oe.What != "a named pipe" {
		t.Fatalf("%v, want the named pipe refused", err)
	}
	if fi, err := os.Lstat(path); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the named pipe was replaced: %v %v", fi, err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("left behind: %v", entries)
	}
}
