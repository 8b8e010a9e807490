package search

import (
	"testing"
)

func steerConfig() Config {
	c := baseConfig()
	c.Max, c.MinRequests, c.Screen, c.Steer = 256, 73, true, true
	return c
}

// margined is a server whose margin at C clients is 0.5 + 0.4·C/capacity up
// to its capacity (0.9 there: it passes) and, above it, jumps to 5 and
// climbs (a batch limit: a queue forms) or, gentle, climbs from 0.9 by
// 0.15 per client. A screen fails where the margin is above 1; a full
// probe passes at or below 1 and fails above.
func margined(capacity int, gentle bool) func(Probe) Outcome {
	return func(p Probe) Outcome {
		c := float64(p.Load)
		q := 0.5 + 0.4*c/float64(capacity)
		if p.Load > capacity {
			q = 5 + 0.05*(c-float64(capacity))
			if gentle {
				q = 0.9 + 0.15*(c-float64(capacity))
			}
		}
		var o Outcome
		switch {
		case q > 1:
			o = scripted(VerdictFail)
		case p.Screen:
			o = screenedOutcome()
		default:
			o = scripted(VerdictPass)
		}
		o.Margin = &q
		return o
	}
}

func TestSteeredSearch(t *testing.T) {
	cases := []struct {
		name    string
		f       func(Probe) Outcome
		probes  string
		reason  string
		bracket Bracket
	}{
		// The screens start at 8 clients (a screen of 16 requests in two
		// rounds); the line through the screens' margins at 64 and 128
		// crosses 1 at 65, above a batch limit of 64: the bracket has
		// converged on a load only screened, which is probed in full.
		{name: "a batch limit the doubling stops at", f: margined(64, false),
			probes: "8s 16s 32s 64s 128s 65 64 64+ 65+", reason: StopConverged, bracket: Bracket{64, 65}},
		// The line lands at 65, below the limit of 66; bisection goes on.
		{name: "a batch limit above it", f: margined(66, false),
			probes: "8s 16s 32s 64s 128s 65 96 80 72 68 65+ 68+", reason: StopConverged, bracket: Bracket{65, 68}},
		{name: "a gentle climb", f: margined(40, true),
			probes: "8s 16s 32s 64s 34 49 41 37 39 40 40+ 41+", reason: StopConverged, bracket: Bracket{40, 41}},
		{name: "one client fails", f: margined(0, false),
			probes: "8s 4 2 1 1+", reason: StopUnmetAtMinimum, bracket: Bracket{0, 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := drive(t, steerConfig(), tc.f)
			if got := probeNames(r); got != tc.probes {
				t.Errorf("probes %s, want %s", got, tc.probes)
			}
			if r.StopReason != tc.reason || (Bracket{r.MaxPass, r.MinFail}) != tc.bracket {
				t.Errorf("stop %s at [%d, %d], want %s at %v", r.StopReason, r.MaxPass, r.MinFail, tc.reason, tc.bracket)
			}
		})
	}
}

// TestSteeredSearchUnresolvedIsNotRetried: an unresolved probe ends the
// bracket above, unresolved, with no retry; the search goes on below it.
func TestSteeredSearchUnresolvedIsNotRetried(t *testing.T) {
	f := func(p Probe) Outcome {
		o := margined(66, false)(p)
		if !p.Screen && p.Load > 66 {
			o = scripted(VerdictUnresolved)
			q := 1.2
			o.Margin = &q
		}
		return o
	}
	r := drive(t, steerConfig(), f)
	if got, want := probeNames(r), "8s 16s 32s 64s 128s 65 96 80 72 68 65+ 68+"; got != want {
		t.Errorf("probes %s, want %s", got, want)
	}
	if r.StopReason != StopCapReached || r.MaxPass != 65 || r.MinFail != 68 || !r.MinFailUnresolved {
		t.Errorf("%s at [%d, %d] (unresolved %v), want cap_reached at [65, 68], unresolved", r.StopReason, r.MaxPass, r.MinFail, r.MinFailUnresolved)
	}
}

// TestSteeredSearchScreenedEndFailsInFull: a screen that let a load
// through which then fails in full sends the search below it.
func TestSteeredSearchScreenedEndFailsInFull(t *testing.T) {
	f := func(p Probe) Outcome {
		if p.Screen {
			return margined(100, false)(p)
		}
		return margined(50, false)(p)
	}
	r := drive(t, steerConfig(), f)
	if got, want := probeNames(r), "8s 16s 32s 64s 128s 67 64 48 56 52 50 50+ 52+"; got != want || r.StopReason != StopConverged || r.MaxPass != 50 || r.MinFail != 52 {
		t.Errorf("%s at [%d, %d], probes %s; want converged at [50, 52], probes %s", r.StopReason, r.MaxPass, r.MinFail, got, want)
	}
}

// TestSteeredSearchBracketsEveryCapacity: for every capacity from 1 to
// 255, steep or gentle, the steered search converges on a bracket that
// holds it, in at most 7 full probes (bisection from [C, 2C] to 5 % takes
// about 4, the line's probe one, and the ends' confirmations two).
func TestSteeredSearchBracketsEveryCapacity(t *testing.T) {
	for _, gentle := range []bool{false, true} {
		worst := 0
		for capacity := 1; capacity < 256; capacity++ {
			r := drive(t, steerConfig(), margined(capacity, gentle))
			if r.StopReason != StopConverged || r.MaxPass > capacity || r.MinFail <= capacity || !Converged(r.MaxPass, r.MinFail) {
				t.Fatalf("capacity %d (gentle %v): %s at [%d, %d]; probes %s", capacity, gentle, r.StopReason, r.MaxPass, r.MinFail, probeNames(r))
			}
			full := 0
			for _, p := range r.Probes {
				if !p.Screen && p.Repeat == 0 {
					full++
				}
			}
			worst = max(worst, full)
		}
		if worst > 7 {
			t.Errorf("gentle %v: up to %d full probes before the repeats, want at most 7", gentle, worst)
		}
	}
}

// TestSteeredSearchCost compares the full probes (repeats left out) the
// steered search spends with bisection's over the same servers.
func TestSteeredSearchCost(t *testing.T) {
	for _, gentle := range []bool{false, true} {
		var steered, bisected, worse int
		for capacity := 1; capacity < 256; capacity++ {
			cfg := steerConfig()
			a := fullProbes(drive(t, cfg, margined(capacity, gentle)))
			cfg.Steer = false
			b := fullProbes(drive(t, cfg, margined(capacity, gentle)))
			steered, bisected = steered+a, bisected+b
			if a > b+2 {
				worse++
				t.Logf("capacity %d gentle %v: %d full probes steered, %d bisected", capacity, gentle, a, b)
			}
		}
		t.Logf("gentle %v: %d full probes steered, %d bisected, over 255 capacities", gentle, steered, bisected)
		if worse > 0 {
			t.Errorf("gentle %v: %d capacities took more than two full probes beyond bisection's", gentle, worse)
		}
	}
}

func fullProbes(r Result) int {
	n := 0
	for _, p := range r.Probes {
		if !p.Screen && p.Repeat == 0 {
			n++
		}
	}
	return n
}
