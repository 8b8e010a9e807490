package bundle_test

import (
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/bundle/bundletest"
	"github.com/rehearse/rehearse/internal/contract"
)

// sloLike is the seed-like results judged against objectives some requests
// miss.
func sloLike(t *testing.T) *bundle.Results {
	t.Helper()
	res := bundletest.SeedLike()
	o, err := contract.ParseObjectives("ttft<=500ms,tpot<=50ms")
	if err != nil {
		t.Fatal(err)
	}
	res.SLO = contract.NewSLO(o, 0.9)
	res.Recompute()
	return res
}

func TestVerifyRecomputesSLO(t *testing.T) {
	res := sloLike(t)
	good := 0
	for _, a := range res.Aggregates {
		if a.SLO == nil {
			t.Fatalf("%s %s: no slo field", a.Server, a.LoadLabel())
		}
		good += a.SLO.Good
	}
	if good == 0 || good == len(res.Records) {
		t.Fatalf("%d good of %d: the test needs some requests good and some not", good, len(res.Records))
	}
	if probs := bundletest.Verify(writeBundle(t, res)); len(probs) != 0 {
		t.Fatalf("a fresh bundle with objectives must verify, got %v", probs)
	}
}

func TestVerifyCatchesTamperedSLO(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tamper func(*bundle.Results)
		want   string
	}{
		{"good count raised", func(r *bundle.Results) { r.Aggregates[0].SLO.Good++ }, "slo.good: stored"},
		{"attainment raised", func(r *bundle.Results) {
			v := *r.Aggregates[1].SLO.Attainment + 0.1
			r.Aggregates[1].SLO.Attainment = &v
		}, "slo.attainment: stored"},
		{"objective loosened", func(r *bundle.Results) {
			v := 60000.0
			r.SLO.Objectives.TTFTMS = &v
			r.SLO.Expr = r.SLO.Objectives.String()
		}, "recomputed"},
		{"expr out of step", func(r *bundle.Results) { r.SLO.Expr = "ttft<=5s" }, `slo.expr: stored "ttft<=5s"`},
		{"target outside (0, 1)", func(r *bundle.Results) { r.SLO.AttainmentTarget = 1 }, "slo.attainment_target"},
		{"limit not positive", func(r *bundle.Results) {
			v := -1.0
			r.SLO.Objectives.TPOTMS = &v
		}, "slo.objectives.tpot_ms: objective tpot: -1 ms is not a positive limit"},
		{"slo block dropped", func(r *bundle.Results) { r.SLO = nil }, "slo: stored"},
	} {
		res := sloLike(t)
		tc.tamper(res)
		var msgs []string
		for _, p := range bundletest.Verify(writeBundle(t, res)) {
			msgs = append(msgs, p.String())
		}
		if joined := strings.Join(msgs, "\n"); !strings.Contains(joined, tc.want) {
			t.Errorf("%s: problems %q do not contain %q", tc.name, joined, tc.want)
		}
	}
}

func TestJournalKeepsSLO(t *testing.T) {
	res := sloLike(t)
	dir := t.TempDir()
	j, err := bundle.CreateJournal(dir + "/" + bundle.JournalFile)
	if err != nil {
		t.Fatal(err)
	}
	header := *res
	header.Waves, header.Records, header.Aggregates = nil, nil, nil
	if err := j.WriteHeader(&header); err != nil {
		t.Fatal(err)
	}
	for i := range res.Waves {
		j.WriteWave(res.Waves[i])
		for _, r := range res.Records {
			if r.Wave == res.Waves[i].ID {
				j.WriteRecord(r)
			}
		}
		j.WriteWave(res.Waves[i])
	}
	j.Close()
	got, err := bundle.ReadJournal(dir + "/" + bundle.JournalFile)
	if err != nil {
		t.Fatal(err)
	}
	if got.SLO == nil || got.SLO.Expr != res.SLO.Expr || got.Aggregates[0].SLO == nil || got.Aggregates[0].SLO.Good != res.Aggregates[0].SLO.Good {
		t.Fatalf("journal lost the slo: %+v", got.SLO)
	}
}

func TestMergeRefusesDifferentObjectives(t *testing.T) {
	a := sloLike(t)
	b := bundletest.SeedLike()
	_, err := bundletest.Merge(t, []*bundle.Results{a, b}, []string{"partA", "partB"}, bundle.MergeOptions{MechanismServer: "batching"})
	if err == nil || !strings.Contains(err.Error(), `partB: slo (none) differs from partA's "ttft<=500ms,tpot<=50ms" at 0.9`) {
		t.Fatalf("got %v", err)
	}
}
