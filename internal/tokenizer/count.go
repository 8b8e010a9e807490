package tokenizer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// CountOptions says what WriteCounts reads and writes.
type CountOptions struct {
	// Name is the input's name in errors ("stdin").
	Name string
	// JSONL reads one {"text": ...} object a line and writes one
	// {"count": N, "ids": [...]} a line, in order; else the whole input
	// is one text, and its count is written on a line.
	JSONL bool
	// IDs writes the text's ids too, as a JSON list on the next line
	// (JSON Lines always carry them).
	IDs bool
}

// LineError is a line of JSON Lines input that holds no {"text": ...}:
// bad input, with which a command exits 2.
type LineError struct {
	Name string // the input's (CountOptions.Name)
	Line int    // from 1
	Err  error  // what is wrong with it
}

// Error names the input and the line: "stdin:3: no \"text\" field".
func (e *LineError) Error() string { return fmt.Sprintf("%s:%d: %v", e.Name, e.Line, e.Err) }

// Unwrap is what is wrong with the line.
func (e *LineError) Unwrap() error { return e.Err }

// WriteCounts counts the tokens of the text in (no special tokens added)
// and writes the counts to out, as o says. What was counted before a bad
// line is written; the bad line is a *LineError.
func (t *Tokenizer) WriteCounts(in io.Reader, out io.Writer, o CountOptions) error {
	w := bufio.NewWriter(out)
	var err error
	if o.JSONL {
		err = t.countJSONL(in, w, o.Name)
	} else {
		err = t.countText(in, w, o.Name, o.IDs)
	}
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	return err
}

func (t *Tokenizer) countText(in io.Reader, w *bufio.Writer, name string, withIDs bool) error {
	text, err := io.ReadAll(in)
	if err != nil {
		return fmt.Errorf("%s: %v", name, err)
	}
	ids := t.Encode(string(text))
	fmt.Fprintln(w, len(ids))
	if withIDs {
		w.Write(appendIDs(nil, ids))
		w.WriteByte('\n')
	}
	return nil
}

// countJSONL reads one {"text": ...} object per line and writes one
// {"count": N, "ids": [...]} per line, in order.
func (t *Tokenizer) countJSONL(in io.Reader, w *bufio.Writer, name string) error {
	r := bufio.NewReaderSize(in, 1<<16)
	var ids []int
	var out []byte
	for line := 1; ; line++ {
		b, err := r.ReadBytes('\n')
		if len(b) == 0 && errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("%s: %v", name, err)
		}
		text, lerr := jsonlText(b)
		if lerr != nil {
			return &LineError{Name: name, Line: line, Err: lerr}
		}
		ids = t.AppendEncode(ids[:0], text)
		out = append(out[:0], `{"count":`...)
		out = strconv.AppendInt(out, int64(len(ids)), 10)
		out = append(out, `,"ids":`...)
		out = appendIDs(out, ids)
		out = append(out, "}\n"...)
		if _, werr := w.Write(out); werr != nil {
			return werr
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
	}
}

// jsonlText is the text of a JSON Lines line {"text": ...}.
func jsonlText(b []byte) (string, error) {
	var rec struct {
		Text *string `json:"text"`
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return "", errors.New(`empty line, want {"text": ...}`)
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return "", err
	}
	if rec.Text == nil {
		return "", errors.New(`no "text" field`)
	}
	return *rec.Text, nil
}

func appendIDs(dst []byte, ids []int) []byte {
	dst = append(dst, '[')
	for i, id := range ids {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(dst, int64(id), 10)
	}
	return append(dst, ']')
}
