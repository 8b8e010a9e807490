//go:build unix

package cli

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/sim"
	"github.com/rehearse/rehearse/internal/sim/engine"
)

// Issue 28 row 1: a journal that can no longer be written (the disk full)
// stops the rehearsal at its first failed write, with one line naming
// journal.jsonl and the system's error, exit 1; what was journaled before
// it stays readable, and "rehearse report" rebuilds the bundle from it.
// rehearse runs as a child (this test binary as rehearse) under a file
// size limit, so the journal's write past it fails with EFBIG for real.
func TestBenchStopsAtTheJournalsFirstWriteError(t *testing.T) {
	s, err := sim.New(sim.Options{Engine: engine.Batching, TimeScale: 1000, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var completions atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/completions") {
			completions.Add(1)
		}
		s.Handler().ServeHTTP(w, r)
	}))
	defer srv.Close()

	const clients, repeats = 4, 40
	dir := filepath.Join(t.TempDir(), "b")
	code, stderr := rehearseUnderFileLimit(t, 32768, "bench", "--base-url", srv.URL, "--tokenizer", "usage",
		"--concurrency", "4", "--repeats", "40", "--warmup-waves", "0", "--max-tokens", "16", "-o", dir)
	journal := filepath.Join(dir, bundle.JournalFile)
	if code != 1 {
		t.Fatalf("exit %d, want 1\nstderr:\n%s", code, stderr)
	}
	if named := linesNamingBundleFiles(stderr); len(named) != 1 || !strings.Contains(named[0], journal+": write failed: file too large") {
		t.Errorf("stderr names the bundle's files in %d lines, want one naming %s and EFBIG:\n%s", len(named), journal, stderr)
	}
	// Stopped at once: the server saw far fewer requests than planned (at
	// most the waves up to the failure), not the whole plan.
	if n := completions.Load(); n >= clients*repeats {
		t.Errorf("the server got %d requests, the whole plan of %d: the rehearsal went on after the journal failed", n, clients*repeats)
	}
	res, err := bundle.ReadJournal(journal)
	if err != nil || len(res.Records) == 0 {
		t.Fatalf("the journal up to the failure is not readable: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, bundle.ResultsFile)); err == nil {
		t.Error("results.json was written after the journal failed")
	}
	code, _, errs := runMain(context.Background(), "report", dir)
	if code != 0 || !strings.Contains(errs, "rebuilt from journal.jsonl") {
		t.Errorf("report of the stopped bundle: exit %d, stderr %q", code, errs)
	}
	rebuilt, err := bundle.ReadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(rebuilt.Records) != len(res.Records) {
		t.Errorf("report rebuilt %d records, the journal holds %d", len(rebuilt.Records), len(res.Records))
	}
}

// The same for results.json: a limit that the journal fits in and
// results.json does not (sizes taken from the same bench run without it)
// is one line naming results.json, not its temporary file, exit 1; the
// journal is whole, and report writes results.json from it.
func TestBenchNamesResultsJSONsWriteError(t *testing.T) {
	s, err := sim.New(sim.Options{Engine: engine.Batching, TimeScale: 1000, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	args := func(dir string) []string {
		// Many loads of few short requests: results.json's aggregates make
		// it larger than the journal.
		return []string{"bench", "--base-url", srv.URL, "--tokenizer", "usage", "--concurrency", "1,2,3,4,5,6,7,8", "--repeats", "1", "--max-tokens", "2", "-o", dir}
	}
	free := filepath.Join(t.TempDir(), "free")
	if code, _, errs := runMain(context.Background(), args(free)...); code != 0 {
		t.Fatalf("without a limit: exit %d: %s", code, errs)
	}
	journalSize, resultsSize := fileSize(t, filepath.Join(free, bundle.JournalFile)), fileSize(t, filepath.Join(free, bundle.ResultsFile))
	if resultsSize < journalSize*5/4 {
		t.Fatalf("results.json (%d bytes) is not well above the journal (%d): no limit lies between them", resultsSize, journalSize)
	}
	dir := filepath.Join(t.TempDir(), "b")
	code, stderr := rehearseUnderFileLimit(t, (journalSize+resultsSize)/2, args(dir)...)
	results := filepath.Join(dir, bundle.ResultsFile)
	if code != 1 {
		t.Fatalf("exit %d, want 1\nstderr:\n%s", code, stderr)
	}
	if named := linesNamingBundleFiles(stderr); len(named) != 1 || !strings.Contains(named[0], results+": write failed: file too large") {
		t.Errorf("stderr names the bundle's files in %d lines, want one naming %s and EFBIG:\n%s", len(named), results, stderr)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 || entries[0].Name() != bundle.JournalFile {
		t.Errorf("the bundle holds %v, want the journal alone (no temporary file)", entries)
	}
	if code, _, errs := runMain(context.Background(), "report", dir); code != 0 {
		t.Fatalf("report: exit %d: %s", code, errs)
	}
	want, err := bundle.ReadResults(free)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := bundle.ReadResults(dir); err != nil || len(res.Records) != len(want.Records) {
		t.Errorf("rebuilt results: %v, want its %d records", err, len(want.Records))
	}
}

// rehearseUnderFileLimit runs this test binary as rehearse with args, no
// file of it larger than limit bytes (RLIMIT_FSIZE, SIGXFSZ ignored: a
// write past it fails with EFBIG), and returns its exit status and stderr.
func rehearseUnderFileLimit(t *testing.T, limit int64, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), rehearseMainEnv+"=1", fileSizeLimitEnv+"="+strconv.FormatInt(limit, 10))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), stderr.String()
}

// linesNamingBundleFiles are the lines of stderr that name the journal or
// results.json.
func linesNamingBundleFiles(stderr string) []string {
	var named []string
	for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if strings.Contains(line, bundle.JournalFile) || strings.Contains(line, bundle.ResultsFile) {
			named = append(named, line)
		}
	}
	return named
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
