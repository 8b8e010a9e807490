package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/bundle/bundletest"
	"github.com/rehearse/rehearse/internal/report"
)

// heldMerge is the merge as it was before it streamed the records: every
// part read (bundle.ReadPartSet, with its refusals) and then held whole,
// merged in memory (bundle.MergeWith, as PartSet.Merge does for the parts
// it does not stream), written by WriteResults and reported from the
// merged results held.
func heldMerge(t *testing.T, out, baseline string, parts []string) error {
	t.Helper()
	ctx := context.Background()
	set, err := bundle.ReadPartSet(ctx, parts)
	if err != nil {
		return err
	}
	all := set.Results
	for i, res := range all {
		if len(res.Records) > 0 {
			continue // held already (read from its journal)
		}
		whole, err := bundle.ReadResults(parts[i])
		if errors.Is(err, fs.ErrNotExist) {
			continue // no results.json: read from its journal, with none
		}
		if err != nil {
			t.Fatal(err)
		}
		res.Records = whole.Records
	}
	if baseline != "" {
		for _, res := range all {
			res.Baseline = &baseline
		}
	}
	merged, err := bundle.MergeWith(all, parts, bundle.MergeOptions{})
	if err != nil {
		return err
	}
	if err := bundle.MakeEmptyDir(out); err != nil {
		t.Fatal(err)
	}
	if err := bundle.AppendPartLogs(ctx, out, parts, all); err != nil {
		t.Fatal(err)
	}
	if err := bundle.WriteResults(out, merged); err != nil {
		t.Fatal(err)
	}
	if err := report.Write(out, merged); err != nil {
		t.Fatal(err)
	}
	return nil
}

// sameFiles requires folders a and b to hold the same files, byte for
// byte.
func sameFiles(t *testing.T, a, b string) {
	t.Helper()
	names := func(dir string) []string {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range entries {
			out = append(out, e.Name())
		}
		return out
	}
	na, nb := names(a), names(b)
	if !slices.Equal(na, nb) {
		t.Fatalf("files %v, held merge's %v", nb, na)
	}
	for _, n := range na {
		x, err := os.ReadFile(filepath.Join(a, n))
		if err != nil {
			t.Fatal(err)
		}
		y, err := os.ReadFile(filepath.Join(b, n))
		if err != nil {
			t.Fatal(err)
		}
		if string(x) != string(y) {
			t.Errorf("%s differs from the held merge's (%d bytes, held %d)", n, len(y), len(x))
		}
	}
}

// splitSeed is the seed-like rehearsal's part of one server, as one GPU
// session per server would write it.
func splitSeed(full *bundle.Results, server string) *bundle.Results {
	p := *full
	p.Waves, p.Records, p.Servers, p.MechanismCheck = nil, nil, nil, nil
	for _, s := range full.Servers {
		if s.Name == server {
			p.Servers = append(p.Servers, s)
		}
	}
	for _, w := range full.Waves {
		if w.Server == server {
			p.Waves = append(p.Waves, w)
		}
	}
	for _, r := range full.Records {
		if r.Server == server {
			p.Records = append(p.Records, r)
		}
	}
	if full.MechanismCheck.Server == server {
		p.MechanismCheck = full.MechanismCheck
	}
	p.Recompute()
	return &p
}

// journalOnly is a part whose rehearsal stopped before writing
// results.json: its journal, cut after cut records.
func journalOnly(t *testing.T, res *bundle.Results, cut int) string {
	t.Helper()
	dir := t.TempDir()
	j, err := bundle.CreateJournal(filepath.Join(dir, bundle.JournalFile))
	if err != nil {
		t.Fatal(err)
	}
	j.WriteHeader(res)
	for _, w := range res.Waves {
		j.WriteWave(w)
	}
	for _, r := range res.Records[:cut] {
		j.WriteRecord(r)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestStreamedMergeIsTheHeldMerge pins the streaming merge to the merge
// that held every record: the same files, byte for byte (results.json,
// README.md, report.html, figures, logs, SHA256SUMS), and the same
// refusals, on seed-like parts (a mechanism check, a baseline given),
// simulator parts of as many records each (the identity pass), a part
// read from its journal, worker segments, and parts with an SLO.
func TestStreamedMergeIsTheHeldMerge(t *testing.T) {
	full := bundletest.SeedLike()
	naive, batching := seedBundle(t, splitSeed(full, "naive")), seedBundle(t, splitSeed(full, "batching"))
	crashed := journalOnly(t, splitSeed(full, "batching"), 25)

	t.Setenv(rehearseMainEnv, "1") // bench --workers runs this binary
	url, _, _ := startSim(t, "--engine", "batching", "--time-scale", "1000", "--seed", "3")
	url2, _, _ := startSim(t, "--engine", "batching", "--time-scale", "1000", "--seed", "4")
	bench := func(name, url string, extra ...string) string {
		out := filepath.Join(t.TempDir(), name)
		args := append([]string{"bench", "--base-url", url, "--name", name, "--tokenizer", "usage", "--progress", "never",
			"--concurrency", "1,4", "--repeats", "2", "-o", out}, extra...)
		if code, _, stderr := runMain(context.Background(), args...); code != 0 {
			t.Fatalf("bench %s: exit %d: %s", name, code, stderr)
		}
		return out
	}
	simA, simB := bench("a", url), bench("b", url2)
	sloA := bench("sa", url, "--slo", "ttft<=50ms,tpot<=20ms")
	sloB := bench("sb", url2, "--slo", "ttft<=50ms,tpot<=20ms")
	sameA := bench("a", url2) // server a again: joined by name
	segs := bench("w", url, "--workers", "2")
	var segments []string
	for i := range 2 {
		segments = append(segments, filepath.Join(segs+".workers", fmt.Sprintf("worker-%d", i)))
	}
	// Sustained waves after warm-up requests: each worker's share is
	// released at its own instant, and the records are rebased.
	sus := filepath.Join(t.TempDir(), "sus")
	if code, _, stderr := runMain(context.Background(), "bench", "--base-url", url, "--name", "s", "--tokenizer", "usage", "--progress", "never",
		"--request-rate", "inf", "--max-concurrency", "4", "--num-requests", "12", "--warmup-requests", "4", "--workers", "3", "-o", sus); code != 0 {
		t.Fatalf("bench sustained --workers 3: exit %d: %s", code, stderr)
	}
	var sustained []string
	for i := range 3 {
		sustained = append(sustained, filepath.Join(sus+".workers", fmt.Sprintf("worker-%d", i)))
	}
	// A segment whose records are not in the order of its waves (no
	// journal, which would not match them): merged holding them.
	shuffled := filepath.Join(t.TempDir(), "shuffled")
	if err := os.CopyFS(shuffled, os.DirFS(segments[1])); err != nil {
		t.Fatal(err)
	}
	res, err := bundle.ReadResults(shuffled)
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(res.Records)
	os.Remove(filepath.Join(shuffled, bundle.JournalFile))
	if err := bundle.WriteResults(shuffled, res); err != nil {
		t.Fatal(err)
	}
	if err := report.Write(shuffled, res); err != nil {
		t.Fatal(err)
	}
	// A segment whose worker stopped before writing results.json.
	segJournal := filepath.Join(t.TempDir(), "seg-journal")
	if err := os.CopyFS(segJournal, os.DirFS(segments[1])); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(segJournal, bundle.ResultsFile))
	os.Remove(filepath.Join(segJournal, bundle.SumsFile))
	copyOf := filepath.Join(t.TempDir(), "copy")
	if err := os.CopyFS(copyOf, os.DirFS(simA)); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name     string
		baseline string
		parts    []string
		refused  bool
		held     bool // merged holding every record
	}{
		{"seed-like parts", "", []string{naive, batching}, false, false},
		{"seed-like parts, --baseline", "naive", []string{batching, naive}, false, false},
		{"a part from its journal", "", []string{naive, crashed}, false, false},
		{"simulator parts of as many records", "", []string{simA, simB}, false, false},
		{"a server in two parts", "", []string{simA, sameA, simB}, false, false},
		{"parts with an SLO", "", []string{sloA, sloB}, false, false},
		{"worker segments", "", segments, false, false},
		{"segments out of order", "", []string{segments[0], shuffled}, false, true},
		{"a segment from its journal", "", []string{segments[0], segJournal}, false, false},
		// A sustained wave's warm-up requests may end after its first
		// recorded ones (records are kept in the order they end): such a
		// segment is merged holding its records, as one out of order.
		{"segments of sustained waves", "", sustained, false, outOfWaveOrder(t, sustained)},
		{"a part and its copy", "", []string{simA, simB, copyOf}, true, false},
		{"different workloads", "", []string{naive, simA}, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			held := filepath.Join(t.TempDir(), "held")
			herr := heldMerge(t, held, tt.baseline, tt.parts)
			streamed := filepath.Join(t.TempDir(), "streamed")
			args := []string{"merge", "-o", streamed}
			if tt.baseline != "" {
				args = append(args, "--baseline", tt.baseline)
			}
			code, _, stderr := run(t, append(args, tt.parts...)...)
			if tt.refused {
				if herr == nil || code != 2 || stderr != "rehearse: "+herr.Error()+"\n" {
					t.Fatalf("merge: exit %d, %q; the held merge: %v", code, stderr, herr)
				}
				return
			}
			if herr != nil || code != 0 {
				t.Fatalf("merge: exit %d, %s; the held merge: %v", code, stderr, herr)
			}
			sameFiles(t, held, streamed)
			// The merge streamed: no part's records held but the journal's,
			// none merged in memory.
			set, err := bundle.ReadPartSet(context.Background(), tt.parts)
			if err != nil {
				t.Fatal(err)
			}
			for i, res := range set.Results {
				if n := len(res.Records); n > 0 && tt.parts[i] != crashed && tt.parts[i] != segJournal {
					t.Errorf("%s: %d records held", tt.parts[i], n)
				}
			}
			m, err := set.Merge(context.Background(), tt.parts, bundle.MergeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if m.Held != tt.held {
				t.Errorf("merged holding every record: %v, want %v", m.Held, tt.held)
			}
			if code, out, _ := run(t, "verify", streamed); code != 0 {
				t.Fatalf("the merged bundle does not verify: %s", out)
			}
		})
	}
}

// TestReadVerifiedHead requires the results ReadVerified gives, less the
// records, and its refusals.
func TestReadVerifiedHead(t *testing.T) {
	dir := seedBundle(t, bundletest.SeedLike())
	ctx := context.Background()
	want, err := bundle.ReadVerified(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := bundle.ReadVerifiedHead(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.Records != nil {
		t.Fatalf("%d records held", len(got.Records))
	}
	want.Records = nil
	a, _ := bundletest.Encode(want)
	b, _ := bundletest.Encode(got)
	if string(a) != string(b) {
		t.Error("the results differ from ReadVerified's")
	}
	res, _ := bundle.ReadResults(dir)
	res.Records[0].OutputTokens += 7
	bundle.WriteResults(dir, res)
	bundle.WriteSumsKnown(dir, nil)
	_, werr := bundle.ReadVerified(ctx, dir)
	_, gerr := bundle.ReadVerifiedHead(ctx, dir)
	if werr == nil || gerr == nil || werr.Error() != gerr.Error() {
		t.Fatalf("a tampered bundle: %v, ReadVerified's %v", gerr, werr)
	}
	var ue *bundle.UnverifiedError
	if !errors.As(gerr, &ue) || len(ue.Problems) == 0 {
		t.Fatalf("not an UnverifiedError: %v", gerr)
	}
}

// outOfWaveOrder reports whether some part's records do not follow the
// order of its waves.
func outOfWaveOrder(t *testing.T, parts []string) bool {
	t.Helper()
	for _, p := range parts {
		res, err := bundle.ReadResults(p)
		if err != nil {
			t.Fatal(err)
		}
		at := map[int]int{}
		for i, w := range res.Waves {
			at[w.ID] = i
		}
		last := 0
		for _, r := range res.Records {
			if at[r.Wave] < last {
				return true
			}
			last = at[r.Wave]
		}
	}
	return false
}
