package bundle

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/rehearse/rehearse/internal/contract"
)

// WriteError is a file that could not be written (the disk full, a size
// limit, an I/O error): its name and the system's error.
type WriteError struct {
	Path string
	Err  error
}

func (e *WriteError) Error() string { return e.Path + ": write failed: " + e.Err.Error() }
func (e *WriteError) Unwrap() error { return e.Err }

// newWriteError is the WriteError of path for err, without err's own
// naming of the file (a temporary one's, or path again).
func newWriteError(path string, err error) *WriteError {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return &WriteError{Path: path, Err: err}
}

// WriteFileAtomic writes data to path through a temporary file in the same
// folder and a rename, so a reader never sees a half-written file. The
// temporary file is created exclusively and the rename replaces the
// directory entry, so nothing is ever written through a symbolic link
// named path: the link itself is replaced. A failure of the file is a
// *WriteError naming path.
func WriteFileAtomic(path string, data []byte) error {
	return writeAtomic(path, nil, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// writeAtomic is WriteFileAtomic of what write writes, through a buffer.
// check, where not nil, vets path before the temporary file is created
// and again just before the rename; its error is returned as it is. An
// error of the file (creating, writing, syncing, renaming it) is a
// *WriteError naming path, whatever write made of it; write's own errors
// (an encoding's, an interruption) are returned as they are.
func writeAtomic(path string, check func(string) error, write func(io.Writer) error) error {
	if check != nil {
		if err := check(path); err != nil {
			return err
		}
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return newWriteError(path, err)
	}
	fw := &fileWriter{f: f}
	bw := bufio.NewWriterSize(fw, readChunk)
	werr := write(bw)
	if werr == nil {
		werr = bw.Flush()
	}
	if fw.err != nil {
		// The file's own failure, whatever write made of it.
		return discard(f, newWriteError(path, fw.err))
	}
	if werr != nil {
		return discard(f, werr)
	}
	if err := closeSynced(f); err != nil {
		return discard(f, newWriteError(path, err))
	}
	if check != nil {
		if err := check(path); err != nil {
			return discard(f, err)
		}
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return discard(f, newWriteError(path, err))
	}
	return nil
}

// fileWriter writes to f and keeps its first error, so that an error of
// the file is told apart from one of what was being written.
type fileWriter struct {
	f   *os.File
	err error
}

func (w *fileWriter) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	n, err := w.f.Write(p)
	w.err = err
	return n, err
}

// closeSynced makes f readable by all, syncs and closes it.
func closeSynced(f *os.File) error {
	err := f.Chmod(0o644)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// discard closes and removes the temporary file f, and returns err.
func discard(f *os.File, err error) error {
	f.Close()
	os.Remove(f.Name())
	return err
}

// recordsKey is how the empty records list of an encoded header reads.
const recordsKey = "\n \"records\": []"

// encodeTo writes results.json's bytes to w: indented JSON, nil slices as
// [], the records one at a time (a million records are gigabytes: their
// encoding is never held whole).
func encodeTo(w io.Writer, r *Results) error {
	return encodeRecords(w, r, len(r.Records) > 0, nil, func(yield func(*contract.Record) error) error {
		for i := range r.Records {
			if err := yield(&r.Records[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

// encodeRecords is encodeTo of r's header (its Records are not read) with
// the records records hands to yield, in order; some says whether it
// hands any (none: the header's empty list is written as it is). then,
// where not nil, runs once the records are handed (or, with none, before
// anything is written), and may set what follows them in results.json
// (aggregates, cost): what precedes them is written before.
func encodeRecords(w io.Writer, r *Results, some bool, then func() error, records func(yield func(*contract.Record) error) error) error {
	if !some && then != nil {
		if err := then(); err != nil {
			return err
		}
		then = nil
	}
	head := *r
	head.Records = nil
	data, err := encodeWhole(&head)
	if err != nil {
		return err
	}
	before, after, ok := strings.Cut(string(data), recordsKey)
	if !ok || !some {
		_, err := w.Write(data)
		return err
	}
	if _, err := io.WriteString(w, before+"\n \"records\": ["); err != nil {
		return err
	}
	// Each record is encoded compact and indented by appendIndented, the
	// bytes of an Encoder with SetIndent("  ", " ").
	var compact bytes.Buffer
	enc := json.NewEncoder(&compact)
	enc.SetEscapeHTML(false)
	var out []byte
	i := 0
	err = records(func(rec *contract.Record) error {
		if rec.ChunkTimesS == nil {
			c := *rec
			c.ChunkTimesS = []float64{}
			rec = &c
		}
		compact.Reset()
		if err := enc.Encode(rec); err != nil {
			return fmt.Errorf("records[%d]: %w", i, err)
		}
		out = out[:0]
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, "\n  "...)
		out = appendIndented(out, bytes.TrimSuffix(compact.Bytes(), []byte{'\n'}), "  ", " ")
		i++
		_, err := w.Write(out)
		return err
	})
	if err != nil {
		return err
	}
	if then != nil {
		if err := then(); err != nil {
			return err
		}
		head = *r
		head.Records = nil
		if data, err = encodeWhole(&head); err != nil {
			return err
		}
		_, after, _ = strings.Cut(string(data), recordsKey)
	}
	_, err = io.WriteString(w, "\n ]"+after)
	return err
}

// encodeWhole is encodeTo of results held whole.
func encodeWhole(r *Results) ([]byte, error) {
	c := *r
	c.Schema = Schema
	if c.Waves == nil {
		c.Waves = []contract.Wave{}
	}
	if c.Records == nil {
		c.Records = []contract.Record{}
	}
	if c.Aggregates == nil {
		c.Aggregates = []contract.Aggregate{}
	}
	if c.Notes == nil {
		c.Notes = []string{}
	}
	if c.Servers == nil {
		c.Servers = []Server{}
	}
	if c.Provenance.GPUs == nil {
		c.Provenance.GPUs = []GPU{}
	}
	for i := range c.Records {
		if c.Records[i].ChunkTimesS == nil {
			c.Records[i].ChunkTimesS = []float64{}
		}
	}
	if m := c.MechanismCheck; m != nil {
		// JSON has no NaN or ±Inf: name the value rather than fail with
		// encoding/json's "unsupported value".
		if m.Max != nil && !finite(*m.Max) {
			return nil, fmt.Errorf("mechanism_check.max: %v is not finite", *m.Max)
		}
		for i, p := range m.Series {
			if !finite(p[0]) || !finite(p[1]) {
				return nil, fmt.Errorf("mechanism_check.series[%d]: [%v, %v] is not finite", i, p[0], p[1])
			}
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&c); err != nil {
		return nil, err
	}
	// Indented by appendIndented, as the streamed records are (arrays of
	// numbers on one line).
	out := appendIndented(make([]byte, 0, buf.Len()*2), bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), "", " ")
	return append(out, '\n'), nil
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// WriteResults writes dir/results.json atomically.
func WriteResults(dir string, r *Results) error {
	path := filepath.Join(dir, ResultsFile)
	if r.lean {
		return fmt.Errorf("%s: not written: its records are lean (read for a report), not the records", path)
	}
	err := writeAtomic(path, nil, func(w io.Writer) error { return encodeTo(w, r) })
	var we *WriteError
	if err != nil && !errors.As(err, &we) {
		return fmt.Errorf("%s: %w", path, err)
	}
	return err
}

// ReadResults reads and decodes dir/results.json. Errors name the file and
// what is wrong with it.
func ReadResults(dir string) (*Results, error) {
	return ReadResultsContext(context.Background(), dir)
}

// ReadResultsContext is ReadResults stopping when ctx ends.
func ReadResultsContext(ctx context.Context, dir string) (*Results, error) {
	d, err := OpenDir(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.resultsLean(ctx, false)
}

// wholeLimit is the largest results.json read whole to name the line of
// what is wrong with it.
const wholeLimit = 1 << 30

// results reads and decodes results.json as it streams (decodeStream);
// every error is a *FileError naming it (or the interruption). A file the
// stream cannot take is read whole and decoded again, for decodeWhole's
// message naming the line.
func (d *Dir) results(ctx context.Context) (*Results, error) {
	return d.resultsLean(ctx, true)
}

// resultsLean is results, with the records' sums (for verify's journal
// comparison) only where sums.
func (d *Dir) resultsLean(ctx context.Context, sums bool) (*Results, error) {
	f, err := d.Open(ctx, ResultsFile, ResultsLimit)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, d.fail(ResultsFile, "missing (not a rehearse bundle?)", err)
		}
		return nil, err
	}
	decode := decodeStream
	if !sums {
		decode = decodeLean
	}
	r, err := decode(bufio.NewReaderSize(f, readChunk))
	f.Close()
	switch {
	case err == nil:
		return r, nil
	case IsInterrupted(ctx, err):
		return nil, err
	case !errors.Is(err, errMalformed):
		var invalid *InvalidError
		if errors.As(err, &invalid) {
			return nil, d.fail(ResultsFile, err.Error(), err)
		}
		return nil, d.readError(ctx, ResultsFile, err)
	}
	if f.Size() > wholeLimit {
		// Too big to hold whole for the line number: say what the stream met.
		return nil, d.fail(ResultsFile, "not a valid results.json ("+strings.TrimPrefix(err.Error(), errMalformed.Error()+": ")+")", err)
	}
	data, err := d.ReadFile(ctx, ResultsFile, Limit{ResultsLimit.Kind, wholeLimit})
	if err != nil {
		return nil, err
	}
	r, err = decodeWhole(data)
	if err != nil {
		return nil, d.fail(ResultsFile, err.Error(), err)
	}
	return r, nil
}

// decodeWhole parses results.json's bytes held whole (its errors name the
// line) and checks the schema, that every record and wave has every
// required field (a wave's id, where absent, is its index in waves), and
// that waves and records keep SPEC §2; results that break it come back
// with an *InvalidError that lists every problem. It reads a file the
// stream (decodeStream) cannot take, for a message naming the line.
func decodeWhole(data []byte) (*Results, error) {
	var head struct {
		Schema     *string           `json:"schema"`
		Records    []json.RawMessage `json:"records"`
		Waves      []json.RawMessage `json:"waves"`
		Aggregates []json.RawMessage `json:"aggregates"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, describeJSONError(data, err)
	}
	if head.Schema == nil {
		return nil, errors.New("no \"schema\" field")
	}
	if *head.Schema != Schema {
		return nil, fmt.Errorf("unknown schema %q (this rehearse reads %q)", *head.Schema, Schema)
	}
	for i, raw := range head.Records {
		if _, err := checkFields(raw, contract.RequiredRecordFields); err != nil {
			return nil, fmt.Errorf("records[%d]: %w", i, err)
		}
	}
	keys := &storedKeys{waves: make([]map[string]bool, len(head.Waves)), aggregates: make([]map[string]bool, len(head.Aggregates))}
	for i, raw := range head.Waves {
		m, err := checkFields(raw, requiredWaveFields)
		if err != nil {
			return nil, fmt.Errorf("waves[%d]: %w", i, err)
		}
		keys.waves[i] = keySet(m)
	}
	for i, raw := range head.Aggregates {
		m, err := checkFields(raw, nil)
		if err != nil {
			return nil, fmt.Errorf("aggregates[%d]: %w", i, err)
		}
		keys.aggregates[i] = aggregateKeys(m)
	}
	var r Results
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, describeJSONError(data, err)
	}
	for i := range r.Waves {
		if !keys.waves[i]["id"] {
			r.Waves[i].ID = i
		}
	}
	r.stored = keys
	if probs := checkRecords(&r); len(probs) > 0 {
		return nil, &InvalidError{Results: &r, Problems: probs}
	}
	return &r, nil
}

// requiredWaveFields are SPEC §4a's fields of a wave; id is optional.
var requiredWaveFields = []string{"server", "concurrency", "repeat", "kind", "started_at", "wall_s", "cold"}

// checkFields decodes a JSON object, or says which of the required keys it
// lacks.
func checkFields(raw json.RawMessage, required []string) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("not an object: %v", err)
	}
	var missing []string
	for _, f := range required {
		if _, ok := m[f]; !ok {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("missing field %s", strings.Join(missing, ", "))
	}
	return m, nil
}

// keySet is the set of an object's keys.
func keySet(m map[string]json.RawMessage) map[string]bool {
	keys := make(map[string]bool, len(m))
	for k := range m {
		keys[k] = true
	}
	return keys
}

// aggregateKeys is keySet of an aggregate, with "ttft_s.p99_ub" and the
// like for each key of an object it holds: a latency summary's fields
// beyond SPEC §4a's list are checked only where the summary carried them.
func aggregateKeys(m map[string]json.RawMessage) map[string]bool {
	keys := keySet(m)
	for k, raw := range m {
		if len(raw) == 0 || raw[0] != '{' {
			continue
		}
		var sub map[string]json.RawMessage
		if json.Unmarshal(raw, &sub) != nil {
			continue
		}
		for s := range sub {
			keys[k+"."+s] = true
		}
	}
	return keys
}

// describeJSONError turns a decoding error into a message with a line number.
func describeJSONError(data []byte, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		line := 1 + bytes.Count(data[:min(int(se.Offset), len(data))], []byte("\n"))
		if int(se.Offset) >= len(bytes.TrimRight(data, " \n\r\t")) {
			return fmt.Errorf("truncated JSON (ends at line %d)", line)
		}
		return fmt.Errorf("invalid JSON at line %d: %v", line, se)
	case errors.As(err, &te):
		line := 1 + bytes.Count(data[:min(int(te.Offset), len(data))], []byte("\n"))
		return fmt.Errorf("line %d: field %s: %v cannot hold a JSON %s", line, te.Field, te.Type, te.Value)
	case err.Error() == "unexpected end of JSON input":
		return errors.New("truncated JSON (unexpected end of input)")
	}
	return err
}

// regularFiles lists the regular files of a bundle relative to it, sorted,
// except the manifest itself and hidden files (Dir.Files). An entry that
// is not a regular file or a folder (a symbolic link, a FIFO) is an error
// naming it: a bundle holds nothing its manifest cannot cover.
func (d *Dir) regularFiles(ctx context.Context) ([]string, error) {
	files, bad, err := d.Files(ctx)
	switch {
	case err != nil:
		return nil, err
	case len(bad) == 1:
		return nil, bad[0]
	case len(bad) > 1:
		return nil, fmt.Errorf("%w (and %d more entries that are not regular files)", bad[0], len(bad)-1)
	}
	return files, nil
}
