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
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/rehearse/rehearse/internal/contract"
)

// Entry is one line of the journal. Exactly one field is set.
type Entry struct {
	// Header carries provenance, workload, servers and notes (no waves,
	// records or aggregates); a later header replaces an earlier one.
	Header *Results `json:"header,omitempty"`
	// Wave is written at release and again when the wave ends; the last
	// entry for an id wins.
	Wave      *contract.Wave   `json:"wave,omitempty"`
	Record    *contract.Record `json:"record,omitempty"`
	Mechanism *MechanismCheck  `json:"mechanism_check,omitempty"`
	// PromptsKept, on a header, says its workload's prompts (prompts,
	// prompt_max_tokens, prompt_messages) are those of the header before:
	// a header is journaled again on every note, and a dataset of 100,000
	// prompts is written once, not once a note.
	PromptsKept bool `json:"prompts_kept,omitempty"`
}

// Journal appends entries to a JSON Lines file, one write per entry, so a
// crash of the tool loses nothing that was written. Safe for concurrent use.
//
// The first write that fails (the disk full) is kept: every later write
// returns it without writing, so the journal holds whole lines up to the
// failure (the failing one may be torn; ReadJournal drops it), and the
// function given to OnFail hears of it once.
type Journal struct {
	mu   sync.Mutex
	f    journalFile
	path string
	err  error
	// onFail is told of the first write error (OnFail).
	onFail func(error)
	// prompts is the prompt list of the last header written, to tell a
	// header whose prompts are the same slice (see Entry.PromptsKept).
	prompts []string
}

// CreateJournal creates the journal at path. It is created, never opened:
// an existing file is refused (a journal is never written over), and so is
// a symbolic link, even a dangling one, which would have put the journal
// wherever it points.
func CreateJournal(path string) (*Journal, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND|openWriteFlags, 0o644)
	if err != nil {
		return nil, createError(path, err)
	}
	return &Journal{f: f, path: path}, nil
}

// journalFile is what the journal needs of its file; tests put a failing
// one in its place.
type journalFile interface {
	io.Writer
	Sync() error
	Close() error
}

// OnFail has f told of the journal's first write error (a *WriteError),
// once, from the goroutine whose write failed; a rehearsal cancels its run
// with it. Call it before the first write.
func (j *Journal) OnFail(f func(error)) {
	j.mu.Lock()
	j.onFail = f
	j.mu.Unlock()
}

// Err is the journal's first write error (a *WriteError), nil while every
// write has succeeded.
func (j *Journal) Err() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.err
}

// fail keeps err as the journal's first write error and tells onFail;
// j.mu is held, and is released while onFail runs.
func (j *Journal) fail(err error) error {
	if j.err != nil {
		return j.err
	}
	j.err = newWriteError(j.path, err)
	if f := j.onFail; f != nil {
		j.mu.Unlock()
		f(j.err)
		j.mu.Lock()
	}
	return j.err
}

// createError says why a file of a bundle could not be created.
func createError(path string, err error) error {
	if fi, lerr := os.Lstat(path); lerr == nil {
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(path)
			return fmt.Errorf("%s: a symbolic link (to %s); a bundle's files are created, never written through a link", path, target)
		}
		return fmt.Errorf("%s: exists; a journal is never written over", path)
	}
	return fmt.Errorf("%s: %s", path, unwrapPath(err))
}

// Path is the journal's file name.
func (j *Journal) Path() string { return j.path }

func (j *Journal) write(e Entry) error {
	line, err := json.Marshal(e)
	if err != nil {
		return err
	}
	line = append(line, '\n')
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err != nil {
		return j.err
	}
	if j.f == nil {
		return fmt.Errorf("%s: journal is closed", j.path)
	}
	if _, err := j.f.Write(line); err != nil {
		return j.fail(err)
	}
	return nil
}

// WriteHeader journals the rehearsal's header (waves, records and
// aggregates of h are not written).
func (j *Journal) WriteHeader(h *Results) error {
	c := *h
	c.Schema = Schema
	c.Waves, c.Records, c.Aggregates = nil, nil, nil
	j.mu.Lock()
	kept := j.prompts != nil && len(j.prompts) == len(c.Workload.Prompts) &&
		len(c.Workload.Prompts) > 0 && &j.prompts[0] == &c.Workload.Prompts[0]
	j.prompts = c.Workload.Prompts
	j.mu.Unlock()
	if kept {
		c.Workload.Prompts, c.Workload.PromptMaxTokens, c.Workload.PromptMessages, c.Workload.ArrivalsS = nil, nil, nil, nil
		c.Workload.Prompts, c.Workload.PromptMaxTokens, c.Workload.PromptMessages = nil, nil, nil
		c.Workload.Sessions = nil
	}
	return j.write(Entry{Header: &c, PromptsKept: kept})
}

// WriteWave journals a wave's state.
func (j *Journal) WriteWave(w contract.Wave) error { return j.write(Entry{Wave: &w}) }

// WriteRecord journals one finished request.
func (j *Journal) WriteRecord(r contract.Record) error { return j.write(Entry{Record: &r}) }

// WriteMechanismCheck journals the mechanism-check series.
func (j *Journal) WriteMechanismCheck(m MechanismCheck) error { return j.write(Entry{Mechanism: &m}) }

// Close syncs and closes the file. A failed sync or close is a write
// error (the disk full may surface only there), told as a write's is; the
// first write error, if one came before, is returned.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return j.err
	}
	err := j.f.Sync()
	if cerr := j.f.Close(); err == nil {
		err = cerr
	}
	j.f = nil
	if err != nil {
		return j.fail(err)
	}
	return j.err
}

// ReadJournal rebuilds results from a journal file. A torn last line (the
// tool died mid-write) is dropped with a note; any other bad line is an
// error naming the file and line. Aggregates are recomputed. The journal
// is read as any bundle file is: a regular file, never through a link,
// at most JournalLimit bytes.
func ReadJournal(path string) (*Results, error) {
	d, err := OpenDir(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.journal(context.Background(), filepath.Base(path))
}

// journal rebuilds results from the journal name inside d.
func (d *Dir) journal(ctx context.Context, name string) (*Results, error) {
	f, err := d.Open(ctx, name, JournalLimit)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := DecodeJournal(f)
	if err != nil {
		if IsInterrupted(ctx, err) {
			return nil, err
		}
		return nil, d.fail(name, err.Error(), err)
	}
	return r, nil
}

// ReadPart reads the results of a bundle directory: its results.json, or,
// in a bundle whose rehearsal stopped before writing one, its journal
// (fromJournal is then true).
func ReadPart(ctx context.Context, dir string) (res *Results, fromJournal bool, err error) {
	res, err = ReadResultsContext(ctx, dir)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return res, false, err
	}
	res, err = readJournalFor(ctx, dir, err)
	return res, err == nil, err
}

// readJournalFor rebuilds the results of dir, which has no results.json
// (missing is that error), from its journal; without a journal it is
// missing that is returned.
func readJournalFor(ctx context.Context, dir string, missing error) (*Results, error) {
	d, err := OpenDir(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	res, err := d.journal(ctx, JournalFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, missing
	}
	return res, err
}

// DecodeJournal rebuilds results from journal lines.
func DecodeJournal(in io.Reader) (*Results, error) {
	var records []contract.Record
	r, err := scanJournal(in, func(rec *contract.Record) error {
		records = append(records, *rec)
		return nil
	}, nil)
	if err != nil {
		return nil, err
	}
	r.Records = records
	FixWaveTimes(r)
	r.Recompute()
	return r, nil
}

// scanJournal reads journal lines, handing each record to onRecord as it
// is read (the record is not kept), and returns the header with the waves
// (those the journal never saw end marked cut) and notes; no records,
// wave times or aggregates.
//
// With rawRecord, a record line is not decoded: rawRecord gets its index
// among the records, the line (valid until rawRecord returns) and the
// record's sum as lineSum takes it from the line (taken on the decoding
// cores; ok false where the line is not of that form), and returns the
// record's wave, or an error that ends the scan.
func scanJournal(in io.Reader, onRecord func(*contract.Record) error, rawRecord func(n int, line []byte, sum recordSum, ok bool) (int, error)) (*Results, error) {
	js := &journalScan{
		br: bufio.NewReaderSize(in, readChunk), onRecord: onRecord, rawRecord: rawRecord,
		waves: map[int]contract.Wave{}, waveEntries: map[int]int{}, perWave: map[int]int{}, firstRecord: map[int]int{},
		texts: newInterner(),
	}
	// Lines are decoded on all cores and taken in order.
	if err := decodeRecycled(js.next, js.decode, js.use); err != nil {
		return nil, err
	}
	return js.results()
}

// journalScan is scanJournal's state as the lines go past.
type journalScan struct {
	br        *bufio.Reader
	long      []byte // a line longer than br's buffer, gathered
	onRecord  func(*contract.Record) error
	rawRecord func(n int, line []byte, sum recordSum, ok bool) (int, error)

	header    *Results
	waveOrder []int
	waves     map[int]contract.Wave
	// waveEntries counts each wave's entries: one at its release, one
	// at its end (see Entry.Wave).
	waveEntries map[int]int
	// perWave counts each wave's records, firstRecord the index of its
	// first.
	perWave, firstRecord map[int]int
	nRecords             int
	mechanism            *MechanismCheck
	notes                []string
	lineNumber           int
	texts                *interner
}

// journalLine is one line, decoded (or left raw) on a decoding core.
type journalLine struct {
	e     Entry
	derr  error
	raw   []byte // a record line left to rawRecord
	sum   recordSum
	sumOK bool // sum is raw's lineSum
	blank bool
	torn  bool // no final newline: the last write did not finish
}

// next is the next line; a torn last line comes back without its
// newline, then io.EOF.
func (js *journalScan) next() ([]byte, error) {
	l, err := js.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		// A line longer than the buffer: gather it whole.
		js.long = append(js.long[:0], l...)
		for err == bufio.ErrBufferFull {
			l, err = js.br.ReadSlice('\n')
			js.long = append(js.long, l...)
		}
		l = js.long
	}
	if len(l) == 0 {
		if err == nil {
			err = io.EOF
		}
		return nil, err
	}
	if err != nil && err != io.EOF {
		return nil, err
	}
	return l, nil
}

func (js *journalScan) decode(raw []byte, l *journalLine) {
	l.torn = raw[len(raw)-1] != '\n'
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 {
		l.blank = true
		return
	}
	if js.rawRecord != nil && !l.torn && bytes.HasPrefix(trimmed, recordPrefix) {
		l.raw = trimmed
		l.sum, l.sumOK = lineSum(trimmed)
		return
	}
	l.derr = json.Unmarshal(trimmed, &l.e)
}

// use takes the lines in order: errStop after a torn last line.
func (js *journalScan) use(l *journalLine) error {
	js.lineNumber++
	switch {
	case l.blank && l.torn:
		return errStop
	case l.blank:
		return nil
	case l.raw != nil:
		id, err := js.rawRecord(js.nRecords, l.raw, l.sum, l.sumOK)
		if err != nil {
			return err
		}
		js.countRecord(id)
		return nil
	case l.derr != nil && l.torn:
		js.notes = append(js.notes, fmt.Sprintf("journal line %d was torn (the tool stopped mid-write) and was dropped", js.lineNumber))
		return errStop
	case l.derr != nil:
		return fmt.Errorf("line %d: %v", js.lineNumber, l.derr)
	}
	if err := js.entry(&l.e); err != nil {
		return err
	}
	if l.torn {
		return errStop
	}
	return nil
}

// entry takes one decoded entry, which holds exactly one thing.
func (js *journalScan) entry(e *Entry) error {
	set := 0
	if e.Header != nil {
		set++
		if h := js.header; e.PromptsKept && h != nil {
			w := &e.Header.Workload
			w.Prompts, w.PromptMaxTokens, w.PromptMessages = h.Workload.Prompts, h.Workload.PromptMaxTokens, h.Workload.PromptMessages
			w.ArrivalsS = h.Workload.ArrivalsS
			w.Sessions = h.Workload.Sessions
		}
		js.header = e.Header
	}
	if e.Wave != nil {
		set++
		if _, ok := js.waves[e.Wave.ID]; !ok {
			js.waveOrder = append(js.waveOrder, e.Wave.ID)
		}
		js.waves[e.Wave.ID] = *e.Wave
		js.waveEntries[e.Wave.ID]++
	}
	if e.Record != nil {
		set++
		if e.Record.Server == "" || e.Record.Kind == "" {
			return fmt.Errorf("line %d: record without server or kind", js.lineNumber)
		}
	}
	if e.Mechanism != nil {
		set++
		js.mechanism = e.Mechanism
	}
	if set != 1 {
		return fmt.Errorf("line %d: an entry must hold exactly one of header, wave, record, mechanism_check", js.lineNumber)
	}
	if rec := e.Record; rec != nil {
		js.countRecord(rec.Wave)
		js.texts.record(rec)
		return js.onRecord(rec)
	}
	return nil
}

// countRecord counts a record of wave id.
func (js *journalScan) countRecord(id int) {
	if _, ok := js.perWave[id]; !ok {
		js.firstRecord[id] = js.nRecords
	}
	js.perWave[id]++
	js.nRecords++
}

// results is the header with the journal's waves, those it never saw end
// marked cut, and its notes.
func (js *journalScan) results() (*Results, error) {
	if js.header == nil {
		return nil, errors.New("no header entry")
	}
	unknown, at := -1, js.nRecords
	for id, i := range js.firstRecord {
		if _, ok := js.waves[id]; !ok && i < at {
			unknown, at = id, i
		}
	}
	if at < js.nRecords {
		return nil, fmt.Errorf("record %d names wave %d, which the journal never opened", at, unknown)
	}
	r := *js.header
	r.Schema = Schema
	var cut []string
	for _, id := range js.waveOrder {
		w := js.waves[id]
		if js.waveEntries[id] < 2 && w.Stopped == "" {
			w.Stopped = cutReason(w, js.perWave[id])
			cut = append(cut, fmt.Sprintf("wave %d (%s, %s, repeat %d)", w.ID, w.Server, contract.KeyOf(w).LoadLabel(), w.Repeat))
		}
		r.Waves = append(r.Waves, w)
	}
	if js.mechanism != nil {
		r.MechanismCheck = js.mechanism
	}
	if len(cut) > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("The journal ends before the end of %s: rehearse stopped or crashed during it, so it is marked stopped, and requests of it that had not ended are not in the records.", strings.Join(cut, ", ")))
	}
	r.Notes = append(r.Notes, js.notes...)
	return &r, nil
}

// recordPrefix begins every record line the journal writes.
var recordPrefix = []byte(`{"record":`)

const cutPrefix = "cut:"

// IsCut reports whether w was marked stopped by DecodeJournal because the
// journal ends before the wave's end.
func IsCut(w contract.Wave) bool { return strings.HasPrefix(w.Stopped, cutPrefix) }

// cutReason is the stopped field of a wave whose end the journal never
// got: like a wave stopped by Ctrl-C it is warned about wherever its
// figures appear, and it says how much of it the journal holds.
func cutReason(w contract.Wave, records int) string {
	const reason = cutPrefix + " the journal ends before this wave's end (rehearse stopped or crashed)"
	if !contract.IsClosed(w.Mode) {
		return fmt.Sprintf("%s; %d requests were journaled", reason, records)
	}
	return fmt.Sprintf("%s; %d of its %d requests were journaled", reason, records, w.Concurrency)
}

// FixWaveTimes sets each wave's wall_s (the largest end_s) and, for a closed
// wave (not a sustained or open one), its release spread from its records by the contract, for waves whose
// end was never journaled or whose records were cut short.
func FixWaveTimes(r *Results) { fixWaveTimesOf(r, waveClocks(r.Records)) }

// fixWaveTimesOf is FixWaveTimes with each wave's times from clocks.
func fixWaveTimesOf(r *Results, clocks map[int]*contract.WaveClock) {
	var none contract.WaveClock
	for i := range r.Waves {
		c := clocks[r.Waves[i].ID]
		if c == nil {
			c = &none
		}
		r.Waves[i].WallS = c.WallS()
		if contract.IsClosed(r.Waves[i].Mode) {
			r.Waves[i].ReleaseSpreadS = c.ReleaseSpreadS()
		}
	}
}

// RecordsByWave groups records by wave id: a wave whose records lie together
// (as a rehearsal journals them) is a sub-slice of records, not a copy.
func RecordsByWave(records []contract.Record) map[int][]contract.Record {
	byWave := map[int][]contract.Record{}
	copied := map[int]bool{}
	for i := 0; i < len(records); {
		id, j := records[i].Wave, i+1
		for j < len(records) && records[j].Wave == id {
			j++
		}
		if prev, ok := byWave[id]; !ok {
			byWave[id] = records[i:j:j]
		} else {
			if !copied[id] {
				prev = append([]contract.Record(nil), prev...)
				copied[id] = true
			}
			byWave[id] = append(prev, records[i:j]...)
		}
		i = j
	}
	return byWave
}
