package stream

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// The own path stamps each read with the time its bytes reached the host,
// as the kernel recorded it (SO_TIMESTAMPNS: the receive time of the last
// packet the read took), not with the clock reading after the read
// returned. A client short of CPU, or one that is working through a burst
// of 4,096 streams' first bytes, reads late; the kernel's stamp does not
// move with it, so the time a server's token took to arrive is not charged
// with the client's queue. Where the kernel gives no stamp (a connection
// that is not TCP, an option the kernel refused) the read is stamped with
// time.Now after it, as before.

// maxStampLag bounds how far before the read's end a kernel stamp may lie
// and still be taken; beyond it (a wall clock stepped under the run), the
// read is stamped with time.Now.
const maxStampLag = time.Minute

// rxStampEnv set to "read" stamps each read with time.Now after it, as
// before kernel stamps (bench/client runs the client both ways).
const rxStampEnv = "REHEARSE_RXSTAMP"

// rxStampControl is the dialer's Control: enableRxStamps, or nil where
// rxStampEnv turns the stamps off. It also turns the host's stamping on
// for the rest of the process (holdRxStamps).
func rxStampControl() func(network, address string, c syscall.RawConn) error {
	if os.Getenv(rxStampEnv) == "read" {
		return nil
	}
	holdOnce.Do(holdRxStamps)
	return enableRxStamps
}

var holdOnce sync.Once

// holdRxStamps keeps one socket that asks for receive stamps open for the
// life of the process. The kernel stamps packets only while some socket of
// the host asks, and turns that on a moment after the first one does (a
// deferred static key): held from the first client on, it is on before the
// first request's bytes arrive, and stays on between waves whose
// connections all closed. A UDP socket that never sends or receives; where
// it cannot be made, connections ask for themselves as before.
func holdRxStamps() {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return
	}
	if syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1) != nil {
		syscall.Close(fd)
	}
}

// enableRxStamps asks the kernel to stamp what the socket receives; it is
// the client's dialer's Control, so every connection has it before its
// first byte arrives. A refusal leaves the connection unstamped (reads then
// fall back to time.Now).
func enableRxStamps(network, address string, c syscall.RawConn) error {
	c.Control(func(fd uintptr) {
		syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1)
	})
	return nil
}

// rxReader reads one connection for one request. Each read is one
// recvmsg, stamped with the arrival of the last packet it took: a late
// reader may find several, which the kernel merges in the socket's queue
// keeping the last one's stamp, so events read together carry the arrival
// of the last of them, never a time before their own. As conn.Read does, a
// read first tries the socket and waits for the poller only when it finds
// nothing (one that took less than it asked for may still leave the
// server's close pending, which no later readiness event announces).
type rxReader struct {
	conn  net.Conn
	rc    syscall.RawConn // nil: conn.Read and time.Now
	recvf func(uintptr) bool

	// What one recvmsg saw (recv's results).
	p         []byte
	n         int
	errno     error
	sec, nsec int64
	stamped   bool
	last      time.Time
	oob       [64]byte
}

var rxPool = sync.Pool{New: func() any {
	r := new(rxReader)
	r.recvf = r.recv
	return r
}}

// newRxReader returns the reader of conn, stamping from the kernel when
// conn is a socket.
func newRxReader(conn net.Conn) *rxReader {
	r := rxPool.Get().(*rxReader)
	r.conn = conn
	if sc, ok := conn.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			r.rc = rc
		}
	}
	return r
}

func (r *rxReader) release() {
	f := r.recvf
	*r = rxReader{recvf: f}
	rxPool.Put(r)
}

// read reads into p and says when its bytes reached the host. Its errors
// are conn.Read's: io.EOF at the server's close, a *net.OpError otherwise.
func (r *rxReader) read(p []byte) (int, time.Time, error) {
	if r.rc == nil {
		n, err := r.conn.Read(p)
		return n, r.monotone(time.Now()), err
	}
	n, now, err := r.recvOnce(p)
	if err != nil {
		return 0, r.monotone(now), err
	}
	at := now
	if r.stamped {
		if lag := time.Duration(now.UnixNano() - (r.sec*1e9 + r.nsec)); lag >= 0 && lag <= maxStampLag {
			at = now.Add(-lag) // keeps now's monotonic reading
		}
	}
	return n, r.monotone(at), nil
}

// recvOnce is one recvmsg, waiting for the poller while there is nothing
// to take.
func (r *rxReader) recvOnce(p []byte) (int, time.Time, error) {
	r.p, r.n, r.errno, r.stamped = p, 0, nil, false
	err := r.rc.Read(r.recvf)
	now := time.Now()
	r.p = nil
	if err != nil {
		// A deadline or a close, in RawConn's words: say it as conn.Read does.
		var oe *net.OpError
		if errors.As(err, &oe) {
			oe.Op = "read"
		}
		return 0, now, err
	}
	if r.errno != nil {
		return 0, now, &net.OpError{Op: "read", Net: "tcp", Source: r.conn.LocalAddr(), Addr: r.conn.RemoteAddr(), Err: os.NewSyscallError("read", r.errno)}
	}
	if r.n == 0 {
		return 0, now, io.EOF
	}
	return r.n, now, nil
}

// monotone keeps a request's read stamps in order: a read stamped with
// time.Now (no kernel stamp) may lie after a later read's kernel stamp.
func (r *rxReader) monotone(t time.Time) time.Time {
	if t.Before(r.last) {
		t = r.last
	}
	r.last = t
	return t
}

// recv is the RawConn callback: one recvmsg, false to wait for the poller.
func (r *rxReader) recv(fd uintptr) bool {
	for {
		n, oobn, _, _, err := syscall.Recvmsg(int(fd), r.p, r.oob[:], 0)
		switch err {
		case nil:
			r.n = n
			r.parseStamp(r.oob[:oobn])
			raceSynced(fd)
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		default:
			r.errno = err
			return true
		}
	}
}

// parseStamp takes the SCM_TIMESTAMPNS message from a recvmsg's control
// bytes (struct cmsghdr, then a struct timespec), without allocating.
func (r *rxReader) parseStamp(oob []byte) {
	const hdr = int(unsafe.Sizeof(syscall.Cmsghdr{}))
	for len(oob) >= hdr {
		h := (*syscall.Cmsghdr)(unsafe.Pointer(&oob[0]))
		l := int(h.Len)
		if l < hdr || l > len(oob) {
			return
		}
		if h.Level == syscall.SOL_SOCKET && h.Type == syscall.SCM_TIMESTAMPNS && l-hdr >= int(unsafe.Sizeof(syscall.Timespec{})) {
			ts := (*syscall.Timespec)(unsafe.Pointer(&oob[hdr]))
			r.sec, r.nsec, r.stamped = ts.Sec, ts.Nsec, ts.Sec != 0
			return
		}
		l = (l + 7) &^ 7
		if l > len(oob) {
			return
		}
		oob = oob[l:]
	}
}
