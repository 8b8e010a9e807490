package bundle_test

import (
	"context"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/plot/plottest"
)

// verifyCapacity writes res as a bundle (results.json signed in
// SHA256SUMS) and verifies it: its problems and notes, one per line.
func verifyCapacity(t *testing.T, res *bundle.Results) (problems, notes string) {
	t.Helper()
	dir := t.TempDir()
	if err := bundle.WriteResults(dir, res); err != nil {
		t.Fatal(err)
	}
	if err := bundle.WriteSums(dir); err != nil {
		t.Fatal(err)
	}
	rep, err := bundle.VerifyWith(context.Background(), dir, bundle.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var probs []string
	for _, p := range rep.Problems {
		probs = append(probs, p.String())
	}
	return strings.Join(probs, "\n"), strings.Join(rep.Notes, "\n")
}

// TestVerifyReplaysProbeStops: verify replays each probe's stop from the
// records behind it (SPEC §8). A search whose probes say why they ended
// verifies; one whose probe stopped on its rule with an unresolved verdict
// over its records, sent a request after the look that stopped it, or
// stayed unresolved without reaching its cap, is refused; one from before
// the rule was recorded verifies, with a note that its stops are not
// replayed.
func TestVerifyReplaysProbeStops(t *testing.T) {
	// Wave 0 is the serial server's probe at 1 client: 80 of 80 good, a
	// pass at its second look (min_requests 40), below its cap of 160.
	build := func() (*bundle.Results, *contract.Wave) {
		res := plottest.CapacityResults(plottest.DefaultCapacity())
		w := &res.Waves[0]
		if w.Probe == "" || w.EndedBy != contract.EndedUntil || w.Look == nil || *w.Look != (contract.Look{Ended: 80, Sent: 80}) {
			t.Fatalf("wave 0: %+v: want a probe ended by its stop rule at 80 of 80", *w)
		}
		return res, w
	}
	// miss makes the wave's last record miss the TTFT objective (2 s):
	// 79 of 80 good is unresolved at α 0.95.
	miss := func(res *bundle.Results, w *contract.Wave) {
		for i := len(res.Records) - 1; i >= 0; i-- {
			r := &res.Records[i]
			if r.Wave != w.ID {
				continue
			}
			first := *r.FirstContentS + 2.5
			r.FirstContentS = &first
			for k := range r.ChunkTimesS {
				r.ChunkTimesS[k] += 2.5
			}
			r.EndS += 2.5
			break
		}
		w.WallS = 0
		for _, r := range res.Records {
			if r.Wave == w.ID {
				w.WallS = max(w.WallS, r.EndS)
			}
		}
		res.Recompute() // the aggregates, not the stored capacity entry
	}

	res, _ := build()
	if probs, notes := verifyCapacity(t, res); probs != "" || strings.Contains(notes, "predate") {
		t.Errorf("a search whose probes record their stops: problems\n%s\nnotes\n%s", probs, notes)
	}

	for _, tc := range []struct {
		name   string
		tamper func(*bundle.Results, *contract.Wave)
		want   string
	}{
		{"unresolved after its stop", miss, "yet its verdict over every record is unresolved"},
		{"sent after the look", func(_ *bundle.Results, w *contract.Wave) { w.Look.Sent = 79 }, "a request was sent after the look"},
		{"not at a look point", func(_ *bundle.Results, w *contract.Wave) { w.Look.Ended = 60 }, "not a look point"},
		{"unresolved below its cap", func(res *bundle.Results, w *contract.Wave) {
			miss(res, w)
			w.EndedBy, w.Look = contract.EndedNumRequests, nil
		}, "ended by num_requests with 80 records, its cap is 160"},
		{"no duration cap", func(_ *bundle.Results, w *contract.Wave) { w.EndedBy, w.Look = contract.EndedDuration, nil }, "before the cap of 0 s"},
	} {
		res, w := build()
		tc.tamper(res, w)
		probs, _ := verifyCapacity(t, res)
		if !strings.Contains(probs, "capacity[0]: the search does not replay from the records") || !strings.Contains(probs, tc.want) {
			t.Errorf("%s: verify does not refuse the stop (%q):\n%s", tc.name, tc.want, probs)
		}
	}

	// Before ended_by was recorded: accepted on its verdicts, with a note.
	res, _ = build()
	for i := range res.Waves {
		res.Waves[i].EndedBy, res.Waves[i].Look = "", nil
	}
	probs, notes := verifyCapacity(t, res)
	if probs != "" || !strings.Contains(notes, "capacity of naive: 6 probe waves do not record why they ended") {
		t.Errorf("a search from before ended_by: problems\n%s\nnotes\n%s", probs, notes)
	}
}
