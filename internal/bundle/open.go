package bundle

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Limit is the most bytes one kind of bundle file may hold. A bundle is
// a closed world: what reads one opens only regular files inside it,
// through Dir, each within the limit of its kind, and a file above it is
// refused with an error naming it (never silently truncated).
type Limit struct {
	// Kind names the file in errors: "a results.json".
	Kind  string
	Bytes int64
}

// The limits of the kinds of bundle file.
var (
	// results.json and the journal are read as they stream, never held
	// whole: a bundle of a million requests holds a few GB of each.
	ResultsLimit = Limit{"a " + ResultsFile, 16 << 30}
	JournalLimit = Limit{"a " + JournalFile, 16 << 30}
	SumsLimit    = Limit{"a " + SumsFile, 16 << 20}
	NotesLimit   = Limit{"an operator's notes file", 1 << 20}
	// FileLimit is any other file: server logs, figures, the report.
	FileLimit = Limit{"a bundle file", 64 << 30}
)

// limitFor is the limit of the bundle file name, by its kind.
func limitFor(name string) Limit {
	switch name {
	case ResultsFile:
		return ResultsLimit
	case JournalFile:
		return JournalLimit
	case SumsFile:
		return SumsLimit
	}
	return FileLimit
}

func (l Limit) refuse(size int64) string {
	return fmt.Sprintf("%d bytes, more than the %s %s may hold", size, bytesText(l.Bytes), l.Kind)
}

func bytesText(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// FileError is a file of a bundle that was refused or could not be read:
// a name that is not inside the bundle, a symbolic link, something other
// than a regular file, a file above its size limit, or an I/O error.
type FileError struct {
	// Dir is the bundle's directory, Name the file relative to it.
	Dir, Name string
	// Msg says what is wrong, without the name.
	Msg string
	// Err is the underlying error, if any (fs.ErrNotExist for a missing file).
	Err error
}

func (e *FileError) Error() string {
	switch {
	case e.Dir == "":
		return e.Name + ": " + e.Msg
	case !fs.ValidPath(e.Name):
		return e.Dir + ": " + e.Name + ": " + e.Msg
	}
	return filepath.Join(e.Dir, filepath.FromSlash(e.Name)) + ": " + e.Msg
}

func (e *FileError) Unwrap() error { return e.Err }

// Interrupted is the error of work stopped because ctx ended: it wraps
// ctx.Err() (errors.Is(err, context.Canceled)) and says the cause.
func Interrupted(ctx context.Context) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return fmt.Errorf("interrupted (%v): %w", cause, err)
	}
	return fmt.Errorf("interrupted: %w", err)
}

// IsInterrupted reports whether err is the error of work stopped because
// ctx ended (Ctrl-C), as opposed to a problem of the bundle.
func IsInterrupted(ctx context.Context, err error) bool {
	return err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err())
}

// Dir is a bundle directory opened for reading. Every file of a bundle is
// read through it: its name must be a clean relative path inside the
// bundle (no "..", not absolute), no component may be a symbolic link, the
// file must be a regular file, and it is read no further than its size at
// open, itself within a limit. The os.Root beneath means that no name, and
// no link swapped in while reading, reaches outside the directory.
type Dir struct {
	path string
	root *os.Root
}

// OpenDir opens the bundle directory dir.
func OpenDir(dir string) (*Dir, error) {
	st, err := os.Stat(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, &FileError{Name: dir, Msg: "no such bundle directory", Err: err}
		}
		return nil, &FileError{Name: dir, Msg: unwrapPath(err), Err: err}
	}
	if !st.IsDir() {
		return nil, &FileError{Name: dir, Msg: "not a directory", Err: fs.ErrInvalid}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, &FileError{Name: dir, Msg: unwrapPath(err), Err: err}
	}
	return &Dir{path: dir, root: root}, nil
}

// Close releases the directory.
func (d *Dir) Close() error { return d.root.Close() }

func (d *Dir) fail(name, msg string, err error) *FileError {
	return &FileError{Dir: d.path, Name: name, Msg: msg, Err: err}
}

// checkName refuses a name that is not a clean relative path inside the
// bundle.
func (d *Dir) checkName(name string) error {
	if !fs.ValidPath(name) || name == "." || strings.ContainsRune(name, 0) || strings.Contains(name, `\`) {
		return d.fail(name, "not a file name inside the bundle (want a relative path without \"..\")", fs.ErrInvalid)
	}
	return nil
}

// lstat checks every component of name without following links: each
// must exist, none may be a symbolic link, every one but the last must be
// a directory. It returns the last one's information.
func (d *Dir) lstat(name string) (fs.FileInfo, error) {
	if err := d.checkName(name); err != nil {
		return nil, err
	}
	parts := strings.Split(name, "/")
	var fi fs.FileInfo
	for i := range parts {
		prefix := strings.Join(parts[:i+1], "/")
		var err error
		fi, err = d.root.Lstat(prefix)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, d.fail(name, "missing", fs.ErrNotExist)
			}
			return nil, d.fail(name, unwrapPath(err), err)
		}
		last := i == len(parts)-1
		switch {
		case fi.Mode()&fs.ModeSymlink != 0 && last:
			return nil, d.fail(name, "a symbolic link (a bundle holds only regular files)", nil)
		case fi.Mode()&fs.ModeSymlink != 0:
			return nil, d.fail(name, prefix+" is a symbolic link (a bundle holds only regular files)", nil)
		case !last && !fi.IsDir():
			return nil, d.fail(name, prefix+" is not a directory", fs.ErrNotExist)
		}
	}
	return fi, nil
}

// unwrapPath is an error's message without the *PathError's op and path
// (the caller names the file).
func unwrapPath(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// notRegular says what an entry that is not a regular file is.
func notRegular(m fs.FileMode) string {
	if m&fs.ModeSymlink != 0 {
		return "a symbolic link (a bundle holds only regular files)"
	}
	return "not a regular file (" + kindOf(m) + ")"
}

func kindOf(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "of mode " + m.String()
}

// File is a regular file of a bundle opened for reading: Read stops at
// the size it had when opened, and when the context ends.
type File struct {
	f    *os.File
	r    io.Reader
	name string
	size int64
}

// Size is the file's size at open: no read goes beyond it.
func (f *File) Size() int64 { return f.size }

// Name is the file's name inside the bundle.
func (f *File) Name() string { return f.name }

func (f *File) Read(p []byte) (int, error) { return f.r.Read(p) }

// Close closes the file.
func (f *File) Close() error { return f.f.Close() }

// ctxReader stops reading when ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if c.ctx.Err() != nil {
		return 0, Interrupted(c.ctx)
	}
	return c.r.Read(p)
}

// Open opens name, a file of the bundle, for reading at most limit bytes.
// The file is opened non-blocking (a FIFO swapped in after the check
// cannot block the open), then checked again on its descriptor: a regular
// file, the very one checked by name, within the limit.
func (d *Dir) Open(ctx context.Context, name string, limit Limit) (*File, error) {
	if ctx.Err() != nil {
		return nil, Interrupted(ctx)
	}
	fi, err := d.lstat(name)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, d.fail(name, notRegular(fi.Mode()), nil)
	}
	if fi.Size() > limit.Bytes {
		return nil, d.fail(name, limit.refuse(fi.Size()), nil)
	}
	f, err := d.root.OpenFile(name, os.O_RDONLY|openReadFlags, 0)
	if err != nil {
		return nil, d.fail(name, unwrapPath(err), err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, d.fail(name, unwrapPath(err), err)
	}
	switch {
	case !st.Mode().IsRegular():
		f.Close()
		return nil, d.fail(name, notRegular(st.Mode()), nil)
	case !os.SameFile(fi, st):
		f.Close()
		return nil, d.fail(name, "replaced while being opened", nil)
	case st.Size() > limit.Bytes:
		f.Close()
		return nil, d.fail(name, limit.refuse(st.Size()), nil)
	}
	if err := setBlocking(f); err != nil {
		f.Close()
		return nil, d.fail(name, err.Error(), err)
	}
	return &File{f: f, r: ctxReader{ctx, io.LimitReader(f, st.Size())}, name: name, size: st.Size()}, nil
}

// readChunk is how much one read of a bundle file asks for: the context
// is looked at between chunks.
const readChunk = 1 << 20

// ReadFile reads all of name (at most limit bytes), in chunks between
// which it looks at ctx.
func (d *Dir) ReadFile(ctx context.Context, name string, limit Limit) ([]byte, error) {
	f, err := d.Open(ctx, name, limit)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data := make([]byte, f.size)
	off := 0
	for off < len(data) {
		n, err := f.Read(data[off:min(len(data), off+readChunk)])
		off += n
		if err == io.EOF {
			break // it shrank since it was opened
		}
		if err != nil {
			return nil, d.readError(ctx, name, err)
		}
	}
	return data[:off], nil
}

func (d *Dir) readError(ctx context.Context, name string, err error) error {
	if IsInterrupted(ctx, err) {
		return err
	}
	return d.fail(name, unwrapPath(err), err)
}

// Hash returns the hex SHA-256 of name, read no further than its size at
// open (at most limit bytes).
func (d *Dir) Hash(ctx context.Context, name string, limit Limit) (string, error) {
	f, err := d.Open(ctx, name, limit)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.CopyBuffer(h, f, make([]byte, readChunk)); err != nil {
		return "", d.readError(ctx, name, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Files lists the regular files of the bundle relative to it, sorted,
// except the manifest and hidden files (and whatever is in hidden
// folders). It never follows a symbolic link: each entry that is not a
// regular file or a folder (a link, a FIFO, a device) comes back in bad,
// so that a bundle cannot hold anything its manifest does not cover.
func (d *Dir) Files(ctx context.Context) (files []string, bad []*FileError, err error) {
	err = d.walk(ctx, ".", &files, &bad)
	sort.Strings(files)
	sort.Slice(bad, func(i, j int) bool { return bad[i].Name < bad[j].Name })
	return files, bad, err
}

func (d *Dir) walk(ctx context.Context, dir string, files *[]string, bad *[]*FileError) error {
	if ctx.Err() != nil {
		return Interrupted(ctx)
	}
	f, err := d.root.OpenFile(dir, os.O_RDONLY|openDirFlags, 0)
	if err != nil {
		return d.fail(dir, unwrapPath(err), err)
	}
	entries, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return d.fail(dir, unwrapPath(err), err)
	}
	for _, e := range entries {
		name := e.Name()
		if dir != "." {
			name = dir + "/" + name
		}
		if strings.HasPrefix(e.Name(), ".") || name == SumsFile {
			continue
		}
		switch t := e.Type(); {
		case t.IsDir():
			if err := d.walk(ctx, name, files, bad); err != nil {
				return err
			}
		case t.IsRegular():
			*files = append(*files, name)
		default:
			*bad = append(*bad, d.fail(name, notRegular(t), nil))
		}
	}
	return nil
}

// ReadNotes reads an operator's notes file (markdown) as a bundle file is
// read: a regular file, never through a symbolic link, at most NotesLimit.
func ReadNotes(ctx context.Context, path string) ([]byte, error) {
	d, err := OpenDir(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.ReadFile(ctx, filepath.Base(path), NotesLimit)
}
