package stream

import (
	"fmt"
	"net"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// A minimal io_uring for the read model: one ring, multishot receives
// into a provided-buffer ring, completions harvested from shared memory.

const (
	sysIoUringSetup    = 425
	sysIoUringEnter    = 426
	sysIoUringRegister = 427

	setupCQSize       = 1 << 3
	setupCoopTaskrun  = 1 << 8
	setupSingleIssuer = 1 << 12
	setupDeferTaskrun = 1 << 13

	enterGetEvents = 1
	registerPbuf   = 22
	opRecv         = 27
	sqeBufSelect   = 1 << 5
	recvMultishot  = 1 << 1
	cqeFBuffer     = 1
	cqeFMore       = 2
)

type uringParams struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
	resv                                                                   [3]uint32
	sqHead, sqTail, sqMask, sqEntriesOff, sqFlags, sqDropped, sqArray, _   uint32
	_                                                                      uint64
	cqHead, cqTail, cqMask, cqEntriesOff, cqOverflow, cqCqes, cqFlags, _   uint32
	_                                                                      uint64
}

type uringSQE struct {
	opcode   uint8
	flags    uint8
	ioprio   uint16
	fd       int32
	off      uint64
	addr     uint64
	len      uint32
	opFlags  uint32
	userData uint64
	bufGroup uint16
	_        uint16
	_        uint32
	_        [2]uint64
}

type uringCQE struct {
	userData uint64
	res      int32
	flags    uint32
}

type uringBuf struct {
	addr uint64
	len  uint32
	bid  uint16
	tail uint16 // only the first entry's: the ring's tail
}

type uringBufReg struct {
	ringAddr    uint64
	ringEntries uint32
	bgid        uint16
	flags       uint16
	_           [3]uint64
}

type modelRing struct {
	fd                    int
	sqHead, sqTail        *uint32
	sqMask                uint32
	sqArray               []uint32
	sqes                  []uringSQE
	cqHead, cqTail        *uint32
	cqMask                uint32
	cqes                  []uringCQE
	bufs                  []uringBuf
	bufMem                []byte
	bufSize, bufTail      int
	pending               uint32
	ringMem, sqeMem, bMem []byte
}

func newModelRing(entries uint32, nbufs, bufSize int) (*modelRing, error) {
	p := uringParams{flags: setupCQSize | setupSingleIssuer | setupDeferTaskrun, cqEntries: entries * 4}
	fd, _, e := syscall.Syscall(sysIoUringSetup, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	if e != 0 {
		return nil, e
	}
	r := &modelRing{fd: int(fd), bufSize: bufSize}
	size := max(p.sqArray+p.sqEntries*4, p.cqCqes+p.cqEntries*16)
	mem, err := syscall.Mmap(r.fd, 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED|syscall.MAP_POPULATE)
	if err != nil {
		return nil, err
	}
	r.ringMem = mem
	base := unsafe.Pointer(&mem[0])
	r.sqHead = (*uint32)(unsafe.Add(base, p.sqHead))
	r.sqTail = (*uint32)(unsafe.Add(base, p.sqTail))
	r.sqMask = *(*uint32)(unsafe.Add(base, p.sqMask))
	r.sqArray = unsafe.Slice((*uint32)(unsafe.Add(base, p.sqArray)), p.sqEntries)
	r.cqHead = (*uint32)(unsafe.Add(base, p.cqHead))
	r.cqTail = (*uint32)(unsafe.Add(base, p.cqTail))
	r.cqMask = *(*uint32)(unsafe.Add(base, p.cqMask))
	r.cqes = unsafe.Slice((*uringCQE)(unsafe.Add(base, p.cqCqes)), p.cqEntries)
	sm, err := syscall.Mmap(r.fd, 0x10000000, int(p.sqEntries)*64, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED|syscall.MAP_POPULATE)
	if err != nil {
		return nil, err
	}
	r.sqeMem = sm
	r.sqes = unsafe.Slice((*uringSQE)(unsafe.Pointer(&sm[0])), p.sqEntries)
	bm, err := syscall.Mmap(-1, 0, nbufs*16, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS)
	if err != nil {
		return nil, err
	}
	r.bMem = bm
	r.bufs = unsafe.Slice((*uringBuf)(unsafe.Pointer(&bm[0])), nbufs)
	r.bufMem = make([]byte, nbufs*bufSize)
	reg := uringBufReg{ringAddr: uint64(uintptr(unsafe.Pointer(&bm[0]))), ringEntries: uint32(nbufs)}
	if _, _, e := syscall.Syscall6(sysIoUringRegister, fd, registerPbuf, uintptr(unsafe.Pointer(&reg)), 1, 0, 0); e != 0 {
		return nil, fmt.Errorf("register: %w", e)
	}
	for i := range nbufs {
		r.giveBuf(uint16(i))
	}
	r.publishBufs()
	return r, nil
}

func (r *modelRing) giveBuf(bid uint16) {
	e := &r.bufs[r.bufTail&(len(r.bufs)-1)]
	e.addr = uint64(uintptr(unsafe.Pointer(&r.bufMem[int(bid)*r.bufSize])))
	e.len = uint32(r.bufSize)
	e.bid = bid
	r.bufTail++
}

func (r *modelRing) publishBufs() {
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&r.bufs[0].bid)), uint32(r.bufTail)<<16|uint32(r.bufs[0].bid))
}

func (r *modelRing) recv(fd int, tag uint64) {
	tail := *r.sqTail
	i := tail & r.sqMask
	r.sqes[i] = uringSQE{opcode: opRecv, flags: sqeBufSelect, ioprio: recvMultishot, fd: int32(fd), userData: tag}
	r.sqArray[i] = i
	atomic.StoreUint32(r.sqTail, tail+1)
	r.pending++
}

func (r *modelRing) enter(wait uint32) error {
	_, _, e := syscall.Syscall6(sysIoUringEnter, uintptr(r.fd), uintptr(r.pending), uintptr(wait), enterGetEvents, 0, 0)
	r.pending = 0
	if e != 0 && e != syscall.EINTR && e != syscall.ETIME {
		return e
	}
	return nil
}

func (r *modelRing) close() {
	syscall.Munmap(r.ringMem)
	syscall.Munmap(r.sqeMem)
	syscall.Close(r.fd)
	syscall.Munmap(r.bMem)
}

func benchReadModelUring(b *testing.B, client []net.Conn, drive func(*testing.B, *atomic.Int64)) {
	var fds []int
	for _, c := range client {
		f, err := c.(*net.TCPConn).File()
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		c.Close()
		fds = append(fds, int(f.Fd()))
	}
	var read atomic.Int64
	var stop atomic.Bool
	ready := make(chan error, 1)
	done := make(chan error, 1)
	go func() {
		// A single-issuer ring is entered only by the thread that made it.
		runtime.LockOSThread()
		r, err := newModelRing(4096, 4096, 2048)
		ready <- err
		if err != nil {
			return
		}
		defer r.close()
		for i, fd := range fds {
			r.recv(fd, uint64(i))
		}
		for !stop.Load() {
			if err := r.enter(1); err != nil {
				done <- err
				return
			}
			head := *r.cqHead
			tail := atomic.LoadUint32(r.cqTail)
			for ; head != tail; head++ {
				c := r.cqes[head&r.cqMask]
				_ = time.Now()
				if c.res > 0 {
					read.Add(int64(c.res))
				}
				if c.flags&cqeFBuffer != 0 {
					r.giveBuf(uint16(c.flags >> 16))
				}
				if c.flags&cqeFMore == 0 && c.res > 0 {
					r.recv(fds[c.userData], c.userData)
				}
			}
			r.publishBufs()
			atomic.StoreUint32(r.cqHead, head)
		}
		done <- nil
	}()
	if err := <-ready; err != nil {
		b.Skip("io_uring:", err)
	}
	drive(b, &read)
	stop.Store(true)
	for _, fd := range fds {
		syscall.Shutdown(fd, syscall.SHUT_RDWR)
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}
