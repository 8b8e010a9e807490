package bundle_test

import (
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/plot/plottest"
)

// TestVerifySteady: verify recomputes the steady figures of a sustained
// aggregate and of a capacity probe where they are stored, refusing a
// changed one, and accepts a bundle that stores none (SPEC §4a: checked
// when present, never required).
func TestVerifySteady(t *testing.T) {
	res := plottest.CapacityResults(plottest.DefaultCapacity())
	a, p := &res.Aggregates[0], &res.Capacity[0].Probes[0]
	if a.Steady == nil || a.Steady.Windows[0].StartS == nil || p.Steady == nil || p.Steady.StartS == nil {
		t.Fatalf("aggregate steady %+v, probe steady %+v: want both, with a window", a.Steady, p.Steady)
	}
	if probs, _ := verifyCapacity(t, res); probs != "" {
		t.Fatalf("the bundle as written: %s", probs)
	}

	*a.Steady.Goodput.Median *= 1.1
	probs, _ := verifyCapacity(t, res)
	if !strings.Contains(probs, "steady.goodput_tok_s.median") {
		t.Errorf("a changed steady goodput: problems %q", probs)
	}
	*a.Steady.Goodput.Median /= 1.1

	p.Steady.N++
	probs, _ = verifyCapacity(t, res)
	if !strings.Contains(probs, "probes[0].steady.n") {
		t.Errorf("a changed probe's steady count: problems %q", probs)
	}

	for i := range res.Aggregates {
		res.Aggregates[i].Steady = nil
	}
	for i := range res.Capacity[0].Probes {
		res.Capacity[0].Probes[i].Steady = nil
	}
	if probs, _ := verifyCapacity(t, res); probs != "" {
		t.Errorf("a bundle without steady figures: %s", probs)
	}
}
