package bundle_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/bundle/bundletest"
	"github.com/rehearse/rehearse/internal/contract"
)

// fullFile writes its first room bytes to f and fails every write after
// with ENOSPC, as a file on a disk that fills does.
type fullFile struct {
	f    *os.File
	room int
}

func (w *fullFile) Write(p []byte) (int, error) {
	n := min(len(p), w.room)
	n, _ = w.f.Write(p[:n])
	w.room -= n
	if n < len(p) {
		return n, &os.PathError{Op: "write", Path: w.f.Name(), Err: syscall.ENOSPC}
	}
	return n, nil
}
func (w *fullFile) Sync() error  { return w.f.Sync() }
func (w *fullFile) Close() error { return w.f.Close() }

// Issue 28 row 1: the journal's first write error is told once (OnFail),
// names the journal and the system's error, and is what every later write
// and Close return, without writing; what was written before it reads
// back, the torn line dropped.
func TestJournalKeepsItsFirstWriteError(t *testing.T) {
	path := filepath.Join(t.TempDir(), bundle.JournalFile)
	j, err := bundle.CreateJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	res := bundletest.SeedLike()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Room for the header, a wave and two records, and part of a line.
	room := 0
	for _, line := range journalLines(t, res, 4) {
		room += len(line)
	}
	bundle.SetJournalFile(j, &fullFile{f: f, room: room + 20})
	var told []error
	j.OnFail(func(err error) { told = append(told, err) })
	var errs []error
	wave, records := bigWave(res)
	errs = append(errs, j.WriteHeader(res), j.WriteWave(wave))
	for _, r := range records[:5] {
		errs = append(errs, j.WriteRecord(r))
	}
	errs = append(errs, j.Close())
	if len(told) != 1 {
		t.Fatalf("OnFail told %d times, want once: %v", len(told), told)
	}
	var we *bundle.WriteError
	if !errors.As(told[0], &we) || we.Path != path || !errors.Is(told[0], syscall.ENOSPC) ||
		told[0].Error() != path+": write failed: "+syscall.ENOSPC.Error() {
		t.Errorf("told %v, want a WriteError naming %s and ENOSPC", told[0], path)
	}
	for i, err := range errs {
		if want := i >= 4; (err != nil) != want || (want && err != told[0]) {
			t.Errorf("call %d returned %v; want nil before the 5th write, the first error from it on", i, err)
		}
	}
	back, err := bundle.ReadJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Records) != 2 || !strings.Contains(strings.Join(back.Notes, "\n"), "torn") {
		t.Errorf("read back %d records, notes %q; want the 2 written whole, the torn line dropped", len(back.Records), back.Notes)
	}
}

// bigWave is res's wave with the most records, and its records.
func bigWave(res *bundle.Results) (contract.Wave, []contract.Record) {
	byWave := bundle.RecordsByWave(res.Records)
	w := res.Waves[0]
	for _, c := range res.Waves {
		if len(byWave[c.ID]) > len(byWave[w.ID]) {
			w = c
		}
	}
	return w, byWave[w.ID]
}

// journalLines are the first n lines a journal of res holds: its header,
// its largest wave, then that wave's records.
func journalLines(t *testing.T, res *bundle.Results, n int) []string {
	t.Helper()
	path := filepath.Join(t.TempDir(), bundle.JournalFile)
	j, err := bundle.CreateJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	wave, records := bigWave(res)
	j.WriteHeader(res)
	j.WriteWave(wave)
	for _, r := range records[:n-2] {
		j.WriteRecord(r)
	}
	j.Close()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.SplitAfter(string(data), "\n")[:n]
}
