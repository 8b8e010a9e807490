package cli

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/bundle/bundletest"
	"github.com/rehearse/rehearse/internal/report"
)

// reportHeld is `rehearse report` as it was before it streamed: every
// record held whole, its aggregates computed twice (VerifyResults, then
// Recompute), every file hashed again for SHA256SUMS. It returns how many
// stored figures disagree.
func reportHeld(t *testing.T, dir string) int {
	t.Helper()
	res, fromJournal, err := bundle.ReadPart(context.Background(), dir)
	if err != nil || fromJournal {
		t.Fatalf("%s: %v (from the journal: %v)", dir, err, fromJournal)
	}
	n := len(bundle.VerifyResults(res))
	res.Recompute()
	if err := report.WriteContext(context.Background(), dir, res); err != nil {
		t.Fatal(err)
	}
	return n
}

// copyTree copies the bundle at src to a new folder.
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "b")
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// treeBytes is every file under dir by its path.
func treeBytes(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out[rel], _ = os.ReadFile(p)
		}
		return err
	})
	return out
}

// The report of a bundle read as it streams (records kept lean,
// aggregates computed once, results.json hashed as it is decoded) is
// byte for byte the report of the records held whole: README.md, every
// SVG, report.html and SHA256SUMS, on the committed bundles, the seed-like
// bundle (honest and with a stored figure changed: the warning counts the
// same) and simulator bundles with reasoning, send stamps and an SLO (the
// latter with reasoning text but usage counts: no aggregate says it has
// reasoning, only its texts do).
func TestReportStreamedIsReportHeld(t *testing.T) {
	var dirs []string
	found, _ := filepath.Glob("../../rehearsals/*/results.json")
	deeper, _ := filepath.Glob("../../rehearsals/*/*/results.json")
	for _, f := range append(found, deeper...) {
		dirs = append(dirs, filepath.Dir(f))
	}
	if len(dirs) == 0 {
		t.Fatal("no committed bundle under rehearsals/")
	}
	dirs = append(dirs, seedBundle(t, bundletest.SeedLike()))
	tampered := seedBundle(t, bundletest.SeedLike())
	res, err := bundle.ReadResults(tampered)
	if err != nil {
		t.Fatal(err)
	}
	res.Aggregates[0].OutputTokens += 3
	res.Waves[0].WallS += 1
	if err := bundle.WriteResults(tampered, res); err != nil {
		t.Fatal(err)
	}
	// Its digests re-made over the change, as a tamperer would: report
	// keeps listed digests, and the held path below does not read them.
	if err := bundle.WriteSumsKnown(tampered, nil); err != nil {
		t.Fatal(err)
	}
	dirs = append(dirs, tampered)
	if !testing.Short() {
		for _, sim := range []struct{ sim, bench []string }{
			{[]string{"--engine", "batching", "--time-scale", "20", "--seed", "3", "--reasoning-tokens", "8", "--stamp-sends"},
				[]string{"--request-rate", "inf", "--max-concurrency", "4", "--num-requests", "12", "--repeats", "2", "--max-tokens", "16"}},
			{[]string{"--engine", "batching", "--time-scale", "1000", "--seed", "5", "--reasoning-tokens", "4"},
				[]string{"--tokenizer", "usage", "--request-rate", "inf", "--max-concurrency", "4", "--num-requests", "24", "--repeats", "2", "--max-tokens", "8", "--slo", "ttft<=5ms,e2el<=60s", "--attainment", "0.5"}},
		} {
			url, _, _ := startSim(t, sim.sim...)
			dir := filepath.Join(t.TempDir(), "b")
			args := append([]string{"bench", "--base-url", url}, sim.bench...)
			if code, out, errs := runMain(context.Background(), append(args, "-o", dir)...); code != 0 {
				t.Fatalf("bench: exit %d\n%s\n%s", code, out, errs)
			}
			dirs = append(dirs, dir)
		}
	}
	lean, capacity := 0, 0
	for _, src := range dirs {
		held, streamed := copyTree(t, src), copyTree(t, src)
		in, err := bundle.ReadReport(context.Background(), streamed)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if in.Lean {
			lean++
		}
		if len(in.Results.Capacity) > 0 {
			capacity++
		}
		n := reportHeld(t, held)
		code, _, errs := run(t, "report", streamed)
		if code != 0 {
			t.Fatalf("%s: report: exit %d: %s", src, code, errs)
		}
		var want string
		if n > 0 {
			want = fmt.Sprintf("rehearse: %s: %d stored figures disagree", streamed, n)
		}
		if got, _, _ := strings.Cut(errs, " with the raw records"); got != want {
			t.Errorf("%s (lean %v): the warning says %q, want %q", src, in.Lean, got, want)
		}
		if src == tampered && n < 2 {
			t.Errorf("the tampered bundle has %d disagreeing figures", n)
		}
		a, b := treeBytes(t, held), treeBytes(t, streamed)
		for f, want := range a {
			if got, ok := b[f]; !ok || !bytes.Equal(got, want) {
				t.Errorf("%s (lean %v): %s differs from the held report's (%d bytes, held %d)", src, in.Lean, f, len(got), len(want))
			}
		}
		for f := range b {
			if _, ok := a[f]; !ok {
				t.Errorf("%s: %s written by the streamed report only", src, f)
			}
		}
	}
	// The capacity bundles are read whole; every other one streams.
	if capacity == 0 || lean != len(dirs)-capacity {
		t.Errorf("%d of %d bundles streamed, %d with a capacity search", lean, len(dirs), capacity)
	}
}
