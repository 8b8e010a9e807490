package search

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

func baseConfig() Config {
	return Config{Start: 1, Max: 1024, Alpha: 0.95, MinRequests: 200, Repeats: 1}
}

// scripted is an outcome of the given verdict whose interval agrees with it.
func scripted(v string) Outcome {
	o := Outcome{N: 400, Verdict: v, Binding: "tpot"}
	switch v {
	case VerdictPass:
		o.Good, o.CILow, o.CIHigh = 396, 0.97, 0.995
	case VerdictFail:
		o.Good, o.CILow, o.CIHigh = 300, 0.7, 0.79
	default:
		o.Good, o.CILow, o.CIHigh = 380, 0.93, 0.97
	}
	o.Attainment = float64(o.Good) / float64(o.N)
	return o
}

// drive runs a search whose probes get the verdict of f, and returns its
// result; it fails the test after 200 probes (a search that never ends).
func drive(t *testing.T, cfg Config, f func(Probe) Outcome) Result {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for range 200 {
		p, ok := s.Next()
		if !ok {
			r := s.Result()
			back, err := Replay(cfg, r.Probes)
			if err != nil {
				t.Fatalf("replay: %v", err)
			}
			if !reflect.DeepEqual(back, r) {
				t.Errorf("replay gives %+v\nthe search gave %+v", back, r)
			}
			return r
		}
		if err := s.Observe(p, f(p)); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatal("the search did not stop in 200 probes")
	return Result{}
}

func loads(r Result) []int {
	var out []int
	for _, p := range r.Probes {
		out = append(out, p.Load)
	}
	return out
}

// step passes up to capacity and fails above it.
func step(capacity int) func(Probe) Outcome {
	return func(p Probe) Outcome {
		if p.Load <= capacity {
			return scripted(VerdictPass)
		}
		return scripted(VerdictFail)
	}
}

func TestStopReasons(t *testing.T) {
	cases := []struct {
		name    string
		cfg     func(*Config)
		f       func(Probe) Outcome
		reason  string
		bracket Bracket
		loads   []int
	}{
		{name: "converged", f: step(18), reason: StopConverged, bracket: Bracket{18, 19},
			loads: []int{1, 2, 4, 8, 16, 32, 24, 20, 18, 19, 18, 19}},
		{name: "converged within 5 %", f: step(300), reason: StopConverged, bracket: Bracket{296, 304},
			loads: []int{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 384, 320, 288, 304, 296, 296, 304}},
		{name: "unmet at the minimum", cfg: func(c *Config) { c.Start = 4 }, f: step(0), reason: StopUnmetAtMinimum,
			bracket: Bracket{0, 1}, loads: []int{4, 2, 1, 1}},
		{name: "cap reached", f: func(p Probe) Outcome {
			if p.Load <= 10 {
				return scripted(VerdictPass)
			}
			return scripted(VerdictUnresolved)
		}, reason: StopCapReached, bracket: Bracket{10, 11},
			loads: []int{1, 2, 4, 8, 16, 16, 12, 12, 10, 11, 11, 10, 11}},
		{name: "max concurrency", cfg: func(c *Config) { c.Max = 20 }, f: step(1000), reason: StopMaxConcurrency,
			bracket: Bracket{20, 0}, loads: []int{1, 2, 4, 8, 16, 20, 20}},
		{name: "server failed", f: func(p Probe) Outcome {
			o := step(18)(p)
			o.ServerFailed = p.Load == 32
			return o
		}, reason: StopServerFailed, bracket: Bracket{16, 0}, loads: []int{1, 2, 4, 8, 16, 32}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := baseConfig()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			r := drive(t, cfg, tc.f)
			if r.StopReason != tc.reason || (Bracket{r.MaxPass, r.MinFail}) != tc.bracket {
				t.Errorf("stop %q at [%d, %d]: want %q at %v", r.StopReason, r.MaxPass, r.MinFail, tc.reason, tc.bracket)
			}
			if got := loads(r); !reflect.DeepEqual(got, tc.loads) {
				t.Errorf("probed %v, want %v", got, tc.loads)
			}
			if len(r.NonMonotonic) != 0 {
				t.Errorf("a monotonic server flagged non-monotonic: %v", r.NonMonotonic)
			}
		})
	}
}

func TestUnresolvedIsRetriedThenNeverAPass(t *testing.T) {
	// 8 is unresolved once then passes on its retry; 16 stays unresolved
	// and counts as a fail; 11 and above fail.
	seen := map[int]int{}
	r := drive(t, baseConfig(), func(p Probe) Outcome {
		seen[p.Load]++
		switch {
		case p.Load == 8 && !p.Retry && p.Repeat == 0:
			return scripted(VerdictUnresolved)
		case p.Load == 16:
			return scripted(VerdictUnresolved)
		case p.Load >= 11:
			return scripted(VerdictFail)
		}
		return scripted(VerdictPass)
	})
	want := []int{1, 2, 4, 8, 8, 16, 16, 12, 10, 11, 10, 11}
	if got := loads(r); !reflect.DeepEqual(got, want) {
		t.Fatalf("probed %v, want %v", got, want)
	}
	if !r.Probes[4].Retry || !r.Probes[6].Retry || r.Probes[5].Retry {
		t.Errorf("retries %+v", r.Probes)
	}
	if r.StopReason != StopConverged || r.MaxPass != 10 || r.MinFail != 11 || r.MinFailUnresolved {
		t.Errorf("result %+v", r)
	}
	if r.BindingObjective != "tpot" {
		t.Errorf("binding objective %q", r.BindingObjective)
	}
}

func TestNonMonotonicFlagged(t *testing.T) {
	// 18 passes in the search but fails its repeat; 19 fails in the search
	// but passes its repeat; 24 fails.
	r := drive(t, baseConfig(), func(p Probe) Outcome {
		switch {
		case p.Repeat > 0 && p.Load == 18:
			return scripted(VerdictFail)
		case p.Repeat > 0 && p.Load == 19:
			return scripted(VerdictPass)
		}
		return step(18)(p)
	})
	want := []NonMonotonic{{PassLoad: 18, FailLoad: 18}, {PassLoad: 19, FailLoad: 18}, {PassLoad: 19, FailLoad: 19}}
	if !reflect.DeepEqual(r.NonMonotonic, want) {
		t.Errorf("non-monotonic %v, want %v", r.NonMonotonic, want)
	}
	if r.MaxPass != 18 || r.MinFail != 19 || r.StopReason != StopConverged {
		t.Errorf("the bracket is the search's: %+v", r)
	}
}

func TestPredictedBracketProbedFirst(t *testing.T) {
	cases := []struct {
		name      string
		predicted Bracket
		loads     []int
	}{
		{"right", Bracket{17, 20}, []int{17, 20, 18, 19, 18, 19}},
		{"too high", Bracket{30, 40}, []int{30, 15, 22, 18, 20, 19, 18, 19}},
		{"too low", Bracket{5, 10}, []int{5, 10, 20, 15, 17, 18, 19, 18, 19}},
		{"min fail above max", Bracket{17, 5000}, []int{17, 1024, 520, 268, 142, 79, 48, 32, 24, 20, 18, 19, 18, 19}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := baseConfig()
			cfg.Predicted = &tc.predicted
			r := drive(t, cfg, step(18))
			if got := loads(r); !reflect.DeepEqual(got, tc.loads) {
				t.Errorf("probed %v, want %v", got, tc.loads)
			}
			if r.MaxPass != 18 || r.MinFail != 19 || r.Predicted == nil || *r.Predicted != tc.predicted {
				t.Errorf("result %+v", r)
			}
		})
	}
}

func TestObserveRefuses(t *testing.T) {
	s, err := New(baseConfig())
	if err != nil {
		t.Fatal(err)
	}
	p, _ := s.Next()
	low := scripted(VerdictPass)
	low.N = 199
	wide := scripted(VerdictPass)
	wide.CILow = 0.9
	high := scripted(VerdictFail)
	high.CIHigh = 0.96
	for _, tc := range []struct {
		p    Probe
		o    Outcome
		want string
	}{
		{Probe{Load: 2}, scripted(VerdictPass), "asked for 1 client"},
		{p, low, "min_requests 200"},
		{p, wide, "ci_low 0.9"},
		{p, high, "ci_high 0.96"},
		{p, Outcome{Verdict: "maybe"}, `verdict "maybe"`},
	} {
		if err := s.Observe(tc.p, tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Observe(%v, %+v): %v, want an error naming %q", tc.p, tc.o, err, tc.want)
		}
	}
	if q, _ := s.Next(); !q.same(p) {
		t.Errorf("after refusals the search asks for %v, want still %v", q, p)
	}
}

func TestReplayRefusesOtherProbes(t *testing.T) {
	cfg := baseConfig()
	r := drive(t, cfg, step(18))
	moved := append([]Probe(nil), r.Probes...)
	moved[3].Load = 9
	if _, err := Replay(cfg, moved); err == nil || !strings.Contains(err.Error(), "probe 4 is 9 clients, but the search asks for 8 clients") {
		t.Errorf("replay of a moved probe: %v", err)
	}
	extra := append(append([]Probe(nil), r.Probes...), Probe{Load: 19, Repeat: 2, Outcome: scripted(VerdictFail)})
	if _, err := Replay(cfg, extra); err == nil || !strings.Contains(err.Error(), "after the search stopped") {
		t.Errorf("replay of an extra probe: %v", err)
	}
	cut, err := Replay(cfg, r.Probes[:7])
	if err != nil {
		t.Fatal(err)
	}
	if cut.StopReason != StopInterrupted || cut.MaxPass != 16 || cut.MinFail != 24 || len(cut.Probes) != 7 {
		t.Errorf("replay of a cut search: %+v", cut)
	}
}

func TestConfigCheck(t *testing.T) {
	for _, tc := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.Start = 0 }, "start 0"},
		{func(c *Config) { c.Start, c.Max = 8, 4 }, "max concurrency 4 is below the start 8"},
		{func(c *Config) { c.Alpha = 1 }, "attainment target 1"},
		{func(c *Config) { c.Alpha = 0 }, "attainment target 0"},
		{func(c *Config) { c.MinRequests = 0 }, "min_requests 0"},
		{func(c *Config) { c.Repeats = -1 }, "repeats -1"},
		{func(c *Config) { c.Predicted = &Bracket{8, 8} }, "predicted bracket [8, 8]"},
	} {
		c := baseConfig()
		tc.edit(&c)
		if _, err := New(c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v): %v, want an error naming %q", c, err, tc.want)
		}
	}
}

// steepModels have a known capacity the search must bracket: their
// attainment crosses α = 0.95 between two integer loads by at least 2
// points, as a server's does when its queue starts to build.
var steepModels = []model{
	logistic("serial (capacity 2)", 2.5, 0.3),
	logistic("batching (capacity 37)", 37.5, 0.5),
	logistic("large (capacity 150)", 150.5, 1),
}

func TestBracketContainsTrueBoundary(t *testing.T) {
	for _, m := range steepModels {
		cfg := baseConfig()
		b := m.boundary(cfg.Alpha, cfg.Max)
		hits := 0
		for seed := uint64(1); seed <= 10; seed++ {
			p := &prober{m: m, rng: rand.New(rand.NewPCG(seed, 14)), cfg: cfg, cap: 2000, every: 50}
			r, err := run(cfg, p)
			if err != nil {
				t.Fatal(err)
			}
			if contains(r, b) {
				hits++
			} else {
				t.Errorf("%s, seed %d: bracket [%d, %d] (%s) misses the capacity %d", m.name, seed, r.MaxPass, r.MinFail, r.StopReason, b)
			}
			back, err := Replay(cfg, r.Probes)
			if err != nil || !reflect.DeepEqual(back, r) {
				t.Errorf("%s, seed %d: replay %+v, %v differs from the search's result", m.name, seed, back, err)
			}
		}
		t.Logf("%s: the bracket contains the capacity %d in %d of 10 seeded runs", m.name, b, hits)
	}
}

func TestLook(t *testing.T) {
	var got []int
	for n := 0; n <= 2000; n++ {
		if Look(n, 200) {
			got = append(got, n)
		}
	}
	if want := []int{200, 400, 800, 1600}; !reflect.DeepEqual(got, want) {
		t.Errorf("looks at %v, want %v", got, want)
	}
	if Look(5, 0) {
		t.Error("a look with no min_requests")
	}
}
