package compare

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/golden"
	"github.com/rehearse/rehearse/internal/plot/plottest"
	"github.com/rehearse/rehearse/internal/search"
)

// capacityPair is two synthetic capacity searches of the same two servers
// with different seeds; regress slows B's batching server's decoding by a
// third, which lowers the load at which its TPOT objective holds.
func capacityPair(t *testing.T, regress bool) (a, b *bundle.Results) {
	t.Helper()
	oa := plottest.DefaultCapacity()
	ob := plottest.DefaultCapacity()
	ob.Seed = oa.Seed + 1
	if regress {
		ob.Servers[1].TPOTS *= 4.0 / 3
	}
	a, b = plottest.CapacityResults(oa), plottest.CapacityResults(ob)
	for _, r := range []*bundle.Results{a, b} {
		if probs := bundle.VerifyResults(r); len(probs) > 0 {
			t.Fatalf("fixture does not verify: %v", probs)
		}
	}
	return a, b
}

func capacityOf(r *bundle.Results, server string) int {
	for _, c := range r.Capacity {
		if c.Server == server && c.MaxPass != nil {
			return *c.MaxPass
		}
	}
	return -1
}

func TestCapacityGateTripsOnARegression(t *testing.T) {
	a, b := capacityPair(t, true)
	if ca, cb := capacityOf(a, "batching"), capacityOf(b, "batching"); cb >= ca*9/10 {
		t.Fatalf("fixture: batching capacity %d → %d should fall by more than 10%%", ca, cb)
	}
	r := compareSides(side{res: a}, side{res: b}, mustGates(t, "capacity<-10%", "naive:capacity<-10%", "batching:capacity<-1000", "capacity>+50%"))
	if len(r.Capacity) != 2 || r.Capacity[0].Server != "naive" || r.Capacity[1].Server != "batching" {
		t.Fatalf("capacity rows %+v", r.Capacity)
	}
	row := r.Capacity[1]
	if row.Ratio == nil || *row.Ratio >= 0.9 {
		t.Errorf("batching ratio %v", row.Ratio)
	}
	tripped := strings.Join(r.Tripped(), "\n")
	want := "capacity<-10%: capacity of batching: " + row.A.Text() + " → " + row.B.Text() + " ("
	if !strings.Contains(tripped, want) {
		t.Errorf("tripped %q, want %q", tripped, want)
	}
	for _, g := range []string{"naive:capacity", "batching:capacity<-1000", "capacity>+50%"} {
		if strings.Contains(tripped, g) {
			t.Errorf("gate %s tripped: %q", g, tripped)
		}
	}
	for _, g := range r.Gates {
		if g.Evaluated == 0 {
			t.Errorf("gate %s evaluated on nothing: %q", g.Gate.Text, g.Skipped)
		}
	}
	var txt, md bytes.Buffer
	if err := r.Text(&txt); err != nil {
		t.Fatal(err)
	}
	if err := r.Markdown(&md); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "capacity.txt", txt.Bytes())
	golden.Check(t, "capacity.md", md.Bytes())
}

func TestCapacityGateUnchanged(t *testing.T) {
	a, b := capacityPair(t, false)
	r := compareSides(side{res: a}, side{res: b}, mustGates(t, "capacity<-10%"))
	if len(r.Tripped()) != 0 {
		t.Errorf("an unchanged search tripped: %q (capacities %s → %s, %s → %s)", r.Tripped(),
			r.Capacity[0].A.Text(), r.Capacity[0].B.Text(), r.Capacity[1].A.Text(), r.Capacity[1].B.Text())
	}
}

// A gate with no capacity to test trips (it must not pass silently), and
// says why.
func TestCapacityGateWithoutCapacity(t *testing.T) {
	a, b := pair(false)
	r := compareSides(side{res: a}, side{res: b}, mustGates(t, "capacity<-10%"))
	g := r.Gates[0]
	if g.Evaluated != 0 || len(r.Tripped()) != 1 || len(g.Skipped) != 1 || !strings.Contains(g.Skipped[0], "no server's capacity was searched in both bundles") {
		t.Errorf("evaluated %d, skipped %q, tripped %q", g.Evaluated, g.Skipped, r.Tripped())
	}
	ca, _ := capacityPair(t, false)
	r = compareSides(side{res: ca}, side{res: b}, nil)
	if len(r.Capacity) != 0 || !strings.Contains(strings.Join(r.OnlyA, ","), "capacity of batching") {
		t.Errorf("capacity rows %v, only in A %q", r.Capacity, r.OnlyA)
	}
}

func capEntry(maxPass int, stop string) search.Capacity {
	c := search.Capacity{Server: "s", StopReason: stop}
	if maxPass > 0 {
		c.MaxPass = &maxPass
	}
	return c
}

// A lower bound decides a gate only when it cannot be what trips or
// passes it; an unmet search is a capacity of 0; a search without an
// answer is skipped.
func TestCapacityGateBounds(t *testing.T) {
	for _, c := range []struct {
		gate       string
		a, b       search.Capacity
		evaluated  bool
		tripped    bool
		skipReason string
	}{
		{"capacity<-10%", capEntry(64, search.StopMaxConcurrency), capEntry(40, search.StopConverged), true, true, ""},
		{"capacity<-10%", capEntry(40, search.StopConverged), capEntry(32, search.StopMaxConcurrency), false, false, "only a lower bound"},
		{"capacity<-10%", capEntry(40, search.StopConverged), capEntry(64, search.StopMaxConcurrency), true, false, ""},
		{"capacity<-10%", capEntry(64, search.StopMaxConcurrency), capEntry(64, search.StopConverged), false, false, "only a lower bound"},
		{"capacity<-10%", capEntry(8, search.StopConverged), capEntry(0, search.StopUnmetAtMinimum), true, true, ""},
		{"capacity<-10%", capEntry(0, search.StopUnmetAtMinimum), capEntry(8, search.StopConverged), false, false, "A's capacity is 0"},
		{"capacity<-2", capEntry(0, search.StopUnmetAtMinimum), capEntry(8, search.StopConverged), true, false, ""},
		{"capacity<-10%", capEntry(8, search.StopConverged), capEntry(0, search.StopServerFailed), false, false, "B has no capacity answer (the search stopped: server_failed)"},
		{"capacity>+10%", capEntry(40, search.StopConverged), capEntry(64, search.StopMaxConcurrency), true, true, ""},
		{"capacity>+10%", capEntry(64, search.StopMaxConcurrency), capEntry(80, search.StopConverged), false, false, "only a lower bound"},
	} {
		rows := []CapacityRow{{Server: "s", A: capacitySide(c.a), B: capacitySide(c.b)}}
		g := mustGates(t, c.gate)[0]
		res := evaluateCapacity(g, rows)
		if (res.Evaluated == 1) != c.evaluated || (len(res.Tripped) == 1) != c.tripped {
			t.Errorf("%s, %s → %s: evaluated %d, tripped %q, skipped %q", c.gate, rows[0].A.Text(), rows[0].B.Text(), res.Evaluated, res.Tripped, res.Skipped)
		}
		if c.skipReason != "" && (len(res.Skipped) != 1 || !strings.Contains(res.Skipped[0], c.skipReason)) {
			t.Errorf("%s, %s → %s: skipped %q, want %q", c.gate, rows[0].A.Text(), rows[0].B.Text(), res.Skipped, c.skipReason)
		}
	}
}

func TestRunCapacityBundles(t *testing.T) {
	a, b := capacityPair(t, true)
	dirA, dirB := t.TempDir(), t.TempDir()
	writeVerifiable(t, dirA, a)
	writeVerifiable(t, dirB, b)
	var out bytes.Buffer
	r, err := Run(context.Background(), Options{A: dirA, B: dirB, Gates: mustGates(t, "capacity<-10%")}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Tripped()) != 1 || !strings.Contains(out.String(), "Capacity under the SLO:") {
		t.Errorf("tripped %q\n%s", r.Tripped(), out.String())
	}
}
