package stream

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// readModelEnv makes the test binary BenchmarkReadModel's writer.
const readModelEnv = "REHEARSE_STREAM_READMODEL_WRITER"

// writeRounds is the writer of BenchmarkReadModel, a process of its own:
// it prints its address, accepts the connections, then for each byte read
// on stdin writes one chunk on every connection.
func writeRounds() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		os.Exit(1)
	}
	fmt.Println(ln.Addr().String())
	n, _ := strconv.Atoi(os.Getenv(readModelEnv + "_CONNS"))
	var conns []net.Conn
	for range n {
		c, err := ln.Accept()
		if err != nil {
			os.Exit(1)
		}
		conns = append(conns, c)
	}
	chunk := bytes.Repeat([]byte("x"), readModelChunk)
	cmd := make([]byte, 1)
	for {
		if _, err := os.Stdin.Read(cmd); err != nil {
			return
		}
		for _, c := range conns {
			c.Write(chunk)
		}
	}
}

const readModelChunk = 250

// BenchmarkReadModel measures, before anything is built on it, what the
// read side of a stream costs per chunk under four ways of waiting for many
// sockets: a goroutine per connection blocked in conn.Read (the client's
// way: Go's poller wakes one goroutine per arrival, whose read first finds
// nothing and parks); the same waiting for readiness before each read
// after one that drained the socket (no read that finds nothing; a model
// only: a close that came with the last bytes would never be seen); one
// goroutine over a level-triggered epoll set of all of them (every ready
// socket read in one pass); and io_uring (multishot receives into a
// provided-buffer ring, completions taken from shared memory: no system
// call per chunk at all). Rounds of one 250-byte chunk on each of 1,024 loopback
// connections, written by a child process, the next round once every
// chunk of the last was read: every stream idle between its chunks, as at
// a server's pace. The reading process's CPU per chunk (getrusage): each
// read stamped with time.Now, nothing parsed.
func BenchmarkReadModel(b *testing.B) {
	const conns = 1024
	setup := func(b *testing.B) (client []net.Conn, round func()) {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), readModelEnv+"=1", fmt.Sprintf("%s_CONNS=%d", readModelEnv, conns))
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { stdin.Close(); cmd.Wait() })
		addr, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil {
			b.Fatal(err)
		}
		for range conns {
			c, err := net.Dial("tcp", strings.TrimSpace(addr))
			if err != nil {
				b.Fatal(err)
			}
			client = append(client, c)
		}
		return client, func() { stdin.Write([]byte{1}) }
	}
	// drive writes rounds until b.N chunks were written, each round after
	// the last was read (read counts the bytes read).
	drive := func(b *testing.B, round func(), read *atomic.Int64) {
		cpu0 := cpuNow()
		b.ResetTimer()
		written := 0
		for written < b.N {
			round()
			written += conns
			for read.Load() < int64(written*readModelChunk) {
				time.Sleep(50 * time.Microsecond)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64((cpuNow()-cpu0).Nanoseconds())/float64(written), "cpu-ns/chunk")
	}
	// perConn runs readLoop in a goroutine per connection, each adding
	// the bytes it read to read, until its connection is closed.
	perConn := func(b *testing.B, readLoop func(c net.Conn, read *atomic.Int64)) {
		client, round := setup(b)
		var read atomic.Int64
		var wg sync.WaitGroup
		for _, c := range client {
			wg.Add(1)
			go func() {
				defer wg.Done()
				readLoop(c, &read)
			}()
		}
		drive(b, round, &read)
		for _, c := range client {
			c.Close()
		}
		wg.Wait()
	}
	b.Run("goroutine-per-conn", func(b *testing.B) {
		perConn(b, func(c net.Conn, read *atomic.Int64) {
			buf := make([]byte, 16<<10)
			for {
				n, err := c.Read(buf)
				if err != nil {
					return
				}
				_ = time.Now()
				read.Add(int64(n))
			}
		})
	})
	// The client's way again, but each read after one that drained the
	// socket waits for readiness first (syscall.RawConn.Read with a
	// callback that declines its first call): the read that would find
	// nothing is not made.
	b.Run("goroutine-wait-first", func(b *testing.B) {
		perConn(b, func(c net.Conn, read *atomic.Int64) {
			rc, err := c.(*net.TCPConn).SyscallConn()
			if err != nil {
				return
			}
			buf := make([]byte, 16<<10)
			var n int
			var rerr error
			skip := false
			f := func(fd uintptr) bool {
				if skip {
					skip = false
					return false
				}
				n, rerr = syscall.Read(int(fd), buf)
				return rerr != syscall.EAGAIN
			}
			for {
				if err := rc.Read(f); err != nil || rerr != nil || n <= 0 {
					return
				}
				_ = time.Now()
				read.Add(int64(n))
				skip = n < len(buf)
			}
		})
	})
	b.Run("io_uring", func(b *testing.B) {
		client, round := setup(b)
		benchReadModelUring(b, client, func(b *testing.B, read *atomic.Int64) { drive(b, round, read) })
	})
	b.Run("epoll", func(b *testing.B) {
		client, round := setup(b)
		ep, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
		if err != nil {
			b.Fatal(err)
		}
		defer syscall.Close(ep)
		for _, c := range client {
			f, err := c.(*net.TCPConn).File()
			if err != nil {
				b.Fatal(err)
			}
			c.Close()
			fd := int(f.Fd())
			syscall.SetNonblock(fd, true)
			defer f.Close()
			ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(fd)}
			if err := syscall.EpollCtl(ep, syscall.EPOLL_CTL_ADD, fd, &ev); err != nil {
				b.Fatal(err)
			}
		}
		var read atomic.Int64
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			events := make([]syscall.EpollEvent, 256)
			buf := make([]byte, 16<<10)
			for {
				select {
				case <-stop:
					return
				default:
				}
				n, err := syscall.EpollWait(ep, events, 10)
				if err != nil && err != syscall.EINTR {
					return
				}
				for _, ev := range events[:max(n, 0)] {
					m, _ := syscall.Read(int(ev.Fd), buf)
					_ = time.Now()
					if m > 0 {
						read.Add(int64(m))
					}
				}
			}
		}()
		drive(b, round, &read)
		close(stop)
		<-done
	})
}
