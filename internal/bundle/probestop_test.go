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
	if err := bundle.WriteSumsKnown(dir, nil); err != nil {
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
// verifies; one whose probe stopped on its rule at a prefix of its
// requests sent whose verdict is unresolved, or after an earlier look
// point's prefix had resolved, sent a request after the look that stopped
// it, lost its send order, or stayed unresolved without reaching its cap,
// is refused; one made by the rule before (no send order: the requests
// in flight pending) verifies by that rule; one from before the rule was
// recorded verifies, with a note that its stops are not replayed.
func TestVerifyReplaysProbeStops(t *testing.T) {
	// Wave 0 is the serial server's probe at 1 client: 80 of 80 good, a
	// pass at its second look (min_requests 40), below its cap of 160.
	build := func() (*bundle.Results, *contract.Wave) {
		res := plottest.CapacityResults(plottest.DefaultCapacity())
		w := &res.Waves[0]
		if w.Probe == "" || w.EndedBy != contract.EndedUntil || w.Look == nil || *w.Look != (contract.Look{Prefix: 80, Ended: 80, Sent: 80}) {
			t.Fatalf("wave 0: %+v: want a probe ended by its stop rule at the first 80 of 80", *w)
		}
		return res, w
	}
	// missWhere makes the wave's records at the places in the send order
	// that pick picks miss the TTFT objective (2 s).
	missWhere := func(res *bundle.Results, w *contract.Wave, pick func(j int) bool) {
		for i := range res.Records {
			r := &res.Records[i]
			if r.Wave != w.ID || !pick(*r.Request) {
				continue
			}
			first := *r.FirstContentS + 2.5
			r.FirstContentS = &first
			for k := range r.ChunkTimesS {
				r.ChunkTimesS[k] += 2.5
			}
			r.EndS += 2.5
		}
		w.WallS = 0
		for _, r := range res.Records {
			if r.Wave == w.ID {
				w.WallS = max(w.WallS, r.EndS)
			}
		}
		res.Recompute() // the aggregates, not the stored capacity entry
	}
	// miss makes the wave's last record miss: 79 of 80 good is
	// unresolved at α 0.95.
	miss := func(res *bundle.Results, w *contract.Wave) { missWhere(res, w, func(j int) bool { return j == 79 }) }
	// forget drops every record's place in the send order, and the
	// looks' prefixes: the bundle the rule before made.
	forget := func(res *bundle.Results, _ *contract.Wave) {
		for i := range res.Records {
			res.Records[i].Request = nil
		}
		for i := range res.Waves {
			if l := res.Waves[i].Look; l != nil {
				l.Prefix = 0
			}
		}
	}
	waveRecord := func(res *bundle.Results, w *contract.Wave, j int) *contract.Record {
		for i := range res.Records {
			if r := &res.Records[i]; r.Wave == w.ID && *r.Request == j {
				return r
			}
		}
		t.Fatalf("wave %d has no request %d", w.ID, j)
		return nil
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
		{"unresolved after its stop", miss, "at the first 80 sent, yet their verdict is unresolved"},
		{"stopped past a resolved look", func(res *bundle.Results, w *contract.Wave) {
			missWhere(res, w, func(j int) bool { return j < 40 })
		}, "the verdict over the first 40 was resolved already"},
		{"stopped before its prefix resolved", func(_ *bundle.Results, w *contract.Wave) { w.Look.Prefix = 40 }, "at the first 40 sent, yet their verdict is unresolved"},
		{"sent after the look", func(_ *bundle.Results, w *contract.Wave) { w.Look.Sent = 79 }, "a request was sent after the look"},
		{"not at a look point", func(_ *bundle.Results, w *contract.Wave) { w.Look.Prefix = 60 }, "not a look point"},
		{"send order lost", func(res *bundle.Results, w *contract.Wave) { waveRecord(res, w, 5).Request = nil }, "79 of its 80 records carry their place"},
		{"send order twice", func(res *bundle.Results, w *contract.Wave) {
			j := 4
			waveRecord(res, w, 5).Request = &j
		}, "place 5 is 4"},
		{"prefix without send order", func(res *bundle.Results, w *contract.Wave) {
			forget(res, w)
			w.Look.Prefix = 80
		}, "yet its records carry no place in the send order"},
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
