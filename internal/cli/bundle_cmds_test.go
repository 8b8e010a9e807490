package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/bundle/bundletest"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/report"
)

func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Main(context.Background(), args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func seedBundle(t *testing.T, res *bundle.Results) string {
	t.Helper()
	dir := t.TempDir()
	if err := bundle.WriteResults(dir, res); err != nil {
		t.Fatal(err)
	}
	for _, s := range res.Servers {
		os.WriteFile(filepath.Join(dir, s.Log), []byte("log of "+s.Name+"\n"), 0o644)
	}
	if err := report.Write(dir, res); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestVerifyCommand(t *testing.T) {
	dir := seedBundle(t, bundletest.SeedLike())
	code, out, errs := run(t, "verify", dir)
	if code != 0 || !strings.Contains(out, "ok:") {
		t.Fatalf("verify of a fresh bundle: code %d, out %q, err %q", code, out, errs)
	}
	// Tamper: change a record's tokens and re-make the digests.
	res, _ := bundle.ReadResults(dir)
	res.Records[0].OutputTokens += 7
	bundle.WriteResults(dir, res)
	bundle.WriteSumsKnown(dir, nil)
	code, out, _ = run(t, "verify", dir)
	if code != 1 || !strings.Contains(out, "results.json: server naive, 1 client: goodput_tok_s") {
		t.Fatalf("verify of a tampered bundle: code %d, out %q", code, out)
	}
}

func TestReportCommandBadInput(t *testing.T) {
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"report", filepath.Join(t.TempDir(), "nope")}, 2, "no such bundle directory"},
		{[]string{"report", t.TempDir()}, 2, "results.json: missing"},
		{[]string{"report"}, 2, "takes DIR"},
		{[]string{"verify", t.TempDir()}, 1, "SHA256SUMS: missing"},
	}
	for _, tt := range tests {
		code, out, errs := run(t, tt.args...)
		msg := out + errs
		if code != tt.code || !strings.Contains(msg, tt.want) {
			t.Errorf("%v: code %d (want %d), output %q (want %q)", tt.args, code, tt.code, msg, tt.want)
		}
	}
}

func TestReportCommandRerenders(t *testing.T) {
	dir := seedBundle(t, bundletest.SeedLike())
	os.Remove(filepath.Join(dir, bundle.ReadmeFile))
	if code, _, errs := run(t, "report", dir); code != 0 {
		t.Fatalf("report: %d %s", code, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, bundle.ReadmeFile)); err != nil {
		t.Fatal("README.md not re-made")
	}
	if code, out, _ := run(t, "verify", dir); code != 0 {
		t.Fatalf("bundle does not verify after report: %s", out)
	}
}

func TestMergeCommand(t *testing.T) {
	full := bundletest.SeedLike()
	a, b := seedBundle(t, splitSeed(full, "naive")), seedBundle(t, splitSeed(full, "batching"))
	out := filepath.Join(t.TempDir(), "merged")
	code, stdout, errs := run(t, "merge", "-o", out, a, b)
	if code != 0 {
		t.Fatalf("merge: %d %s %s", code, stdout, errs)
	}
	merged, err := bundle.ReadResults(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(merged.Aggregates) != len(full.Aggregates) {
		t.Fatalf("aggregates %d, want %d", len(merged.Aggregates), len(full.Aggregates))
	}
	for i := range full.Aggregates {
		g, w := merged.Aggregates[i], full.Aggregates[i]
		if g.Key() != w.Key() || *g.Goodput.Median != *w.Goodput.Median || !ptrEq(g.SpeedupVsBaseline, w.SpeedupVsBaseline) {
			t.Errorf("aggregate %d: %v %v, want %v %v", i, g.Key(), *g.Goodput.Median, w.Key(), *w.Goodput.Median)
		}
	}
	if merged.MechanismCheck == nil || merged.Waves[merged.MechanismCheck.Wave].Kind != contract.KindMechanismCheck {
		t.Error("mechanism check lost or pointing at the wrong wave")
	}
	if code, out, _ := run(t, "verify", out); code != 0 {
		t.Fatalf("merged bundle does not verify: %s", out)
	}
	// Parts that each name their own server as baseline need --baseline.
	bb := splitSeed(full, "batching")
	own := "batching"
	bb.Baseline = &own
	d := seedBundle(t, bb)
	code, _, errs = run(t, "merge", "-o", filepath.Join(t.TempDir(), "m1"), a, d)
	if code != 2 || !strings.Contains(errs, `baseline "batching" differs from "naive"`) {
		t.Errorf("merge of parts with different baselines: code %d, %q", code, errs)
	}
	m3 := filepath.Join(t.TempDir(), "m3")
	if code, _, errs = run(t, "merge", "--baseline", "naive", "-o", m3, a, d); code != 0 {
		t.Fatalf("merge --baseline naive: %d %s", code, errs)
	}
	if r, _ := bundle.ReadResults(m3); r.BaselineName() != "naive" || r.Aggregates[len(r.Aggregates)-1].SpeedupVsBaseline == nil {
		t.Error("merged with --baseline: speed-ups against naive missing")
	}
	// A part with another workload is refused with a one-line reason.
	other := splitSeed(full, "batching")
	other.Workload.MaxTokens = 64
	c := seedBundle(t, other)
	code, _, errs = run(t, "merge", "-o", filepath.Join(t.TempDir(), "m2"), a, c)
	if code != 2 || !strings.Contains(errs, "max_tokens 64 vs 128") {
		t.Errorf("merge of different workloads: code %d, %q", code, errs)
	}
}

func ptrEq(a, b *float64) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

func TestAnnotateCommand(t *testing.T) {
	dir := seedBundle(t, bundletest.SeedLike())
	notes := filepath.Join(t.TempDir(), "notes.md")
	os.WriteFile(notes, []byte("The naive server saturates at **20 tok/s**.\n"), 0o644)
	if code, out, errs := run(t, "annotate", dir, "-f", notes); code != 0 {
		t.Fatalf("annotate: %d %s %s", code, out, errs)
	}
	readme, _ := os.ReadFile(filepath.Join(dir, bundle.ReadmeFile))
	if !strings.Contains(string(readme), "## Operator notes\n\nThe naive server saturates at **20 tok/s**.") {
		t.Error("README lacks the operator notes")
	}
	if code, out, _ := run(t, "verify", dir); code != 0 {
		t.Fatalf("annotated bundle does not verify: %s", out)
	}
	// A bundle that does not verify is not annotated (that would re-make
	// its digests over the problem).
	os.WriteFile(filepath.Join(dir, "naive.log"), []byte("changed\n"), 0o644)
	if code, _, errs := run(t, "annotate", dir, "-f", notes); code != 1 || !strings.Contains(errs, "does not verify") {
		t.Errorf("annotate of a tampered bundle: code %d, %q", code, errs)
	}
}

func TestReportRebuildsFromJournal(t *testing.T) {
	dir := journalOnly(t, bundletest.SeedLike(), 40) // the tool died after 40 requests
	code, _, errs := run(t, "report", dir)
	// Every wave was journaled once and never ended: each is cut.
	if code != 0 || !strings.Contains(errs, "results.json rebuilt from journal.jsonl (40 records; 19 wave(s) cut by the journal's end, marked stopped)") {
		t.Fatalf("report of a crashed bundle: code %d, %q", code, errs)
	}
	if code, out, _ := run(t, "verify", dir); code != 0 {
		t.Fatalf("rebuilt bundle does not verify: %s", out)
	}
}

// report re-renders a bundle but never re-signs it: a file changed since
// SHA256SUMS listed it keeps its listed digest (named on stderr), so verify
// goes on reporting it; a manifest naming a file outside the bundle is
// refused before anything is written.
func TestReportKeepsListedDigests(t *testing.T) {
	dir := seedBundle(t, bundletest.SeedLike())
	res, err := bundle.ReadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	res.Records[0].OutputTokens += 7
	if err := bundle.WriteResults(dir, res); err != nil {
		t.Fatal(err)
	}
	code, _, errs := run(t, "report", dir)
	if code != 0 || !strings.Contains(errs, "results.json does not match SHA256SUMS") {
		t.Fatalf("report of a changed bundle: code %d, stderr %q", code, errs)
	}
	code, out, _ := run(t, "verify", dir)
	if code != 1 || !strings.Contains(out, "results.json: SHA-256") {
		t.Fatalf("verify after report: code %d, out %q (want the digest mismatch still reported)", code, out)
	}

	bad := seedBundle(t, bundletest.SeedLike())
	sums := filepath.Join(bad, bundle.SumsFile)
	data, _ := os.ReadFile(sums)
	os.WriteFile(sums, append(data, []byte(strings.Repeat("0", 64)+"  ../outside\n")...), 0o644)
	readme, _ := os.ReadFile(filepath.Join(bad, bundle.ReadmeFile))
	os.WriteFile(filepath.Join(bad, bundle.ReadmeFile), []byte("stale"), 0o644)
	code, _, errs = run(t, "report", bad)
	if code != 2 || !strings.Contains(errs, "../outside: not a file name inside the bundle") {
		t.Fatalf("report with ../ in SHA256SUMS: code %d, stderr %q", code, errs)
	}
	if got, _ := os.ReadFile(filepath.Join(bad, bundle.ReadmeFile)); string(got) != "stale" || len(readme) == 0 {
		t.Fatalf("report wrote README.md before refusing the manifest")
	}
}
