//go:build !linux

package stream

import (
	"net"
	"syscall"
	"time"
)

// rxStampControl has no kernel receive stamps to ask for here.
func rxStampControl() func(network, address string, c syscall.RawConn) error { return nil }

// rxReader stamps each read with time.Now after it, here.
type rxReader struct {
	conn net.Conn
	last time.Time
}

func newRxReader(conn net.Conn) *rxReader { return &rxReader{conn: conn} }

func (r *rxReader) release() {}

func (r *rxReader) read(p []byte) (int, time.Time, error) {
	n, err := r.conn.Read(p)
	return n, r.monotone(time.Now()), err
}

func (r *rxReader) monotone(t time.Time) time.Time {
	if t.Before(r.last) {
		t = r.last
	}
	r.last = t
	return t
}
