package stream

import (
	"net"
	"os"
	"syscall"
	"time"
)

// ReleaseGroup is how many requests go between two polls of the network:
// a Barrier's group, and the run of an open-loop wave's arrivals due at
// once after which its dispatcher waits for a poll (PollWait).
const ReleaseGroup = 16

// Barrier is the release of a closed-loop wave: every request waits on its
// Gate, and Open lets them go in groups of ReleaseGroup, letting the
// responses that arrived meanwhile be read between two groups.
//
// Released all at once, the requests' goroutines queue behind one another
// in Go's scheduler, each writing its request (tens of microseconds of a
// core, most of it the kernel's loopback or network path), and a response
// that arrives meanwhile is read only once every later request is written:
// 155 ms for 4,096 requests on one core. The kernel stamps each packet's
// arrival, but a read takes one stamp for everything it takes, the last
// packet's, so a stream whose first events waited that long was recorded
// as having received them all at its last one's arrival: its TTFT late by
// up to the whole burst, charged to the server. Between two groups Open
// waits until the scheduler next asks the network what is ready (it waits
// on a socket of its own that it makes readable, which the scheduler finds
// only when it polls, with every socket that became readable meanwhile),
// so a response is read within a group's writes of its arrival. A core
// that has time to spare polls at once; the wait then costs nothing.
type Barrier struct {
	gates []chan struct{}
}

// NewBarrier is the barrier of n requests.
func NewBarrier(n int) *Barrier {
	b := &Barrier{gates: make([]chan struct{}, max(1, (n+ReleaseGroup-1)/ReleaseGroup))}
	for i := range b.gates {
		b.gates[i] = make(chan struct{})
	}
	return b
}

// Gate is the channel request i (0 to n−1) waits on.
func (b *Barrier) Gate(i int) <-chan struct{} {
	return b.gates[min(max(i, 0)/ReleaseGroup, len(b.gates)-1)]
}

// Open lets every request go, a group at a time, and returns when the last
// group is let go. Where the process has no socket pair to wait on, the
// groups go one after another without waiting.
func (b *Barrier) Open() {
	y := NewPollWait()
	defer y.Close()
	for i, g := range b.gates {
		if i > 0 {
			y.Wait()
		}
		close(g)
	}
}

// PollWait parks a goroutine until the scheduler next polls the network
// (Wait); a nil PollWait, where the process has no socket pair for it,
// does not wait.
type PollWait struct {
	r, w net.Conn
	kick chan byte
	seq  byte // the last wait's byte
	buf  [64]byte
}

// pollWaitMax bounds one wait: the scheduler polls the network at least
// every 10 ms (its monitor does), so only a process the system starved of
// CPU that long, or a lost byte, reaches it; the group then goes without
// the poll, and the next wait still waits for its own byte.
const pollWaitMax = 100 * time.Millisecond

// NewPollWait is a PollWait, nil where a socket pair cannot be made.
func NewPollWait() *PollWait {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		return nil
	}
	conn := func(fd int) net.Conn {
		f := os.NewFile(uintptr(fd), "barrier")
		defer f.Close()
		c, err := net.FileConn(f) // a copy of fd, non-blocking, on the poller
		if err != nil {
			return nil
		}
		return c
	}
	r, w := conn(fds[0]), conn(fds[1])
	if r == nil || w == nil {
		for _, c := range []net.Conn{r, w} {
			if c != nil {
				c.Close()
			}
		}
		return nil
	}
	y := &PollWait{r: r, w: w, kick: make(chan byte)}
	go func() {
		var one [1]byte
		for one[0] = range y.kick {
			if _, err := y.w.Write(one[:]); err != nil {
				y.r.Close() // every wait from now on returns at once
			}
		}
	}()
	return y
}

// Wait returns once the scheduler has polled the network: it wakes the
// writer, which runs after this goroutine parks on the empty socket, and
// the byte it writes is found at the next poll, with every socket that
// became readable meanwhile. A byte of an earlier wait that ended at its
// deadline is read past.
func (y *PollWait) Wait() {
	if y == nil {
		return
	}
	y.seq++
	y.kick <- y.seq
	y.r.SetReadDeadline(time.Now().Add(pollWaitMax))
	for {
		n, err := y.r.Read(y.buf[:])
		if n > 0 && y.buf[n-1] == y.seq || err != nil {
			return
		}
	}
}

// Close releases the socket pair and the writer.
func (y *PollWait) Close() {
	if y == nil {
		return
	}
	close(y.kick)
	y.r.Close()
	y.w.Close()
}
