package fit

import (
	"math"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/sim/engine"
	"github.com/rehearse/rehearse/internal/sim/predict"
)

// streamRec is a successful record of wave w that sends at start, gets its
// first token after ttft and then one token every gap for n tokens.
func streamRec(w, repeat int, start, ttft, gap float64, n int) contract.Record {
	first := start + ttft
	chunks := make([]float64, n)
	for i := range chunks {
		chunks[i] = first + float64(i)*gap
	}
	g := n
	return contract.Record{Kind: contract.KindRecorded, Wave: w, Repeat: repeat, OK: true, StartS: start,
		FirstContentS: &first, ChunkTimesS: chunks, EndS: chunks[n-1], UsageCompletionTokens: &g, OutputTokens: n}
}

func TestWarmRepeatsDropsTheColdOne(t *testing.T) {
	recs := []contract.Record{
		streamRec(1, 1, 0, 0.156, 0.02, 10), // cold: 6× the warm one
		streamRec(2, 2, 0, 0.025, 0.02, 10),
	}
	kept, why := warmRepeats("1 client", recs)
	if len(kept) != 1 || kept[0].Wave != 2 || !strings.Contains(why, "repeat 1 (median TTFT 0.156 s)") {
		t.Fatalf("kept %d records (first wave %d), note %q: want repeat 2 only, and a note naming repeat 1", len(kept), kept[0].Wave, why)
	}
	// Repeats within the threshold (1.4×, or 2× but only 10 ms apart) stay.
	for _, pair := range [][2]float64{{0.35, 0.25}, {0.02, 0.01}} {
		recs := []contract.Record{streamRec(1, 1, 0, pair[0], 0.02, 10), streamRec(2, 2, 0, pair[1], 0.02, 10)}
		if kept, why := warmRepeats("8 clients", recs); len(kept) != 2 || why != "" {
			t.Errorf("TTFT %g against %g: kept %d, note %q; want both and no note", pair[0], pair[1], len(kept), why)
		}
	}
}

// TestOccupancyStepsFindsAJump: a closed wave of 8 whose step costs 20 ms
// while more than 4 stream and 10 ms otherwise, as its requests end one
// after another; the occupancy curve reads both levels where a per-load
// line through 1 and 8 would not.
func TestOccupancyStepsFindsAJump(t *testing.T) {
	var recs []contract.Record
	for rep := 1; rep <= 40; rep++ {
		w := rep
		t0 := float64(rep) * 1000
		// Request i streams until its own length; the clock advances by
		// the step of the number still streaming.
		var firsts [8]float64
		var chunks [8][]float64
		clock := t0 + 0.05
		for i := range firsts {
			firsts[i] = clock
		}
		for step := 0; step < 8*8; step++ {
			streaming := 0
			for i := range chunks {
				if len(chunks[i]) < 8*(i+1) {
					streaming++
				}
			}
			if streaming == 0 {
				break
			}
			for i := range chunks {
				if len(chunks[i]) < 8*(i+1) {
					chunks[i] = append(chunks[i], clock)
				}
			}
			if streaming > 4 {
				clock += 0.020
			} else {
				clock += 0.010
			}
		}
		for i := range chunks {
			f := chunks[i][0]
			g := len(chunks[i])
			recs = append(recs, contract.Record{Kind: contract.KindRecorded, Wave: w, OK: true, StartS: t0,
				FirstContentS: &f, ChunkTimesS: chunks[i], EndS: chunks[i][g-1], UsageCompletionTokens: &g})
		}
	}
	pts, _ := occupancySteps(recs, 8)
	if len(pts) < 2 {
		t.Fatalf("occupancy curve %v: want points on both sides of the jump", pts)
	}
	p := &engine.Profile{DecodeStepS: pts}
	for _, c := range []struct{ n, want float64 }{{2, 0.010}, {4, 0.010}, {6, 0.020}, {8, 0.020}} {
		if got := p.DecodeS(c.n); math.Abs(got-c.want) > 1e-6 {
			t.Errorf("step at %g streaming: %.4f s, want %.4f s (curve %v)", c.n, got, c.want, pts)
		}
	}
	if miss, _, _ := worstMiss([][2]float64{{1, 0.010}, {8, 0.020}}, pts); miss < occupancyMiss {
		t.Errorf("the per-load line misses the curve by %.0f %%, want over %.0f %%", 100*miss, 100*occupancyMiss)
	}
	thin := thinSteps(pts)
	if len(thin) > len(pts) || thin[0] != pts[0] || thin[len(thin)-1] != pts[len(pts)-1] {
		t.Errorf("thinned %v from %v", thin, pts)
	}
}

// TestFitReadsStaggeredPrefill: a batching engine whose 64-client wave's
// prompts (about 300 tokens each) overflow its 4096-token step budget
// staggers their first tokens by prefill; the fit reads the prefill cost
// from the TTFT growth, with no frontend.
func TestFitReadsStaggeredPrefill(t *testing.T) {
	truth, err := engine.BuiltinProfile("t4-qwen2.5-1.5b-batching")
	if err != nil {
		t.Fatal(err)
	}
	truth.DecodeStepS = [][2]float64{{1, 0.020}, {64, 0.030}}
	truth.RequestOverheadS, truth.FrontendSPerRequest = 0.002, 0
	truth.PrefillBaseS, truth.PrefillPerTokenS, truth.MaxNumBatchedTokens = 0, 20e-6, 4096
	truth.MaxNumSeqs, truth.MaxModelLen, truth.PrefixCaching = 64, 32768, false
	prompts := make([]string, 8)
	for i := range prompts {
		prompts[i] = strings.Repeat("the quiet harbour at dawn ", 60) + strings.Repeat("x", i)
	}
	w := predict.ClosedWorkload{Concurrencies: []int{1, 64}, Repeats: 1, Prompts: prompts, MaxTokens: 64, TimeoutS: 60, IgnoreEOS: true}
	res := syntheticBundle(t, truth, w, "batching", []string{"python3", "batching_server.py", "--max-num-seqs=64", "--max-num-batched-tokens", "4096"}, 1)
	f, err := Profile(res, Options{Server: "batching", Engine: engine.Batching, FitConcurrencies: []int{1, 64}})
	if err != nil {
		t.Fatal(err)
	}
	p := f.Profile
	if p.FrontendSPerRequest != 0 || p.MaxNumBatchedTokens != 4096 {
		t.Errorf("frontend %g s, budget %d: want 0 and 4096 from the argv", p.FrontendSPerRequest, p.MaxNumBatchedTokens)
	}
	if math.Abs(p.PrefillPerTokenS-20e-6) > 0.15*20e-6 {
		t.Errorf("prefill per token %.3g s, want 2e-05 within 15 %%\n%s", p.PrefillPerTokenS, strings.Join(f.Derivation, "\n"))
	}
}
