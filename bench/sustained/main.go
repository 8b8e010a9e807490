// Command sustained reads a bundle of sustained closed-loop waves and
// reports how many requests were in flight during each measured part: the
// check that a sustained wave of C clients keeps C requests in flight while
// requests remain. See README.md beside this file for the command that
// makes the bundle and the figures.
//
//	go run ./bench/sustained BUNDLE
//
// For each recorded sustained wave it puts the wave's records and those of
// its warm-up wave (still in flight when the measured part begins) on one
// clock, through the waves' started_at anchors, and over the window from
// the first measured send to the last measured send (after it the clients
// run out of requests and the loop drains, by design) reports:
//
//   - at each measured send, the requests in flight just after it (itself
//     included): C when every other client had a request out;
//   - the share of the window's time spent at each in-flight count;
//   - the gap of each client between the end of one request and the send of
//     its next (the client's own time per request).
package main

import (
	"fmt"
	"math"
	"os"
	"sort"
	"time"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go run ./bench/sustained BUNDLE")
		os.Exit(2)
	}
	res, err := bundle.ReadResults(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "sustained:", err)
		os.Exit(1)
	}
	n := 0
	for _, w := range res.Waves {
		if w.Kind == contract.KindRecorded && w.Mode == contract.ModeSustained {
			report(res, w)
			n++
		}
	}
	if n == 0 {
		fmt.Fprintln(os.Stderr, "sustained: no recorded sustained wave in", os.Args[1])
		os.Exit(1)
	}
}

type span struct {
	start, end float64 // seconds on the measured wave's clock
	client     int
	measured   bool
}

func report(res *bundle.Results, w contract.Wave) {
	rel, err := time.Parse(time.RFC3339Nano, w.StartedAt)
	if err != nil {
		fmt.Printf("wave %d: started_at %q: %v\n", w.ID, w.StartedAt, err)
		return
	}
	// Its warm-up: the warm-up wave of the same server, load and repeat.
	offset := map[int]float64{w.ID: 0}
	for _, o := range res.Waves {
		if o.Kind == contract.KindWarmup && o.Mode == contract.ModeSustained && o.Server == w.Server && o.Concurrency == w.Concurrency && o.Repeat == w.Repeat {
			if t, err := time.Parse(time.RFC3339Nano, o.StartedAt); err == nil {
				offset[o.ID] = t.Sub(rel).Seconds()
			}
		}
	}
	var spans []span
	for _, r := range res.Records {
		off, ok := offset[r.Wave]
		if !ok {
			continue
		}
		spans = append(spans, span{r.StartS + off, r.EndS + off, r.Client, r.Wave == w.ID})
	}
	c := w.Concurrency
	var sends []float64
	lastSend := 0.0
	for _, s := range spans {
		if s.measured {
			sends = append(sends, s.start)
			lastSend = max(lastSend, s.start)
		}
	}
	sort.Float64s(sends)
	if len(sends) == 0 {
		return
	}
	first := sends[0]

	// Events: +1 at a start, −1 at an end; an end before a start at one
	// instant (a client's next send after its last end).
	type ev struct {
		t float64
		d int
	}
	var evs []ev
	for _, s := range spans {
		evs = append(evs, ev{s.start, +1}, ev{s.end, -1})
	}
	sort.Slice(evs, func(i, j int) bool {
		if evs[i].t != evs[j].t {
			return evs[i].t < evs[j].t
		}
		return evs[i].d < evs[j].d
	})
	// In flight just after each measured send, and time at each count over
	// [first, lastSend].
	atSend := map[int]int{}
	timeAt := map[int]float64{}
	inFlight := 0
	prev := math.Inf(-1)
	for _, e := range evs {
		// [prev, e.t) had inFlight requests out.
		if lo, hi := math.Max(prev, first), math.Min(e.t, lastSend); hi > lo {
			timeAt[inFlight] += hi - lo
		}
		inFlight += e.d
		prev = e.t
	}
	// atSend: count spans covering each measured send (start ≤ t < end).
	starts := make([]float64, 0, len(spans))
	ends := make([]float64, 0, len(spans))
	for _, s := range spans {
		starts = append(starts, s.start)
		ends = append(ends, s.end)
	}
	sort.Float64s(starts)
	sort.Float64s(ends)
	for _, t := range sends {
		k := sort.Search(len(starts), func(i int) bool { return starts[i] > t }) - sort.Search(len(ends), func(i int) bool { return ends[i] > t })
		atSend[k]++
	}
	// Client gaps: end of a request to the send of the same client's next.
	byClient := map[int][]span{}
	for _, s := range spans {
		byClient[s.client] = append(byClient[s.client], s)
	}
	var gaps []float64
	for _, ss := range byClient {
		sort.Slice(ss, func(i, j int) bool { return ss[i].start < ss[j].start })
		for i := 1; i < len(ss); i++ {
			if ss[i].measured && ss[i].start <= lastSend {
				gaps = append(gaps, ss[i].start-ss[i-1].end)
			}
		}
	}
	sort.Float64s(gaps)
	window := lastSend - first
	fmt.Printf("%s, %d clients, repeat %d: %d measured requests, window first→last measured send %.3f s\n", w.Server, c, w.Repeat, len(sends), window)
	if w.WallS > 0 && w.ClientCPUS > 0 {
		fmt.Printf("  client CPU over the measured wave: %.2f s over %.2f s of wall time (%.0f%% of one core)\n", w.ClientCPUS, w.WallS, 100*w.ClientCPUS/w.WallS)
	}
	fmt.Printf("  in flight just after each measured send (itself included):\n")
	for _, k := range sortedKeys(atSend) {
		fmt.Printf("    %5d: %6d sends (%.2f%%)\n", k, atSend[k], 100*float64(atSend[k])/float64(len(sends)))
	}
	below := 0
	for k, v := range atSend {
		if k < c-1 {
			below += v
		}
	}
	pct := func(v int) float64 { return 100 * float64(v) / float64(len(sends)) }
	fmt.Printf("  sends with C in flight: %.2f%%, C−1: %.2f%%, fewer: %.2f%%\n", pct(atSend[c]), pct(atSend[c-1]), pct(below))
	fmt.Printf("  share of the window's time at each in-flight count:\n")
	within := 0.0
	for _, k := range sortedKeys(timeAt) {
		if k >= c-1 && k <= c {
			within += timeAt[k]
		}
	}
	keys := sortedKeys(timeAt)
	sort.Slice(keys, func(i, j int) bool { return timeAt[keys[i]] > timeAt[keys[j]] })
	for i, k := range keys {
		if i == 8 {
			fmt.Printf("    (%d more counts)\n", len(keys)-8)
			break
		}
		fmt.Printf("    %5d: %.3f%%\n", k, 100*timeAt[k]/window)
	}
	lo := c
	for k, v := range timeAt {
		if v > 0 {
			lo = min(lo, k)
		}
	}
	fmt.Printf("  time within [C−1, C] = [%d, %d]: %.3f%%; lowest count reached: %d\n", c-1, c, 100*within/window, lo)
	if len(gaps) > 0 {
		q := func(p float64) float64 { return gaps[int(p*float64(len(gaps)-1))] * 1e6 }
		fmt.Printf("  client gap, end of a request to the same client's next send: p50 %.0f µs, p99 %.0f µs, max %.0f µs (%d gaps)\n", q(0.5), q(0.99), q(1), len(gaps))
	}
}

func sortedKeys[V any](m map[int]V) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}
