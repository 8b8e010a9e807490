package workload

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// Bounds on what a source reads or builds, so that a typing slip or a
// hostile file is refused in one line, naming the file, line, field and
// value, before anything is allocated for it, rather than building
// gigabytes of prompts.
const (
	// MaxSourceTokens bounds one length a source reads or is given where
	// no max_model_len is known (with one, that is the bound): a prompt's
	// input tokens (a trace line's, a synthetic draw's, prefix_len,
	// suffix_len) and a request's output tokens. 2^20 = 1,048,576 is the
	// longest context served models offer (Qwen2.5-1M, Llama 4 Maverick);
	// an exact prompt of that length takes about 30 MB to build.
	MaxSourceTokens = 1 << 20
	// MaxSourcePrompts bounds the prompts one source builds.
	MaxSourcePrompts = 1_000_000
	// MaxSourceTotalTokens bounds the tokens of all the prompts a source
	// builds together.
	MaxSourceTotalTokens = 100_000_000
	// MaxLineBytes bounds one line of a trace or dataset file (one entry
	// of a ShareGPT list): 64 MiB holds a conversation of MaxSourceTokens
	// tokens even where JSON escapes every character (\uXXXX, 6 bytes, at
	// about 4 characters a token is 24 MiB), and a Mooncake or Azure line
	// is under 100 bytes plus its hash ids. A longer line is refused when
	// its 64 MiB have been read, not held whole.
	MaxLineBytes = 64 << 20
)

// tokenBound bounds one length a source reads: the servers' max_model_len
// where one is known, else MaxSourceTokens.
type tokenBound struct {
	max      int
	modelLen bool // max is a max_model_len
}

// tokenBound is the bound of e's lengths.
func (e Env) tokenBound() tokenBound {
	if e.MaxModelLen > 0 {
		return tokenBound{max: e.MaxModelLen, modelLen: true}
	}
	return tokenBound{max: MaxSourceTokens}
}

// check says why n tokens of field are too many, or nil.
func (b tokenBound) check(field string, n int) error {
	switch {
	case n <= b.max:
		return nil
	case b.modelLen:
		return fmt.Errorf("%s: %d: over max_model_len %d", field, n, b.max)
	}
	return fmt.Errorf("%s: %d: more than %d tokens, the most one length may be where no max_model_len is known", field, n, b.max)
}

// checkSum says why an input of in tokens asking for out more is too long
// for a known max_model_len, or nil (without one, each is checked alone).
func (b tokenBound) checkSum(inField string, in int, outField string, out int) error {
	if !b.modelLen || in+out <= b.max {
		return nil
	}
	return fmt.Errorf("%s %d + %s %d = %d tokens: over max_model_len %d", inField, in, outField, out, in+out, b.max)
}

// LineTooLongError is a line (or a ShareGPT entry) of more than Max bytes.
type LineTooLongError struct {
	// Line is its 1-based line number (0 where a ShareGPT entry is meant).
	Line int
	Max  int
}

func (e *LineTooLongError) Error() string {
	what := "line"
	if e.Line == 0 {
		what = "entry"
	}
	return fmt.Sprintf("the %s is longer than %s, the most one %s of a trace or dataset may take", what, byteSize(e.Max), what)
}

// byteSize writes n bytes as MiB where it is a whole number of them.
func byteSize(n int) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// lineReader reads a file a line at a time, refusing a line of more than
// max bytes once max bytes of it are held, so memory stays within about
// max whatever the file holds.
type lineReader struct {
	r   *bufio.Reader
	max int
	buf []byte
	// no is the 1-based number of the line next returned.
	no int
}

func newLineReader(r io.Reader, max int) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// next returns the next line without its "\n" or "\r\n", valid until the
// next call, and its 1-based number; io.EOF after the last.
func (l *lineReader) next() ([]byte, int, error) {
	l.buf = l.buf[:0]
	l.no++
	for {
		chunk, err := l.r.ReadSlice('\n')
		body := chunk
		if err == nil { // the line's end: "\n" or "\r\n", not counted
			body = bytes.TrimSuffix(bytes.TrimSuffix(body, []byte("\n")), []byte("\r"))
		}
		if len(l.buf)+len(body) > l.max {
			return nil, l.no, &LineTooLongError{Line: l.no, Max: l.max}
		}
		if need := len(l.buf) + len(chunk); need > cap(l.buf) {
			// Doubling, as bufio.Scanner does, and never past what max holds.
			grown := make([]byte, len(l.buf), min(max(2*cap(l.buf), need), l.max+2))
			copy(grown, l.buf)
			l.buf = grown
		}
		l.buf = append(l.buf, chunk...)
		switch {
		case err == nil:
			return bytes.TrimSuffix(bytes.TrimSuffix(l.buf, []byte("\n")), []byte("\r")), l.no, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF && len(l.buf) > 0:
			return bytes.TrimSuffix(l.buf, []byte("\r")), l.no, nil
		}
		return nil, l.no, err
	}
}

// boundedLines passes r through and fails once a line runs past max bytes,
// for readers (encoding/csv) that hold a whole line themselves.
type boundedLines struct {
	r   io.Reader
	max int
	run int  // bytes of the current line so far
	cr  bool // its last byte is "\r"
	no  int  // 1-based number of the current line
}

func newBoundedLines(r io.Reader, max int) *boundedLines {
	return &boundedLines{r: r, max: max, no: 1}
}

func (b *boundedLines) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	for rest := p[:n]; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			b.run += len(rest)
			b.cr = rest[len(rest)-1] == '\r'
			// A line not yet ended may hold one byte more: its "\r".
			if b.run > b.max+1 {
				return 0, &LineTooLongError{Line: b.no, Max: b.max}
			}
			break
		}
		// The line ends in "\n" or "\r\n", neither counted.
		b.run += i
		if (i > 0 && rest[i-1] == '\r') || (i == 0 && b.cr) {
			b.run--
		}
		if b.run > b.max {
			return 0, &LineTooLongError{Line: b.no, Max: b.max}
		}
		b.run, b.cr = 0, false
		b.no++
		rest = rest[i+1:]
	}
	return n, err
}

// entryBound lets a json.Decoder read at most max bytes past the offset
// given to from, so that one entry of a list is refused once it passes max
// rather than held whole.
type entryBound struct {
	r     io.Reader
	max   int64
	read  int64 // bytes read through it
	limit int64 // read may not pass it
}

// from starts an entry at the decoder's offset off.
func (b *entryBound) from(off int64) { b.limit = off + b.max }

func (b *entryBound) Read(p []byte) (int, error) {
	if b.read >= b.limit {
		return 0, &LineTooLongError{Max: int(b.max)}
	}
	if rem := b.limit - b.read; int64(len(p)) > rem {
		p = p[:rem]
	}
	n, err := b.r.Read(p)
	b.read += int64(n)
	return n, err
}
