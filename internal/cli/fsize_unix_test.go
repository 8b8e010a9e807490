//go:build unix

package cli

import (
	"os/signal"
	"strconv"
	"syscall"
)

// limitFileSize sets this process's RLIMIT_FSIZE to limit bytes ("" leaves
// it) and ignores SIGXFSZ, so that a write past it fails with EFBIG
// instead of killing the process, as a full disk's would fail.
func limitFileSize(limit string) error {
	if limit == "" {
		return nil
	}
	n, err := strconv.ParseUint(limit, 10, 64)
	if err != nil {
		return err
	}
	signal.Ignore(syscall.SIGXFSZ)
	return syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: n, Max: n})
}
