//go:build race

package stream

import "syscall"

// raceSynced gives the race detector the edge a socket read carries:
// syscall.Read marks one (what the peer wrote before its write happened
// before what follows the read), syscall.Recvmsg does not. An empty read
// of the socket returns at once and marks it; only race builds make it.
func raceSynced(fd uintptr) { syscall.Read(int(fd), nil) }
