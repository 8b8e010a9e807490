package supervise

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/rehearse/rehearse/internal/secret"
)

// MinSecretLen is the shortest secret scrubbed from a server log (see
// secret.MinLen).
const MinSecretLen = secret.MinLen

// scrubber replaces every occurrence of its secrets in a byte stream with
// secret.Redacted (finding them with a secret.Matcher, as records' text is
// scrubbed), holding back a tail that could be the start of one until
// the next bytes say whether it is: a secret split across two writes is
// still caught. One more pattern, the barrier, stands for a marker line:
// rehearse writes it into the server's output pipe, so the line lands in
// the log where the pipe then was. Barriers are cut out of the server's
// bytes before secrets are looked for, so a secret the server wrote in two
// pieces with a barrier between them is still one secret; its marker line
// then follows the redaction instead of splitting it.
type scrubber struct {
	m       *secret.Matcher // the secrets and the barrier
	barrier []byte
	held    []byte
	// marks are the offsets in held where barriers were cut out.
	marks []int
}

func newScrubber(secrets []string, barrier []byte) *scrubber {
	return &scrubber{m: secret.NewMatcher(append(secret.Values(secrets), string(barrier))), barrier: barrier}
}

// scrub appends to dst what of p (after the bytes held back before) can be
// written now, secrets replaced; where a barrier was, it appends marker().
func (s *scrubber) scrub(dst, p []byte, marker func() []byte) []byte {
	buf, marks := s.cut(append(s.held, p...), s.marks)
	dst, n, rest := s.scan(dst, buf, marks, marker, false)
	s.held = append([]byte(nil), buf[n:]...)
	s.marks = s.marks[:0]
	for _, m := range rest {
		s.marks = append(s.marks, m-n)
	}
	return dst
}

// flush appends the bytes held back at the end of the stream, secrets
// replaced, and the markers among them; a tail that is the start of a
// secret, MinSecretLen bytes or more of it, is redacted too.
func (s *scrubber) flush(dst []byte, marker func() []byte) []byte {
	dst, _, _ = s.scan(dst, s.held, s.marks, marker, true)
	s.held, s.marks = nil, nil
	return dst
}

// cut removes every whole barrier from buf and returns what is left, with
// the offsets (in what is left, ascending, after marks) where they were.
func (s *scrubber) cut(buf []byte, marks []int) ([]byte, []int) {
	barrier := s.barrier
	out := buf[:0:0]
	for {
		i := bytes.Index(buf, barrier)
		if i < 0 {
			break
		}
		out = append(out, buf[:i]...)
		marks = append(marks, len(out))
		buf = buf[i+len(barrier):]
	}
	if len(out) == 0 {
		return buf, marks
	}
	return append(out, buf...), marks
}

// scan appends buf to dst with its secrets replaced, up to the first byte
// that may begin a pattern the bytes after buf would complete (a longer one
// than what already matches included), and returns how far it got and the
// marks beyond that. A mark is written where it was, or just after the
// secret it fell inside. At the end of the stream (final) nothing is held
// back.
func (s *scrubber) scan(dst, buf []byte, marks []int, marker func() []byte, final bool) ([]byte, int, []int) {
	start, i := 0, 0
	// A barrier begun at the very end hides what comes after it: the bytes
	// before it may be a secret's start that the bytes after the barrier
	// complete, so they are held back as a secret's start at the end is.
	open := len(buf)
	if !final {
		open -= s.barrierTail(buf)
	}
	emit := func() {
		for len(marks) > 0 && marks[0] <= i {
			dst = append(dst, buf[start:i]...)
			start = i
			dst = append(dst, marker()...)
			marks = marks[1:]
		}
	}
	for i < len(buf) {
		emit()
		if !s.m.Starts(buf[i]) {
			i++
			continue
		}
		k, n := s.m.Match(buf[i:])
		if !final && (s.m.MayStart(buf[i:], n) || (i < open && open < len(buf) && s.m.MayStart(buf[i:open], n))) {
			break
		}
		if n == 0 && final && len(buf)-i >= MinSecretLen && s.m.MayStart(buf[i:], 0) {
			k, n = -1, len(buf)-i
		}
		if n == 0 || (k >= 0 && s.m.Pattern(k) == string(s.barrier)) {
			// A barrier here is the start of one a later read completes
			// only at the end of the stream: it is the server's bytes.
			i++
			continue
		}
		dst = append(dst, buf[start:i]...)
		dst = append(dst, secret.Redacted...)
		i += n
		start = i
	}
	if final || i == len(buf) {
		emit()
	}
	return append(dst, buf[start:i]...), i, marks
}

// barrierTail is the length of the longest end of buf that is the start,
// not the whole, of the barrier.
func (s *scrubber) barrierTail(buf []byte) int {
	barrier := s.barrier
	for n := min(len(buf), len(barrier)-1); n > 0; n-- {
		if bytes.HasPrefix(barrier, buf[len(buf)-n:]) {
			return n
		}
	}
	return 0
}

// serverLog is a server's log file and the pipe its output comes through:
// the server's bytes are scrubbed of secrets on their way in, and rehearse's
// marker lines keep their place among them.
type serverLog struct {
	f *os.File
	// r is the output pipe's read end; w is rehearse's own write end, for
	// barriers, open until the keeper has exited.
	r, w *os.File

	barrier []byte
	scrub   *scrubber
	copied  chan struct{}

	// wmu orders barrier writes as their lines are queued.
	wmu sync.Mutex
	mu  sync.Mutex
	// pending are the marker lines whose barriers are in the pipe, in order.
	pending [][]byte
	// direct is true once the copier has ended: marker lines are then
	// written to the file at once.
	direct bool
}

// outputPipeSize is asked of the kernel for the output pipe, so that a
// chatty server does not wait on rehearse to read.
const outputPipeSize = 1 << 20

const fSetPipeSz = 1031 // F_SETPIPE_SZ

func newServerLog(f *os.File, secrets []string) (*serverLog, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	if rc, err := w.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) { _, _, _ = syscall.Syscall(syscall.SYS_FCNTL, fd, fSetPipeSz, outputPipeSize) })
	}
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	barrier := []byte("\x00rehearse-marker-" + hex.EncodeToString(nonce) + "\x00")
	l := &serverLog{f: f, r: r, w: w, barrier: barrier, scrub: newScrubber(secrets, barrier), copied: make(chan struct{})}
	go l.copy()
	return l, nil
}

// copy runs until the output pipe's end of file: every process that held
// it has exited or closed it.
func (l *serverLog) copy() {
	defer close(l.copied)
	buf := make([]byte, 64<<10)
	var out []byte
	for {
		n, err := l.r.Read(buf)
		if n > 0 {
			out = l.scrub.scrub(out[:0], buf[:n], l.nextMarker)
			l.write(out)
		}
		if err != nil {
			break
		}
	}
	l.write(l.scrub.flush(out[:0], l.nextMarker))
	l.r.Close()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.direct = true
	for _, m := range l.pending {
		_, _ = l.f.Write(m)
	}
	l.pending = nil
}

func (l *serverLog) nextMarker() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.pending) == 0 {
		return nil
	}
	m := l.pending[0]
	l.pending = l.pending[1:]
	return m
}

func (l *serverLog) write(b []byte) {
	if len(b) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	// A failed write surfaces as a short log; the server must not wait.
	_, _ = l.f.Write(b)
}

// mark adds a marker line at the point the server's output has reached:
// through a barrier in the pipe while rehearse's write end is open, after
// the rest of the output once it is closed, at once once the copier ended.
func (l *serverLog) mark(line string) {
	b := []byte(line)
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.mu.Lock()
	if l.direct {
		_, _ = l.f.Write(b)
		l.mu.Unlock()
		return
	}
	l.pending = append(l.pending, b)
	w := l.w
	l.mu.Unlock()
	if w != nil {
		// The copier reads until w is closed, so this write cannot fail
		// for want of a reader; it waits only while the pipe is full.
		_, _ = w.Write(l.barrier)
	}
}

// closeWriter closes rehearse's write end: the pipe ends once the server's
// processes have gone.
func (l *serverLog) closeWriter() {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.mu.Lock()
	w := l.w
	l.w = nil
	l.mu.Unlock()
	if w != nil {
		w.Close()
	}
}

// finish waits for the copier to reach the end of the pipe (up to wait:
// a process that escaped the keeper may hold it open) and closes the file.
func (l *serverLog) finish(wait time.Duration) {
	l.closeWriter()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-l.copied:
	case <-t.C:
		l.r.Close()
		<-l.copied
	}
}
