package sim

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rehearse/rehearse/internal/sim/engine"
	"github.com/rehearse/rehearse/internal/workload"
)

// fitPrompts are the eight prompts rehearse demo sends (the seed's report
// does not print its own); the profiles fix their output lengths.
var fitPrompts = workload.BuiltinPrompts()

// fitRow is one measured row (median goodput, pooled p95 TTFT, failures)
// and the relative tolerances this fit is held to.
type fitRow struct {
	clients    int
	goodput    float64 // median tok/s
	p95TTFTS   float64
	failures   int
	total      int
	goodputTol float64
	ttftTol    float64
	failTol    int
}

// waveStats is what the contract computes from one wave's records.
type waveStats struct {
	goodput float64
	ttfts   []float64
	fails   int
}

// runWave releases n clients at once through the handler, each with a
// client timeout, on the fake clock, and aggregates like the contract.
func runWave(t *testing.T, s *Server, n int, maxTokens int, extra string, timeout time.Duration) waveStats {
	t.Helper()
	type rec struct {
		ok     bool
		tokens int
		ttftS  float64
		endS   float64
	}
	recs := make([]rec, n)
	release := s.clk.Now()
	var wg sync.WaitGroup
	for c := range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			res := serveMem(t, s, ctx, chatBody(fitPrompts[c%len(fitPrompts)], maxTokens, extra))
			r := rec{endS: s.clk.Now() - release}
			if ctx.Err() != nil {
				r.endS = timeout.Seconds()
			}
			r.ok = ctx.Err() == nil && res.done && res.finish != ""
			if r.ok {
				r.tokens = s.counter.Count(res.text())
				r.ttftS = res.contentAtS[0] - release
			}
			recs[c] = r
		})
	}
	wg.Wait()
	var st waveStats
	wall, tokens := 0.0, 0
	for _, r := range recs {
		wall = max(wall, r.endS)
		if r.ok {
			tokens += r.tokens
			st.ttfts = append(st.ttfts, r.ttftS)
		} else {
			st.fails++
		}
	}
	st.goodput = float64(tokens) / wall
	return st
}

// p95 is the type-7 percentile the contract uses.
func percentile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	h := q * float64(len(s)-1)
	lo := math.Floor(h)
	if int(lo) >= len(s)-1 {
		return s[len(s)-1]
	}
	return s[int(lo)] + (h-lo)*(s[int(lo)+1]-s[int(lo)])
}

func median(xs []float64) float64 { return percentile(xs, 0.5) }

// fitCase is a profile and the measurements it was fitted to.
type fitCase struct {
	profile string
	source  string
	repeats int
	extra   string // request body fields, e.g. ignore_eos
	rows    []fitRow
}

var fitCases = []fitCase{
	{"t4-qwen2.5-1.5b-serial", "SPEC §7, pipeline", 3, "", []fitRow{
		{1, 19.7, 0.181, 0, 3, 0.10, 0.25, 0},
		{8, 22.5, 25.269, 0, 24, 0.15, 0.25, 0},
		{32, 19.7, 50.903, 54, 96, 0.15, 0.15, 12},
		{64, 18.7, 53.251, 154, 192, 0.20, 0.15, 15},
	}},
	{"t4-qwen2.5-1.5b-batching", "SPEC §7, vLLM", 3, "", []fitRow{
		{1, 64.1, 0.033, 0, 3, 0.05, 0.10, 0},
		{8, 324.2, 0.109, 0, 24, 0.05, 0.15, 0},
		{32, 957.2, 0.225, 0, 96, 0.05, 0.35, 0},
		{64, 1519.3, 0.523, 0, 192, 0.05, 0.10, 0},
	}},
}

// TestFitMeasuredTables runs the canonical rehearsal (closed waves, 128
// tokens, 60 s timeout, the demo's prompts) against each T4 profile on the
// fake clock, aggregates like the contract, and holds the result to SPEC §7,
// the table the profiles were fitted to. The H200 profiles are fitted to a
// bundle by fit.Profile and checked by TestH200ProfilesAreTheCommittedBundlesFit.
// Run with -v to see the tables written into the profiles' derivations.
func TestFitMeasuredTables(t *testing.T) {
	for _, tc := range fitCases {
		t.Run(tc.profile, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p, err := engine.BuiltinProfile(tc.profile)
				if err != nil {
					t.Fatal(err)
				}
				s, err := New(Options{Profile: p})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				var table strings.Builder
				fmt.Fprintf(&table, "| clients | goodput tok/s (measured) | p95 TTFT s (measured) | failures (measured) |\n|---:|---:|---:|---:|\n")
				for _, row := range tc.rows {
					var goodputs, ttfts []float64
					fails := 0
					for range tc.repeats {
						st := runWave(t, s, row.clients, 128, tc.extra, 60*time.Second)
						goodputs = append(goodputs, st.goodput)
						ttfts = append(ttfts, st.ttfts...)
						fails += st.fails
						time.Sleep(time.Second) // between waves
					}
					g, p95 := median(goodputs), percentile(ttfts, 0.95)
					fmt.Fprintf(&table, "| %d | %.1f (%.1f) | %.3f (%.3f) | %d/%d (%d/%d) |\n",
						row.clients, g, row.goodput, p95, row.p95TTFTS, fails, row.total, row.failures, row.total)
					if math.Abs(g-row.goodput) > row.goodputTol*row.goodput {
						t.Errorf("%d clients: goodput %.1f tok/s, measured %.1f (tolerance %.0f%%)", row.clients, g, row.goodput, 100*row.goodputTol)
					}
					if math.Abs(p95-row.p95TTFTS) > row.ttftTol*row.p95TTFTS {
						t.Errorf("%d clients: p95 TTFT %.3f s, measured %.3f s (tolerance %.0f%%)", row.clients, p95, row.p95TTFTS, 100*row.ttftTol)
					}
					if d := fails - row.failures; d > row.failTol || d < -row.failTol {
						t.Errorf("%d clients: %d/%d failures, measured %d/%d (tolerance ±%d)", row.clients, fails, row.total, row.failures, row.total, row.failTol)
					}
				}
				t.Logf("%s against %s (fake clock):\n%s", tc.profile, tc.source, table.String())
			})
		})
	}
}
