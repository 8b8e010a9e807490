//go:build unix

package drive

import "syscall"

// openFileLimit is the soft RLIMIT_NOFILE, and whether it could be read.
func openFileLimit() (uint64, bool) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, false
	}
	return uint64(lim.Cur), true
}
