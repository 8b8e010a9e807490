//go:build !unix

package bundle

import "os"

// Without O_NONBLOCK and O_NOFOLLOW, Dir.Open relies on its checks by name
// and on the descriptor.
const (
	openReadFlags  = 0
	openDirFlags   = 0
	openWriteFlags = 0
)

func setBlocking(*os.File) error { return nil }
