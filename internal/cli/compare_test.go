package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/plot/plottest"
)

func compareMain(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = Main(context.Background(), append([]string{"compare"}, args...), strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// comparePair writes two bundles of one synthetic rehearsal; in B the
// batching server decodes 25% slower (a planted regression).
func comparePair(t *testing.T) (a, b string) {
	t.Helper()
	oa, ob := plottest.Default(), plottest.Default()
	oa.Seed, ob.Seed = 11, 12
	ob.Servers[1].TPOTS *= 1.25
	a, b = filepath.Join(t.TempDir(), "before"), filepath.Join(t.TempDir(), "after")
	for dir, o := range map[string]plottest.Options{a: oa, b: ob} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := bundle.WriteResults(dir, plottest.Results(o)); err != nil {
			t.Fatal(err)
		}
		if err := bundle.WriteSumsKnown(dir, nil); err != nil {
			t.Fatal(err)
		}
	}
	return a, b
}

func TestCompareCommand(t *testing.T) {
	a, b := comparePair(t)

	code, out, errOut := compareMain(a, b)
	if code != 0 || errOut != "" {
		t.Fatalf("no gates: exit %d, stderr %q", code, errOut)
	}
	if !strings.Contains(out, "batching  64 clients") || !strings.Contains(out, "0.81× !") || !strings.Contains(out, "is flagged (!) when") {
		t.Errorf("text output lacks the flagged batching row or the rule:\n%s", out)
	}

	code, out, errOut = compareMain(a, b, "--fail-if", "goodput<-5%", "--fail-if", "failure_rate>+5pp")
	if code != 1 {
		t.Errorf("planted regression with goodput<-5%%: exit %d, want 1", code)
	}
	if !strings.Contains(errOut, "4 gate check(s) tripped") || !strings.Contains(errOut, "goodput<-5%: batching at 64 clients: ") {
		t.Errorf("stderr does not name the tripped rows: %q", errOut)
	}
	if !strings.Contains(out, "failure_rate>+5pp: passed on 8 rows") {
		t.Errorf("stdout lacks the passing gate:\n%s", out)
	}

	code, _, errOut = compareMain(a, b, "--fail-if", "naive:goodput<-5%")
	if code != 0 {
		t.Errorf("gate on the unchanged server: exit %d (%s), want 0", code, errOut)
	}

	code, out, _ = compareMain("--markdown", a, b)
	if code != 0 || !strings.HasPrefix(out, "## Comparison\n") || !strings.Contains(out, "| `batching` | 64 clients |") {
		t.Errorf("--markdown: exit %d\n%s", code, out)
	}
}

func TestCompareCommandUsageErrors(t *testing.T) {
	a, b := comparePair(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{a}, "compare takes two bundle directories, A and B (got 1 arguments)"},
		{[]string{a, b, "--fail-if", "goodput<5 percent"}, `gate "goodput<5 percent" doesn't match`},
		{[]string{a, b, "--fail-if", "throughput<-5%"}, `unknown metric "throughput"`},
		{[]string{a, b, "--nope"}, "unknown flag: --nope"},
		{[]string{a, filepath.Join(b, "missing")}, "bundle B: " + filepath.Join(b, "missing") + ": no such bundle directory"},
	} {
		code, _, errOut := compareMain(c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("compare %q: exit %d, stderr %q; want 2 and %q", c.args, code, errOut, c.want)
		}
		if strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
			t.Errorf("compare %q: error spans lines: %q", c.args, errOut)
		}
	}
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, bundle.ResultsFile), []byte(`{"schema": "rehearse/results/v1", "records": [`), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := compareMain(a, bad); code != 2 || !strings.Contains(errOut, "truncated JSON") {
		t.Errorf("truncated results.json: exit %d, stderr %q", code, errOut)
	}
}

// compare --fail-if capacity<-10% exits 1 when B's batching server carries
// fewer clients under the SLO, and 0 on the unchanged serial one.
func TestCompareCapacityGate(t *testing.T) {
	oa, ob := plottest.DefaultCapacity(), plottest.DefaultCapacity()
	ob.Seed = oa.Seed + 1
	ob.Servers[1].TPOTS *= 4.0 / 3
	a, b := filepath.Join(t.TempDir(), "before"), filepath.Join(t.TempDir(), "after")
	for dir, o := range map[string]plottest.CapacityOptions{a: oa, b: ob} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := bundle.WriteResults(dir, plottest.CapacityResults(o)); err != nil {
			t.Fatal(err)
		}
		if err := bundle.WriteSumsKnown(dir, nil); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := compareMain(a, b, "--fail-if", "capacity<-10%")
	if code != 1 || !strings.Contains(errOut, "capacity<-10%: capacity of batching: ") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
	if !strings.Contains(out, "Capacity under the SLO:") {
		t.Errorf("no capacity section:\n%s", out)
	}
	if code, _, errOut := compareMain(a, b, "--fail-if", "naive:capacity<-10%"); code != 0 {
		t.Errorf("naive: exit %d (%s), want 0", code, errOut)
	}
	if code, _, errOut := compareMain(a, b, "--fail-if", "capacity<-1s"); code != 2 || !strings.Contains(errOut, "capacity is a number of clients") {
		t.Errorf("capacity<-1s: exit %d (%s), want 2", code, errOut)
	}
}
