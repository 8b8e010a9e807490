package cli

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
)

// bench --slo against the simulator: the bundle carries the slo block and
// every aggregate's slo field, verify recomputes them, and the summary shows
// the attainment. The objectives are chosen so no machine's speed moves a
// verdict: e2el within 60 s (every request that succeeds does), ttft within
// a microsecond (no request over loopback HTTP does).
func TestBenchSLOAgainstTheSimulator(t *testing.T) {
	url, _, _ := startSim(t, "--engine", "batching", "--time-scale", "1000", "--seed", "5")
	for _, tc := range []struct {
		slo, attainment string
		good            bool
		verdict         string
	}{
		{"e2el<=60s", "0.5", true, contract.VerdictPass},
		{"ttft<=0.001ms,e2el<=60s", "0.9", false, contract.VerdictFail},
	} {
		dir := filepath.Join(t.TempDir(), "b")
		code, out, errs := runMain(context.Background(), "bench", "--base-url", url, "--tokenizer", "usage",
			"--request-rate", "inf", "--max-concurrency", "4", "--num-requests", "24", "--repeats", "2", "--max-tokens", "8",
			"--slo", tc.slo, "--attainment", tc.attainment, "-o", dir)
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s\n%s", tc.slo, code, out, errs)
		}
		res, err := bundle.ReadResults(dir)
		if err != nil {
			t.Fatal(err)
		}
		if res.SLO == nil || res.SLO.Expr != tc.slo || strconv.FormatFloat(res.SLO.AttainmentTarget, 'g', -1, 64) != tc.attainment {
			t.Fatalf("%s: slo block %+v", tc.slo, res.SLO)
		}
		if len(res.Aggregates) != 1 || res.Aggregates[0].SLO == nil {
			t.Fatalf("%s: aggregates %+v", tc.slo, res.Aggregates)
		}
		s := res.Aggregates[0].SLO
		wantGood := 0
		if tc.good {
			wantGood = 48
		}
		if s.N != 48 || s.Good != wantGood || s.Verdict != tc.verdict || s.Failed != 0 || len(s.RequestGoodput.PerRepeat) != 2 {
			t.Errorf("%s: slo %+v", tc.slo, s)
		}
		if !tc.good && (s.BindingObjective == nil || *s.BindingObjective != contract.ObjTTFT || s.Missed[contract.ObjTTFT] != 48) {
			t.Errorf("%s: binding %v, missed %v", tc.slo, s.BindingObjective, s.Missed)
		}
		if !strings.Contains(out, "attainment [95% CI]") || !strings.Contains(out, "good req/s") {
			t.Errorf("%s: summary lacks the SLO columns:\n%s", tc.slo, out)
		}
		readme, _ := os.ReadFile(filepath.Join(dir, bundle.ReadmeFile))
		if !strings.Contains(string(readme), "## SLO attainment") || !strings.Contains(string(readme), "`"+tc.slo+"`") {
			t.Errorf("%s: README.md lacks the SLO section", tc.slo)
		}
		if code, out, errs := runMain(context.Background(), "verify", dir); code != 0 {
			t.Fatalf("%s: verify: exit %d\n%s%s", tc.slo, code, out, errs)
		}
	}
}

func TestSLOFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "--base-url", "http://x", "--slo", "ttft<=500"}, `--slo "ttft<=500": "ttft<=500": limit "500" has no unit (write 500ms or 500s)`},
		{[]string{"bench", "--base-url", "http://x", "--slo", "ttfb<=5ms"}, `unknown objective "ttfb"`},
		{[]string{"bench", "--base-url", "http://x", "--slo", "ttft<=5ms,ttft<=6ms"}, "objective ttft given twice"},
		{[]string{"bench", "--base-url", "http://x", "--slo", "ttft<=5ms", "--attainment", "1"}, "--attainment: attainment target 1 is not between 0 and 1"},
		{[]string{"bench", "--base-url", "http://x", "--slo", "ttft<=5ms", "--attainment", "0"}, "--attainment: attainment target 0 is not between 0 and 1"},
		{[]string{"bench", "--base-url", "http://x", "--attainment", "0.9"}, "--attainment 0.9 needs objectives: add --slo"},
		{[]string{"run", "-f", "/nonexistent.yaml", "--slo", "x"}, "no such rehearsal file"},
		{[]string{"run", "-f", "../../examples/sustained.yaml", "--slo", "ttft<=5"}, `--slo "ttft<=5": "ttft<=5": limit "5" has no unit`},
		{[]string{"run", "-f", "../../examples/sustained.yaml", "--attainment", "1.5"}, "--attainment: attainment target 1.5 is not between 0 and 1"},
		{[]string{"run", "-f", "../../examples/simulated.yaml", "--attainment", "0.9"}, "--attainment 0.9 needs objectives"},
	} {
		code, _, errs := runMain(context.Background(), c.args...)
		if code != 2 || !strings.Contains(errs, c.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q, want 2 and one line with %q", c.args, code, errs, c.want)
		}
	}
}
