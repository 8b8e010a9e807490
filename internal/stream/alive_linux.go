package stream

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"syscall"
)

// tcpEstablished is the kernel's TCP_ESTABLISHED, the first byte of struct
// tcp_info.
const tcpEstablished = 1

// checkAlive says why conn cannot carry a request, or nil when it can: at
// the moment of use, a non-blocking MSG_PEEK on its socket (through
// syscall.RawConn.Control, so a reader blocked on the connection is neither
// disturbed nor waited for) reports a close (EOF), a reset, or bytes the
// server sent unasked. A TLS connection may hold records the server sent
// after the handshake (session tickets), so for it pending bytes are read as
// stale only when the kernel also says the server has closed its side.
func checkAlive(conn net.Conn) error {
	_, isTLS := conn.(*tls.Conn)
	if tc, ok := conn.(*tls.Conn); ok {
		conn = tc.NetConn()
	}
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	var why error
	if err := rc.Control(func(fd uintptr) {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.EINTR):
			// Nothing pending: open.
		case errors.Is(err, syscall.ECONNRESET):
			why = errors.New("reset by the server")
		case err != nil:
			why = err
		case n == 0:
			why = errors.New("closed by the server (EOF)")
		case !isTLS:
			why = fmt.Errorf("the server sent bytes nobody asked for (%q…)", b[:n])
		default:
			// tcp_info's first byte is the connection's state; a short
			// buffer is allowed and gets the head of the struct.
			if info, err := syscall.GetsockoptInet4Addr(int(fd), syscall.IPPROTO_TCP, syscall.TCP_INFO); err == nil && info[0] != tcpEstablished {
				why = errors.New("closed by the server")
			}
		}
	}); err != nil {
		if errors.Is(err, net.ErrClosed) {
			// The transport closes a connection whose read ended: the
			// server's close or reset.
			return errors.New("closed by the server")
		}
		return err
	}
	return why
}
