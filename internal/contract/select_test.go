package contract

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// selectAll runs a selector over xs as its caller does, one pass after
// another, and returns its summary and the number of passes.
func selectAll(xs []float64) (Percentiles, int) {
	s := newSelector()
	passes := 0
	for {
		passes++
		for _, v := range xs {
			s.add(v)
		}
		if !s.next(summaryRanks) {
			break
		}
	}
	return s.summary(), passes
}

func samePercentiles(t *testing.T, name string, got, want Percentiles) {
	t.Helper()
	if got.N != want.N {
		t.Fatalf("%s: n %d, pooled %d", name, got.N, want.N)
	}
	for _, p := range []struct {
		name string
		a, b *float64
	}{{"p50", got.P50, want.P50}, {"p90", got.P90, want.P90}, {"p95", got.P95, want.P95}, {"p99", got.P99, want.P99},
		{"p95_ub", got.P95UB, want.P95UB}, {"p99_ub", got.P99UB, want.P99UB}} {
		if (p.a == nil) != (p.b == nil) {
			t.Fatalf("%s %s: %v, pooled %v", name, p.name, p.a, p.b)
		}
		if p.a != nil && math.Float64bits(*p.a) != math.Float64bits(*p.b) && !(*p.a == 0 && *p.b == 0) {
			t.Fatalf("%s %s: %v (%#x), pooled %v (%#x)", name, p.name, *p.a, math.Float64bits(*p.a), *p.b, math.Float64bits(*p.b))
		}
	}
}

// TestSelectorIsTheSortedPercentiles checks the exact selection against
// sorting every value (Summarize) on random populations of every shape
// that could trip it: ties, a single value, negatives and zeros, values
// a few ulps apart (every pass down to the last bit), and buckets past the
// collect limit.
func TestSelectorIsTheSortedPercentiles(t *testing.T) {
	defer func(c int) { selectCollect = c }(selectCollect)
	rng := rand.New(rand.NewPCG(1, 2))
	gens := map[string]func(i int) float64{
		"exponential ms": func(int) float64 { return rng.ExpFloat64() * 0.02 },
		"uniform":        func(int) float64 { return rng.Float64() },
		"constant":       func(int) float64 { return 0.015 },
		"few values":     func(int) float64 { return float64(rng.IntN(4)) * 0.001 },
		"signed":         func(int) float64 { return rng.NormFloat64() },
		"zeros":          func(i int) float64 { return []float64{0, math.Copysign(0, -1), 1e-3, -1e-3}[i%4] },
		"ulps apart":     func(int) float64 { return math.Float64frombits(math.Float64bits(0.0123) + uint64(rng.IntN(300))) },
		"huge and tiny":  func(int) float64 { return math.Ldexp(rng.Float64(), rng.IntN(2000)-1000) },
		"microseconds":   func(int) float64 { return float64(rng.IntN(20000)) / 1e6 },
	}
	defer func(s, m int) { selectSample, selectWindowMax = s, m }(selectSample, selectWindowMax)
	for _, sample := range []int{0, 1 << 20, 1, 3, 64, 1000} {
		for _, windowMax := range []int{1 << 22, 50} {
			selectSample, selectWindowMax = sample, windowMax
			for _, collect := range []int{1 << 20, 7} {
				selectCollect = collect
				for name, gen := range gens {
					for _, n := range []int{0, 1, 2, 3, 10, 101, 5000} {
						xs := make([]float64, n)
						for i := range xs {
							xs[i] = gen(i)
						}
						got, passes := selectAll(xs)
						samePercentiles(t, fmt.Sprintf("%s (sample %d, window max %d, collect %d)", name, sample, windowMax, collect), got, Summarize(xs))
						if passes > 64/selectWidth+2 {
							t.Errorf("%s, n %d: %d passes", name, n, passes)
						}
					}
				}
			}
		}
	}
}

// TestSelectorWindowsSaveThePass checks that the windows chosen from the
// first values find every percentile in one pass where the population
// does not drift from them, and that where it does (or the windows would
// hold too much) the further passes still give the sorted figures.
func TestSelectorWindowsSaveThePass(t *testing.T) {
	defer func(s, m int) { selectSample, selectWindowMax = s, m }(selectSample, selectWindowMax)
	rng := rand.New(rand.NewPCG(5, 6))
	steady := make([]float64, 300000)
	for i := range steady {
		steady[i] = 0.01 * (0.8 + 0.4*rng.Float64())
	}
	drifting := make([]float64, 300000)
	for i := range drifting {
		drifting[i] = 0.01 * (1 + float64(i)/100000) * (0.8 + 0.4*rng.Float64())
	}
	for _, c := range []struct {
		name      string
		xs        []float64
		windowMax int
		onePass   bool
	}{
		{"steady", steady, 1 << 22, true},
		{"steady, windows over their limit", steady, 1000, false},
		{"drifting", drifting, 1 << 22, false},
	} {
		selectSample, selectWindowMax = 20000, c.windowMax
		got, passes := selectAll(c.xs)
		samePercentiles(t, c.name, got, Summarize(c.xs))
		if (passes == 1) != c.onePass {
			t.Errorf("%s: %d passes, want one: %v", c.name, passes, c.onePass)
		}
		// The same values as the gaps of records' chunk times (addGaps).
		var recs [][]float64
		var gaps []float64
		for i := 0; i < len(c.xs); i += 127 {
			times := []float64{float64(i)}
			for _, x := range c.xs[i:min(i+127, len(c.xs))] {
				times = append(times, times[len(times)-1]+x)
			}
			for j := 1; j < len(times); j++ {
				gaps = append(gaps, times[j]-times[j-1])
			}
			recs = append(recs, times)
		}
		sel := newSelector()
		passes = 0
		for more := true; more; {
			passes++
			for _, times := range recs {
				sel.addGaps(times)
			}
			more = sel.next(summaryRanks)
		}
		samePercentiles(t, c.name+", as gaps", sel.summary(), Summarize(gaps))
		if (passes == 1) != c.onePass {
			t.Errorf("%s, as gaps: %d passes, want one: %v", c.name, passes, c.onePass)
		}
	}
}

// TestAggregatesITLIsThePooledGaps checks the aggregates' ITL, found by
// selection in passes over the records, against every gap pooled and
// sorted (PooledLatencies), on random records of several waves.
func TestAggregatesITLIsThePooledGaps(t *testing.T) {
	defer func(c int) { selectCollect = c }(selectCollect)
	rng := rand.New(rand.NewPCG(3, 4))
	var waves []Wave
	var recs []Record
	for id := range 6 {
		waves = append(waves, Wave{ID: id, Server: []string{"a", "b"}[id%2], Concurrency: 4 << (id / 2 % 2), Repeat: id / 4, Kind: KindRecorded})
		for range 200 {
			r := Record{Wave: id, Server: waves[id].Server, Kind: KindRecorded, OK: rng.IntN(10) > 0, EndS: 3}
			t := rng.Float64()
			for range rng.IntN(40) {
				r.ChunkTimesS = append(r.ChunkTimesS, t)
				t += rng.ExpFloat64() * 0.01
			}
			r.OutputTokens = len(r.ChunkTimesS)
			recs = append(recs, r)
		}
	}
	defer func(s, b int) { selectSample, selectBudget = s, b }(selectSample, selectBudget)
	for _, sb := range [][2]int{{0, 1 << 24}, {1 << 20, 1 << 24}, {100, 1 << 24}, {100, 300}, {1 << 20, 2000}} {
		selectSample, selectBudget = sb[0], sb[1]
		for _, collect := range []int{1 << 20, 3} {
			selectCollect = collect
			aggs := Aggregates(waves, recs, nil, "")
			if len(aggs) == 0 {
				t.Fatal("no aggregates")
			}
			for _, a := range aggs {
				l := PooledLatencies(waves, recs, a.Key())
				samePercentiles(t, a.LoadLabel(), a.ITL, Summarize(l.ITL))
			}
		}
	}
}

// TestSelectorBudget checks that selections sharing a budget never hold
// more than it, and that those that gave up still find the sorted
// figures by further passes.
func TestSelectorBudget(t *testing.T) {
	defer func(s int) { selectSample = s }(selectSample)
	selectSample = 3000
	rng := rand.New(rand.NewPCG(9, 10))
	budget := 4000
	var sels []*selector
	var pops [][]float64
	for range 3 {
		s := newSelector()
		s.budget = &budget
		sels = append(sels, s)
		xs := make([]float64, 20000)
		for i := range xs {
			xs[i] = rng.ExpFloat64()
		}
		pops = append(pops, xs)
	}
	held := func() int {
		n := 0
		for _, s := range sels {
			n += len(s.sample)
			for _, w := range s.windows {
				n += len(w.values)
			}
		}
		return n
	}
	for more := true; more; {
		more = false
		for i := range 20000 {
			for j, s := range sels {
				if s.pass == 0 || len(s.nodes) > 0 {
					s.add(pops[j][i])
				}
			}
			if h := held(); h > 4000 || budget != 4000-h {
				t.Fatalf("holding %d values, budget left %d of 4000", h, budget)
			}
		}
		for _, s := range sels {
			if (s.pass == 0 || len(s.nodes) > 0) && s.next(summaryRanks) {
				more = true
			}
		}
	}
	for j, s := range sels {
		samePercentiles(t, fmt.Sprintf("population %d", j), s.summary(), Summarize(pops[j]))
	}
}
