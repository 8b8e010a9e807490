package bundle_test

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/bundle/bundletest"
)

// testdata/minimal is a results.json written by hand with only the fields
// SPEC §4a lists (no wave ids, provenance.tool a string, percentile_method
// "linear", no release_spread_s, mode, repeats, output_tokens or
// request_throughput_rps), and its SHA256SUMS. Another tool can write that
// much; it must verify.
const minimalDir = "testdata/minimal"

func TestVerifyMinimalResults(t *testing.T) {
	for _, p := range bundletest.Verify(minimalDir) {
		t.Errorf("%s", p)
	}
}

func TestVerifyMinimalResultsTampered(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(minimalDir, bundle.ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, old, new, want string }{
		{"aggregate", `"p95": 0.9625,`, `"p95": 0.9,`, "server a, 2 clients: ttft_s.p95: stored 0.9, recomputed 0.962"},
		{"percentile method", `"percentile_method": "linear"`, `"percentile_method": "nearest"`, `workload.percentile_method: "nearest" is not`},
		{"wall_s", `"wall_s": 2,`, `"wall_s": 3,`, "waves[0].wall_s: stored 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !bytes.Contains(data, []byte(tc.old)) {
				t.Fatalf("testdata does not contain %q", tc.old)
			}
			dir := t.TempDir()
			tampered := bytes.Replace(data, []byte(tc.old), []byte(tc.new), 1)
			if err := os.WriteFile(filepath.Join(dir, bundle.ResultsFile), tampered, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := bundle.WriteSumsKnown(dir, nil); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range bundletest.Verify(dir) {
				got = append(got, p.String())
			}
			if len(got) != 1 || !strings.Contains(got[0], tc.want) {
				t.Errorf("got %q, want one problem containing %q", got, tc.want)
			}
		})
	}
}

// A cold repeat makes the tool warn of it, but an aggregate's warnings
// are the tool's own free text (SPEC §4a): an aggregate without them
// verifies, and warnings that are there are checked.
func TestVerifyMinimalResultsColdRepeat(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(minimalDir, bundle.ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	const warnings = `,
   "warnings": ["p95/p99 of TTFT, TPOT, E2E from 2 or fewer samples (< 20): the tail is close to the maximum"]}`
	cold := bytes.Replace(data, []byte(`"cold": false`), []byte(`"cold": true`), 1)
	for _, tc := range []struct{ name, warnings, want string }{
		{"without warnings", "}", ""},
		{"with warnings that miss it", warnings, `warnings: stored ["p95/p99 of TTFT`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !bytes.Contains(cold, []byte(warnings)) || bytes.Equal(cold, data) {
				t.Fatal("testdata has changed")
			}
			dir := t.TempDir()
			edited := bytes.Replace(cold, []byte(warnings), []byte(tc.warnings), 1)
			if err := os.WriteFile(filepath.Join(dir, bundle.ResultsFile), edited, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := bundle.WriteSumsKnown(dir, nil); err != nil {
				t.Fatal(err)
			}
			streamed, ok, _, held := bundle.VerifyBothWays(dir, bundle.Options{})
			if !ok {
				t.Fatal("not streamed")
			}
			for _, rep := range []bundle.Report{streamed, held} {
				got := problems(rep.Problems)
				if tc.want == "" && got != "" || !strings.Contains(got, tc.want) || len(rep.Problems) > 1 {
					t.Errorf("got %s, want %q", got, tc.want)
				}
			}
		})
	}
}

// The tail bounds of a latency summary (p95_ub, p99_ub, p99_min_n) are
// beyond SPEC §4a's list: a bundle without them, as one written before
// them, verifies; where a summary carries one, it is checked, though
// another was taken out.
func TestVerifyTailBoundsOptional(t *testing.T) {
	dir := writeRow(t, nil, nil, false)
	data, err := os.ReadFile(filepath.Join(dir, bundle.ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	bound := regexp.MustCompile(`,\s*"(p95_ub|p99_ub|p99_min_n)":\s*(null|[-+0-9.eE]+)`)
	if n := len(bound.FindAll(data, -1)); n == 0 {
		t.Fatal("the written results.json has no tail bounds")
	}
	itlUB := regexp.MustCompile(`("itl_s":\s*\{[^}]*"p99_ub":\s*)[-+0-9.eE]+`)
	if !itlUB.Match(data) {
		t.Fatal("the written results.json has no itl_s.p99_ub")
	}
	for _, tc := range []struct {
		name string
		edit func([]byte) []byte
		want string
	}{
		{"without them", func(b []byte) []byte { return bound.ReplaceAll(b, nil) }, ""},
		{"without p99_min_n, a p99_ub changed", func(b []byte) []byte {
			b = regexp.MustCompile(`,\s*"p99_min_n":\s*[0-9]+`).ReplaceAll(b, nil)
			return itlUB.ReplaceAll(b, []byte("${1}12345"))
		}, "itl_s.p99_ub: stored 12345"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(filepath.Join(dir, bundle.ResultsFile), tc.edit(data), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := bundle.WriteSumsKnown(dir, nil); err != nil {
				t.Fatal(err)
			}
			probs := verifyAll(t, dir)
			switch {
			case tc.want == "" && len(probs) > 0:
				t.Errorf("want none, got %q", probs)
			case tc.want != "" && (len(probs) == 0 || !strings.Contains(strings.Join(probs, "\n"), tc.want)):
				t.Errorf("want a problem containing %q, got %q", tc.want, probs)
			}
		})
	}
}
