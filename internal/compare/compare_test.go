package compare

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/golden"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/plot/plottest"
)

// pair returns bundle A and bundle B of the same synthetic rehearsal with
// different seeds; regress slows B's batching server's decoding by 25%.
func pair(regress bool) (a, b *bundle.Results) {
	oa := plottest.Default()
	oa.Seed = 11
	ob := plottest.Default()
	ob.Seed = 12
	if regress {
		ob.Servers[1].TPOTS *= 1.25
	}
	return plottest.Results(oa), plottest.Results(ob)
}

func mustGates(t *testing.T, ss ...string) []Gate {
	t.Helper()
	var gs []Gate
	for _, s := range ss {
		g, err := ParseGate(s)
		if err != nil {
			t.Fatal(err)
		}
		gs = append(gs, g)
	}
	return gs
}

func TestPlantedRegressionIsFlaggedAndGated(t *testing.T) {
	a, b := pair(true)
	r := compareSides(side{res: a}, side{res: b}, mustGates(t, "goodput<-5%", "batching:ttft_p95>+50%", "naive:goodput<-5%", "failure_rate>+0.05"))
	if len(r.Rows) != 8 {
		t.Fatalf("%d rows, want 2 servers × 4 concurrencies", len(r.Rows))
	}
	for _, row := range r.Rows {
		if row.GoodputRatio == nil {
			t.Fatalf("%s at %s: no goodput ratio", row.Server, row.Load)
		}
		switch row.Server {
		case "batching":
			if !row.GoodputChanged || *row.GoodputRatio > 0.9 {
				t.Errorf("batching at %s: ratio %.3f, flagged %v; the planted 25%% slower decoding should be flagged", row.Load, *row.GoodputRatio, row.GoodputChanged)
			}
		case "naive":
			if row.GoodputChanged {
				t.Errorf("naive at %s flagged (ratio %.3f) though unchanged", row.Load, *row.GoodputRatio)
			}
		}
	}
	tripped := r.Tripped()
	want := map[string]int{"goodput<-5%": 4, "naive:goodput<-5%": 0, "failure_rate>+0.05": 0}
	for gate, n := range want {
		got := 0
		for _, s := range tripped {
			if strings.HasPrefix(s, gate+": ") {
				got++
			}
		}
		if got != n {
			t.Errorf("gate %s tripped on %d rows, want %d; tripped: %q", gate, got, n, tripped)
		}
	}
	for _, s := range tripped {
		if strings.HasPrefix(s, "goodput<-5%: ") && !strings.HasPrefix(s, "goodput<-5%: batching at ") {
			t.Errorf("goodput gate tripped on an unchanged server: %s", s)
		}
	}
}

func TestSameRehearsalTwicePasses(t *testing.T) {
	a, b := pair(false)
	r := compareSides(side{res: a}, side{res: b}, mustGates(t, "goodput<-5%", "ttft_p95>+25%", "failure_rate>+0.1"))
	for _, row := range r.Rows {
		if row.GoodputChanged {
			t.Errorf("%s at %s flagged between two runs of one rehearsal (ratio %.3f)", row.Server, row.Load, *row.GoodputRatio)
		}
	}
	if tr := r.Tripped(); len(tr) != 0 {
		t.Errorf("gates tripped between two runs of one rehearsal: %q", tr)
	}
	if len(r.Notes) != 0 || len(r.OnlyA)+len(r.OnlyB) != 0 {
		t.Errorf("notes %q, only A %q, only B %q; want none", r.Notes, r.OnlyA, r.OnlyB)
	}
}

func TestFailureFormat(t *testing.T) {
	for _, c := range []struct {
		f    contract.Failures
		want string
	}{
		{contract.Failures{Count: 54, Total: 96, Rate: 54.0 / 96}, "54/96 (56.3%)"},
		{contract.Failures{Count: 0, Total: 3}, "0/3 (0%)"},
		{contract.Failures{Count: 154, Total: 192, Rate: 154.0 / 192}, "154/192 (80.2%)"},
		// compare once rounded these to the ends and dropped the decimal.
		{contract.Failures{Count: 1, Total: 20000, Rate: 1.0 / 20000}, "1/20000 (<0.1%)"},
		{contract.Failures{Count: 19999, Total: 20000, Rate: 19999.0 / 20000}, "19999/20000 (>99.9%)"},
		{contract.Failures{Count: 1, Total: 2, Rate: 0.5}, "1/2 (50.0%)"},
	} {
		row := Row{A: contract.Aggregate{Failures: c.f}, B: contract.Aggregate{Failures: c.f}}
		if got := cells(row, false)[8]; got != c.want {
			t.Errorf("failures %d/%d = %q, want %q", c.f.Count, c.f.Total, got, c.want)
		}
	}
}

func TestBeyondRanges(t *testing.T) {
	sp := func(med, lo, hi float64) contract.Spread { return contract.Spread{Median: &med, Min: &lo, Max: &hi} }
	for _, c := range []struct {
		a, b contract.Spread
		want bool
	}{
		{sp(100, 95, 105), sp(80, 78, 82), true},   // disjoint
		{sp(100, 95, 105), sp(96, 90, 99), false},  // B's median inside A's range
		{sp(100, 60, 105), sp(90, 89, 91), false},  // B inside A's wide range
		{sp(100, 99, 101), sp(90, 80, 120), false}, // A's median inside B's wide range
		{sp(100, 100, 100), sp(102, 102, 102), true},
		{sp(100, 100, 100), sp(100.5, 100.5, 100.5), false}, // within 1%
		{sp(0, 0, 0), sp(5, 4, 6), true},                    // from nothing
		{contract.Spread{}, sp(1, 1, 1), false},             // absent
	} {
		if got := beyondRanges(c.a, c.b); got != c.want {
			t.Errorf("beyondRanges(%v–%v, %v–%v) = %v, want %v", *c.a.Min, *orZero(c.a.Max), *c.b.Min, *c.b.Max, got, c.want)
		}
	}
}

func orZero(p *float64) *float64 {
	if p == nil {
		z := 0.0
		return &z
	}
	return p
}

func TestGateNotEvaluatedTrips(t *testing.T) {
	a, b := pair(false)
	r := compareSides(side{res: a}, side{res: b}, mustGates(t, "nosuch:goodput<-5%"))
	tr := r.Tripped()
	if len(tr) != 1 || !strings.Contains(tr[0], "evaluated on no server and load present in both bundles") {
		t.Errorf("a gate that tests nothing must trip: %q", tr)
	}
	if sk := r.Gates[0].Skipped; len(sk) != 1 || !strings.Contains(sk[0], `no row of server "nosuch"`) {
		t.Errorf("skipped %q", sk)
	}
}

func TestMissingValuesAreSkippedNotTripped(t *testing.T) {
	oa := plottest.Default()
	ob := plottest.Default()
	ob.TimeoutS = 1 // B's serial server completes nothing: no TTFT
	a, b := plottest.Results(oa), plottest.Results(ob)
	r := compareSides(side{res: a}, side{res: b}, mustGates(t, "naive:ttft_p95>+10%", "goodput<-5%"))
	g := r.Gates[0]
	if g.Evaluated != 0 || len(g.Skipped) != 4 || !strings.Contains(g.Skipped[0], "B has no ttft_p95 (no successful request)") {
		t.Errorf("ttft gate: evaluated %d, skipped %q", g.Evaluated, g.Skipped)
	}
	// goodput is 0, not absent, when nothing succeeded: the gate trips.
	if n := len(r.Gates[1].Tripped); n < 4 {
		t.Errorf("goodput gate tripped on %d rows; naive's goodput fell to 0 on 4", n)
	}
	if len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "client timeouts (s) differ: A 20, B 1") {
		t.Errorf("notes %q should name the different timeouts", r.Notes)
	}
}

func TestRowsPresentInOneBundleOnly(t *testing.T) {
	oa := plottest.Default()
	ob := plottest.Default()
	ob.Concurrencies = []int{1, 8, 16}
	r := compareSides(side{res: plottest.Results(oa)}, side{res: plottest.Results(ob)}, nil)
	if len(r.Rows) != 4 {
		t.Errorf("%d rows, want 2 servers × {1, 8}", len(r.Rows))
	}
	if strings.Join(r.OnlyA, ";") != "naive at 32 clients;naive at 64 clients;batching at 32 clients;batching at 64 clients" {
		t.Errorf("only A: %q", r.OnlyA)
	}
	if strings.Join(r.OnlyB, ";") != "naive at 16 clients;batching at 16 clients" {
		t.Errorf("only B: %q", r.OnlyB)
	}
}

func TestOpenLoopLoads(t *testing.T) {
	a, b := pair(false)
	for _, res := range []*bundle.Results{a, b} {
		for i := range res.Waves {
			if res.Waves[i].Kind == contract.KindRecorded {
				res.Waves[i].Mode = contract.ModeOpen
				res.Waves[i].RequestRateRPS = float64(res.Waves[i].Concurrency) / 4
			}
		}
		res.Recompute()
	}
	r := compareSides(side{res: a}, side{res: b}, nil)
	if len(r.Rows) != 8 || r.Rows[0].Load != "0.25 req/s" || r.Rows[3].Load != "16 req/s" {
		t.Errorf("open-loop loads: %d rows, first %q, fourth %q", len(r.Rows), r.Rows[0].Load, r.Rows[3].Load)
	}
}

func TestTextAndMarkdownGolden(t *testing.T) {
	a, b := pair(true)
	r := compareSides(side{res: a}, side{res: b}, mustGates(t, "goodput<-5%", "ttft_p95>+10%", "failure_rate>+5pp"))
	r.LabelA, r.LabelB = "out/before", "out/after"
	var txt, md bytes.Buffer
	if err := r.Text(&txt); err != nil {
		t.Fatal(err)
	}
	if err := r.Markdown(&md); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "regression.txt", txt.Bytes())
	golden.Check(t, "regression.md", md.Bytes())
	for _, out := range []string{txt.String(), md.String()} {
		if !strings.Contains(out, "B's median lies outside A's [min–max] of the repeats and A's median outside B's") || !strings.Contains(out, "differ by more than 1%") {
			t.Error("output does not state the flagging rule")
		}
	}
}

func TestRunReadsBundles(t *testing.T) {
	a, b := pair(true)
	dirA, dirB := t.TempDir(), t.TempDir()
	writeVerifiable(t, dirA, a)
	writeVerifiable(t, dirB, b)
	var out bytes.Buffer
	r, err := Run(context.Background(), Options{A: dirA, B: dirB, Gates: mustGates(t, "goodput<-5%"), Markdown: true}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Tripped()) != 4 || !strings.HasPrefix(out.String(), "## Comparison\n\n- A: `"+dirA+"`") {
		t.Errorf("tripped %q; output starts %q", r.Tripped(), out.String()[:60])
	}
	if _, err := Run(context.Background(), Options{A: dirA, B: filepath.Join(dirB, "nope")}, &out); err == nil || !strings.Contains(err.Error(), "bundle B: ") || !strings.Contains(err.Error(), "no such bundle directory") {
		t.Errorf("missing bundle: %v", err)
	}
	if _, err := Run(context.Background(), Options{A: dirA}, &out); err == nil {
		t.Error("no B: no error")
	}
}

func BenchmarkCompare(b *testing.B) {
	x, y := pair(true)
	gates := []Gate{}
	for _, s := range []string{"goodput<-5%", "ttft_p95>+10%", "failure_rate>+5pp"} {
		g, _ := ParseGate(s)
		gates = append(gates, g)
	}
	for b.Loop() {
		var buf bytes.Buffer
		_ = compareSides(side{res: x}, side{res: y}, gates).Text(&buf)
	}
}

func TestRunRefusesABundleThatDoesNotVerify(t *testing.T) {
	// B's stored aggregates claim A's figures, but its records are the
	// regressed ones (its digests re-made over the change): a gate must
	// never pass on figures verify rejects, so Run refuses B and says why.
	a, b := pair(true)
	b.Aggregates = a.Aggregates
	dirA, dirB := t.TempDir(), t.TempDir()
	writeVerifiable(t, dirA, a)
	writeVerifiable(t, dirB, b)
	var out bytes.Buffer
	_, err := Run(context.Background(), Options{A: dirA, B: dirB, Gates: mustGates(t, "goodput<-5%")}, &out)
	var ue *bundle.UnverifiedError
	if !errors.As(err, &ue) || ue.Dir != dirB || !strings.HasPrefix(err.Error(), "bundle B: "+dirB+" does not verify") {
		t.Fatalf("got %v, want bundle B refused as not verifying", err)
	}
	var named bool
	for _, p := range ue.Problems {
		named = named || strings.Contains(p.String(), "goodput_tok_s.median: stored")
	}
	if !named {
		t.Errorf("problems %v do not name the stored median", ue.Problems)
	}
	if out.Len() != 0 {
		t.Errorf("a comparison was written: %q", out.String())
	}
}

// writeVerifiable writes res as a bundle with its manifest.
func writeVerifiable(t *testing.T, dir string, res *bundle.Results) {
	t.Helper()
	if err := bundle.WriteResults(dir, res); err != nil {
		t.Fatal(err)
	}
	if err := bundle.WriteSumsKnown(dir, nil); err != nil {
		t.Fatal(err)
	}
}
