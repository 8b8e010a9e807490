package search

import (
	"testing"

	"github.com/rehearse/rehearse/internal/contract"
)

// TestMinPass: a probe is sized from α: MinPass is the fewest requests, all
// good, whose interval passes α, and one fewer cannot pass.
func TestMinPass(t *testing.T) {
	for _, tc := range []struct {
		alpha float64
		want  int
	}{{0.95, 73}, {0.9, 35}, {0.99, 381}, {0.5, 4}, {0, 0}, {1, 0}} {
		got := MinPass(tc.alpha)
		if got != tc.want {
			t.Errorf("MinPass(%v) = %d, want %d", tc.alpha, got, tc.want)
			continue
		}
		if got == 0 {
			continue
		}
		if v := contract.AttainmentOf(got, got).Verdict(tc.alpha, 1); v != VerdictPass {
			t.Errorf("α %v: %d of %d good is %s, want a pass", tc.alpha, got, got, v)
		}
		if v := contract.AttainmentOf(got-1, got-1).Verdict(tc.alpha, 1); v == VerdictPass {
			t.Errorf("α %v: %d of %d good passes: MinPass is not the fewest", tc.alpha, got-1, got-1)
		}
	}
}

// TestCapsLeaveTwoLooks: at a load whose first look (LookUnit, four
// rounds) passes max_requests, a probe's request cap still leaves it two
// looks, so a load near α can resolve; a retry doubles it; below, the cap
// is max_requests.
func TestCapsLeaveTwoLooks(t *testing.T) {
	s := Spec{MinRequests: 73, MaxRequests: 584}
	for _, c := range []struct {
		kind string
		load int
		want int
	}{
		{ProbeSearch, 1, 584},
		{ProbeSearch, 64, 584},
		{ProbeSearch, 128, 1024},
		{ProbeRetry, 128, 2048},
		{ProbeSearch, 256, 2048},
	} {
		if got, _ := s.Caps(c.kind, c.load); got != c.want {
			t.Errorf("%s at %d clients: cap %d, want %d", c.kind, c.load, got, c.want)
		}
	}
	if got, _ := (Spec{MinRequests: 73}).Caps(ProbeSearch, 256); got != 0 {
		t.Errorf("no max_requests: cap %d, want none", got)
	}
}
