package search

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

var spend = flag.Bool("spend", false, "print the probes-and-requests table of bench/capacity-search.md")

// method is one way to search a model: this search with intervals, or the
// plain doubling-then-bisection that judges a fixed sample by its point
// estimate (no intervals, no retries, no repeats).
type method struct {
	name  string
	cfg   func(Config, int) Config // given the model's capacity, for a prediction
	fixed int
	every int // looks (the prober's)
}

// spendRow is one model × method over the seeds.
type spendRow struct {
	probes, requests   int
	contains, overpass int // bracket holds the capacity; max_pass above it
	capReached         int
	misled             int // the bracket misses the capacity with both ends resolved
}

func measureSpend(m model, me method, seeds int) spendRow {
	var row spendRow
	base := baseConfig()
	b := m.boundary(base.Alpha, base.Max)
	cfg := me.cfg(base, b)
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		p := &prober{m: m, rng: rand.New(rand.NewPCG(seed, 14)), cfg: cfg, cap: 2000, every: me.every, fixed: me.fixed}
		r, err := run(cfg, p)
		if err != nil {
			panic(err)
		}
		row.probes += len(r.Probes)
		row.requests += p.requests
		if contains(r, b) {
			row.contains++
		}
		if r.MaxPass > b {
			row.overpass++
		}
		if r.StopReason == StopCapReached {
			row.capReached++
		}
		if !contains(r, b) && !r.MinFailUnresolved {
			row.misled++
		}
	}
	return row
}

var spendMethods = []method{
	{name: "intervals (looks every 50), 1 repeat", every: 50, cfg: func(c Config, _ int) Config { return c }},
	{name: "intervals (looks every 50), no repeat", every: 50, cfg: func(c Config, _ int) Config { c.Repeats = 0; return c }},
	{name: "intervals (looks at 200·2^k), 1 repeat", cfg: func(c Config, _ int) Config { return c }},
	{name: "intervals (looks every 50), predicted [C−2, C+3], 1 repeat", every: 50, cfg: func(c Config, b int) Config {
		c.Predicted = &Bracket{MaxPass: max(1, b-2), MinFail: b + 3}
		return c
	}},
	{name: "plain, fixed n = 200", fixed: 200, cfg: func(c Config, _ int) Config { c.Repeats = 0; return c }},
	{name: "plain, fixed n = 2,000", fixed: 2000, cfg: func(c Config, _ int) Config { c.Repeats = 0; return c }},
}

var spendModels = append(append([]model(nil), steepModels...),
	logistic("gentle (capacity 37)", 37.5, 4))

// TestSpend prints the table of bench/capacity-search.md:
//
//	go test ./internal/search -run TestSpend -spend -v
func TestSpend(t *testing.T) {
	if !*spend {
		t.Skip("run with -spend to print the table")
	}
	const seeds = 100
	var sb strings.Builder
	fmt.Fprintf(&sb, "| server model | search | probes | requests | bracket holds C | max_pass > C | cap reached | misses C, both ends resolved |\n")
	fmt.Fprintf(&sb, "|---|---|---:|---:|---:|---:|---:|---:|\n")
	for _, m := range spendModels {
		for _, me := range spendMethods {
			r := measureSpend(m, me, seeds)
			fmt.Fprintf(&sb, "| %s | %s | %.1f | %s | %d/%d | %d/%d | %d/%d | %d/%d |\n", m.name, me.name,
				float64(r.probes)/seeds, thousands(r.requests/seeds), r.contains, seeds, r.overpass, seeds, r.capReached, seeds, r.misled, seeds)
		}
	}
	t.Log("\n" + sb.String())
}

func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
