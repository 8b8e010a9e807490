package search

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/contract"
)

func screenConfig() Config {
	c := baseConfig()
	c.Screen = true
	return c
}

// screenedOutcome is a screen that did not fail its load: 16 of 16 good.
func screenedOutcome() Outcome {
	lo, hi := contract.Wilson(16, 16)
	return Outcome{N: 16, Good: 16, Attainment: 1, CILow: lo, CIHigh: hi, Verdict: VerdictScreened}
}

// screened fails a screen above screenFails and a full probe above
// capacity; it passes the rest (a screen: screened).
func screened(capacity, screenFails int) func(Probe) Outcome {
	return func(p Probe) Outcome {
		switch {
		case p.Screen && p.Load > screenFails:
			return scripted(VerdictFail)
		case p.Screen:
			return screenedOutcome()
		}
		return step(capacity)(p)
	}
}

// probeNames is a result's probes as "LOAD" for a full probe, "LOADs" for
// a screen, "LOADr" for a retry and "LOAD+" for a repeat.
func probeNames(r Result) string {
	var out []string
	for _, p := range r.Probes {
		s := fmt.Sprint(p.Load)
		switch {
		case p.Screen:
			s += "s"
		case p.Retry:
			s += "r"
		case p.Repeat > 0:
			s += "+"
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

func TestScreenedSearch(t *testing.T) {
	cases := []struct {
		name    string
		cfg     func(*Config)
		f       func(Probe) Outcome
		probes  string
		reason  string
		bracket Bracket
	}{
		{name: "the largest screened load passes in full", f: screened(18, 18),
			probes: "1s 2s 4s 8s 16s 32s 16 24 20 18 19 18+ 19+", reason: StopConverged, bracket: Bracket{18, 19}},
		{name: "the largest screened load fails in full", f: screened(10, 16),
			probes: "1s 2s 4s 8s 16s 32s 16 8 12 10 11 10+ 11+", reason: StopConverged, bracket: Bracket{10, 11}},
		{name: "every screened load fails in full", f: screened(0, 4),
			probes: "1s 2s 4s 8s 4 2 1 1+", reason: StopUnmetAtMinimum, bracket: Bracket{0, 1}},
		{name: "the first screen fails", f: screened(0, 0),
			probes: "1s 1+", reason: StopUnmetAtMinimum, bracket: Bracket{0, 1}},
		{name: "the maximum is probed in full and passes", cfg: func(c *Config) { c.Max = 20 }, f: screened(1000, 1000),
			probes: "1s 2s 4s 8s 16s 20 20+", reason: StopMaxConcurrency, bracket: Bracket{20, 0}},
		{name: "the maximum fails in full", cfg: func(c *Config) { c.Max = 20 }, f: screened(17, 1000),
			probes: "1s 2s 4s 8s 16s 20 16 18 17 17+ 18+", reason: StopConverged, bracket: Bracket{17, 18}},
		{name: "a start at the maximum is a full probe", cfg: func(c *Config) { c.Start, c.Max = 8, 8 }, f: screened(1000, 1000),
			probes: "8 8+", reason: StopMaxConcurrency, bracket: Bracket{8, 0}},
		{name: "an unresolved full probe of a screened load is retried", f: func(p Probe) Outcome {
			if p.Load == 16 && !p.Screen {
				return scripted(VerdictUnresolved)
			}
			return screened(12, 16)(p)
		}, probes: "1s 2s 4s 8s 16s 32s 16 16r 8 12 14 13 12+ 13+", reason: StopConverged, bracket: Bracket{12, 13}},
		{name: "a screen as large as a first look is a full probe", cfg: func(c *Config) { c.MinRequests = 73 }, f: screened(66, 66),
			probes: "1s 2s 4s 8s 16s 32 64 128 96 80 72 68 66 66+ 68+", reason: StopConverged, bracket: Bracket{66, 68}},
		{name: "a predicted bracket is probed in full first", cfg: func(c *Config) { c.Predicted = &Bracket{8, 12} }, f: screened(30, 30),
			probes: "8 12 24s 48s 24 36 30 33 31 30+ 31+", reason: StopConverged, bracket: Bracket{30, 31}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := screenConfig()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			r := drive(t, cfg, tc.f) // drive checks that Replay agrees
			if got := probeNames(r); got != tc.probes {
				t.Errorf("probed %s\nwant    %s", got, tc.probes)
			}
			if r.StopReason != tc.reason || (Bracket{r.MaxPass, r.MinFail}) != tc.bracket {
				t.Errorf("stop %q at [%d, %d]: want %q at %v", r.StopReason, r.MaxPass, r.MinFail, tc.reason, tc.bracket)
			}
			if len(r.NonMonotonic) != 0 {
				t.Errorf("flagged non-monotonic: %v", r.NonMonotonic)
			}
		})
	}
}

// Without Screen the search is the one before screens: every probe full.
func TestScreenOffProbesInFull(t *testing.T) {
	r := drive(t, baseConfig(), screened(18, 18))
	for _, p := range r.Probes {
		if p.Screen || p.Outcome.Verdict == VerdictScreened {
			t.Fatalf("a search without screens ran %v (%s)", p, p.Outcome.Verdict)
		}
	}
}

func TestScreenCanOnlyFail(t *testing.T) {
	s, err := New(screenConfig())
	if err != nil {
		t.Fatal(err)
	}
	p, _ := s.Next()
	if !p.Screen || p.Kind() != ProbeScreen {
		t.Fatalf("first probe %v (%s): want a screen", p, p.Kind())
	}
	for _, v := range []string{VerdictPass, VerdictUnresolved} {
		if err := s.Observe(p, scripted(v)); err == nil || !strings.Contains(err.Error(), "can only fail") {
			t.Errorf("a screen observed as %s: err %v", v, err)
		}
	}
	if err := s.Observe(p, screenedOutcome()); err != nil {
		t.Fatal(err)
	}
	// Replay of a run whose full probe claims "screened" is refused, and so
	// is one whose screen is recorded as a full probe.
	full := Probe{Load: 1, Outcome: screenedOutcome()}
	if _, err := Replay(screenConfig(), []Probe{full}); err == nil || !strings.Contains(err.Error(), "(screen)") {
		t.Errorf("a full probe where the search asks for a screen: err %v", err)
	}
	if _, err := Replay(baseConfig(), []Probe{full}); err == nil || !strings.Contains(err.Error(), "not a screen") {
		t.Errorf("a full probe with verdict screened: err %v", err)
	}
}

func TestScreenSizeAndVerdict(t *testing.T) {
	for _, tc := range []struct{ min, load, want int }{
		{73, 1, 16}, {73, 2, 16}, {73, 4, 16}, {73, 8, 32}, {73, 16, 64}, {73, 18, 72}, {73, 19, 76}, {73, 64, 256}, {10, 1, 10},
	} {
		if got := ScreenSize(tc.min, tc.load); got != tc.want {
			t.Errorf("ScreenSize(%d, %d) = %d, want %d", tc.min, tc.load, got, tc.want)
		}
	}
	at := func(good, n int) contract.Attainment {
		lo, hi := contract.Wilson(good, n)
		return contract.Attainment{N: n, Good: good, CILow: lo, CIHigh: hi}
	}
	for _, tc := range []struct {
		good, n, size int
		want          string
	}{
		{16, 16, 16, VerdictScreened}, {13, 16, 16, VerdictFail}, {15, 16, 16, VerdictScreened},
		{0, 8, 16, VerdictScreened}, // cut short by a duration cap: it cannot fail
		{0, 0, 16, VerdictScreened},
	} {
		if got := ScreenVerdict(at(tc.good, tc.n), 0.95, tc.size); got != tc.want {
			t.Errorf("ScreenVerdict(%d/%d, size %d) = %s, want %s", tc.good, tc.n, tc.size, got, tc.want)
		}
	}
	if !reflect.DeepEqual(Spec{MinRequests: 73, MaxRequests: 584}.Config(0.95).Screen, false) {
		t.Error("a spec without screen (an old bundle) must replay without screens")
	}
}
