package bundle_test

import (
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle/bundletest"
	"github.com/rehearse/rehearse/internal/contract"
)

// TestVerifyChecksHostHonestyForm: sane client stalls and server slip
// verify; impossible ones are named.
func TestVerifyChecksHostHonestyForm(t *testing.T) {
	res := bundletest.SeedLike()
	res.Waves[0].ClientStalls = &contract.Stalls{PeriodS: 0.005, Ticks: 100, MaxS: 0.03, P99S: 0.01, Over: 1}
	res.Waves[0].ServerSlip = &contract.ServerSlip{Steps: 50, Late: 2, MaxS: 0.05, SlipS: 0}
	if probs := bundletest.Verify(writeBundle(t, res)); len(probs) != 0 {
		t.Fatalf("sane stalls and slip: %v", probs)
	}
	res.Waves[1].ClientStalls = &contract.Stalls{PeriodS: 0.005, Ticks: 10, MaxS: 0.01, P99S: 0.02, Over: 11}
	res.Waves[2].ClientStalls = &contract.Stalls{PeriodS: 0.005, Ticks: 10, MaxS: -1}
	res.Waves[3].ServerSlip = &contract.ServerSlip{Steps: 5, Late: 6}
	var msgs []string
	for _, p := range bundletest.Verify(writeBundle(t, res)) {
		msgs = append(msgs, p.String())
	}
	joined := strings.Join(msgs, "\n")
	for _, want := range []string{
		"waves[1].client_stalls: 10 wake-ups, 11 over 20 ms",
		"waves[2].client_stalls.max_s: -1 is not a finite, non-negative number",
		"waves[3].server_slip: 5 steps, 6 late",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("problems %q do not contain %q", joined, want)
		}
	}
	if len(msgs) != 3 {
		t.Errorf("want 3 problems, got %q", joined)
	}
}
