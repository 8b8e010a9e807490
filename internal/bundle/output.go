package bundle

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// StdoutPath is the output path that means standard output ("-o -").
const StdoutPath = "-"

// OutputError is an output path refused before anything is written: what
// is there is not a regular file (a device, a named pipe, a socket, a
// directory, a symbolic link, even to a regular file).
type OutputError struct {
	Path string
	// What is what is there ("a named pipe", "a symbolic link to x").
	What string
}

func (e *OutputError) Error() string {
	return fmt.Sprintf("%s: %s: an output is written as a new file or over a regular one (%q is standard output)", e.Path, e.What, StdoutPath)
}

// CheckOutput vets an output path a user named, before any work: "-" (see
// WriteOutput), nothing, or a regular file; anything else is an
// *OutputError saying what is there. (A missing folder is the write's
// error, a *WriteError: a folder made meanwhile is fine.)
func CheckOutput(path string) error {
	if path == StdoutPath {
		return nil
	}
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return &OutputError{Path: path, What: "cannot be looked at (" + unwrapPath(err) + ")"}
	case fi.Mode()&fs.ModeSymlink != 0:
		target, _ := os.Readlink(path)
		return &OutputError{Path: path, What: "a symbolic link (to " + target + ")"}
	case !fi.Mode().IsRegular():
		return &OutputError{Path: path, What: kindOf(fi.Mode())}
	}
	return nil
}

// WriteOutput writes data to an output path a user named: "-" is stdout;
// any other path is written through a temporary file in its folder and
// renamed over it, only where there is nothing or a regular file
// (CheckOutput, before the temporary file is created and again just
// before the rename). A refusal is an *OutputError, a failure of the file
// a *WriteError.
func WriteOutput(path string, data []byte, stdout io.Writer) error {
	if path == StdoutPath {
		_, err := stdout.Write(data)
		return err
	}
	return writeAtomic(path, CheckOutput, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}
