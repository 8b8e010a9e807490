//go:build unix

package bundle

import (
	"os"
	"syscall"
)

// A bundle file is opened non-blocking, so that a FIFO cannot block the
// open, and without following a link in its last component (os.Root
// resolves links inside the root itself, so Dir.Open also refuses any
// link it finds by name, and checks the descriptor it got).
const (
	openReadFlags = syscall.O_NOFOLLOW | syscall.O_NONBLOCK
	openDirFlags  = syscall.O_NOFOLLOW | syscall.O_NONBLOCK | syscall.O_DIRECTORY
	// openWriteFlags: a file of a bundle is never written through a link.
	openWriteFlags = syscall.O_NOFOLLOW
)

// setBlocking clears O_NONBLOCK, set only so that the open could not block.
func setBlocking(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = syscall.SetNonblock(int(fd), false) }); err != nil {
		return err
	}
	return serr
}
