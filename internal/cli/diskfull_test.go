//go:build unix

package cli

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/sim"
)

// Issue 28 row 1: a journal that can no longer be written (the disk full)
// stops the rehearsal at its first failed write, with one line naming
// journal.jsonl and the system's error, exit 1; what was journaled before
// it stays readable, and "rehearse report" rebuilds the bundle from it.
// rehearse runs as a child (this test binary as rehearse) under a file
// size limit, so the journal's write past it fails with EFBIG for real.
func TestBenchStopsAtTheJournalsFirstWriteError(t *testing.T) {
	s, err := sim.New(sim.Options{Engine: sim.EngineBatching, TimeScale: 1000, Seed: 1})
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
	cmd := exec.Command(os.Args[0], "bench", "--base-url", srv.URL, "--tokenizer", "usage",
		"--concurrency", "4", "--repeats", "40", "--warmup-waves", "0", "--max-tokens", "16", "-o", dir)
	cmd.Env = append(os.Environ(), rehearseMainEnv+"=1", fileSizeLimitEnv+"=32768")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	code := cmd.ProcessState.ExitCode()
	if code != 1 {
		t.Fatalf("exit %d (%v), want 1\nstderr:\n%s", code, err, stderr.String())
	}
	journal := filepath.Join(dir, bundle.JournalFile)
	var named []string
	for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		if strings.Contains(line, bundle.JournalFile) || strings.Contains(line, bundle.ResultsFile) {
			named = append(named, line)
		}
	}
	if len(named) != 1 || !strings.Contains(named[0], journal+": write failed: file too large") {
		t.Errorf("stderr names the bundle's files in %d lines, want one naming %s and EFBIG:\n%s", len(named), journal, stderr.String())
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
