package engine

import (
	"math"
	"testing"
	"testing/synctest"
	"time"
)

// testProfile is a small batching profile with round numbers.
func testProfile(t *testing.T, engine string) *Profile {
	t.Helper()
	p, err := BuiltinProfile("t4-qwen2.5-1.5b-" + engine)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// watch records the simulated time of every token of s until it finishes
// or is aborted.
func watch(clk *Clock, s *Sequence) <-chan []float64 {
	ch := make(chan []float64, 1)
	go func() {
		var times []float64
		for range s.notify {
			now := clk.Now()
			for len(times) < int(s.produced.Load()) {
				times = append(times, now)
			}
			if st := s.state.Load(); st == seqFinished || st == seqAborted {
				break
			}
		}
		ch <- times
	}()
	return ch
}

// near reports whether got is within a relative tol of want, allowing for
// the nanosecond rounding of the clock.
func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol*math.Abs(want)+1e-8 }

// submitAll makes n sequences and submits them together, as one wave.
func submitAll(t *testing.T, e *Engine, clk *Clock, n, prompt, output int) []<-chan []float64 {
	t.Helper()
	var seqs []*Sequence
	var done []<-chan []float64
	for range n {
		s := &Sequence{PromptTokens: prompt, OutputTokens: output, ArrivalS: clk.Now()}
		seqs = append(seqs, s)
	}
	if err := e.Submit(seqs...); err != nil {
		t.Fatal(err)
	}
	for _, s := range seqs {
		done = append(done, watch(clk, s))
	}
	return done
}

func TestSerialTokenTimesFollowProfile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := testProfile(t, Serial)
		clk := NewClock(1)
		e := Start(p, clk, Limits{MaxSeqs: 1, BatchTokens: 0, KVBudget: p.KVTokenBudget}, nil)
		defer e.Close()
		const prompt, n = 60, 128
		s := &Sequence{PromptTokens: prompt, OutputTokens: n, ArrivalS: clk.Now()}
		if err := e.Submit(s); err != nil {
			t.Fatal(err)
		}
		times := <-watch(clk, s)
		if len(times) != n {
			t.Fatalf("got %d tokens, want %d", len(times), n)
		}
		first := p.StepS(1, prompt)
		if !near(times[0], first, 1e-9) {
			t.Errorf("first token at %.6f s, want %.6f s (prefill step)", times[0], first)
		}
		decode := p.StepS(1, 0)
		for i := 1; i < n; i++ {
			if got := times[i] - times[i-1]; !near(got, decode, 1e-6) {
				t.Fatalf("token %d came %.6f s after the previous, want %.6f s", i, got, decode)
			}
		}
		rate := float64(n-1) / (times[n-1] - times[0])
		if want := 1 / p.DecodeS(1); !near(rate, want, 0.01) {
			t.Errorf("decode rate %.3f tok/s, want %.3f tok/s", rate, want)
		}
	})
}

func TestSerialServesOneAtATimeInArrivalOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := testProfile(t, Serial)
		clk := NewClock(1)
		e := Start(p, clk, Limits{MaxSeqs: 1, BatchTokens: 0, KVBudget: p.KVTokenBudget}, nil)
		defer e.Close()
		done := submitAll(t, e, clk, 3, 40, 10)
		synctest.Wait()
		if r, w := e.nRunning.Load(), e.nWaiting.Load(); r != 1 || w != 2 {
			t.Errorf("running %d, waiting %d; want 1 and 2", r, w)
		}
		per := p.StepS(1, 40) + 9*p.StepS(1, 0)
		for i, ch := range done {
			times := <-ch
			if want := float64(i+1) * per; !near(times[len(times)-1], want, 1e-9) {
				t.Errorf("request %d ended at %.4f s, want %.4f s", i, times[len(times)-1], want)
			}
		}
	})
}

func TestSerialRateWith64Queued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := testProfile(t, Serial)
		clk := NewClock(1)
		e := Start(p, clk, Limits{MaxSeqs: 1, BatchTokens: 0, KVBudget: p.KVTokenBudget}, nil)
		defer e.Close()
		const n, out = 64, 32
		done := submitAll(t, e, clk, n, 50, out)
		var last float64
		for _, ch := range done {
			times := <-ch
			last = max(last, times[len(times)-1])
		}
		// 64 requests one after another, each a prefill step then 31
		// decode steps: the wave's tokens per second is the profile's.
		want := float64(n*out) / (float64(n) * (p.StepS(1, 50) + (out-1)*p.StepS(1, 0)))
		if got := float64(n*out) / last; !near(got, want, 0.01) {
			t.Errorf("64 queued: %.3f tok/s, want %.3f tok/s", got, want)
		}
		if got, decode := float64(n*out)/last, 1/p.DecodeS(1); got > decode {
			t.Errorf("64 queued: %.3f tok/s, above the batch-1 decode rate %.3f", got, decode)
		}
	})
}

func TestBatchingRateAtBatch1And64(t *testing.T) {
	for _, batch := range []int{1, 64} {
		synctest.Test(t, func(t *testing.T) {
			p := testProfile(t, Batching)
			clk := NewClock(1)
			e := Start(p, clk, Limits{MaxSeqs: p.MaxNumSeqs, BatchTokens: p.MaxNumBatchedTokens, KVBudget: p.KVTokenBudget}, nil)
			defer e.Close()
			const n = 128
			done := submitAll(t, e, clk, batch, 50, n)
			var firstEnd, lastEnd float64
			total := 0
			for i, ch := range done {
				times := <-ch
				total += len(times)
				if i == 0 || times[0] > firstEnd {
					firstEnd = times[0]
				}
				lastEnd = max(lastEnd, times[len(times)-1])
			}
			if total != batch*n {
				t.Fatalf("got %d tokens, want %d", total, batch*n)
			}
			// Once every sequence has its first token, each step serves
			// the whole batch: batch tokens per decode step.
			rate := float64(batch*(n-1)) / (lastEnd - firstEnd)
			want := float64(batch) / p.DecodeS(float64(batch))
			if !near(rate, want, 0.02) {
				t.Errorf("batch %d: %.1f tok/s, want %.1f tok/s (profile) within 2%%", batch, rate, want)
			}
			t.Logf("batch %d: %.1f tok/s (profile %.1f)", batch, rate, want)
		})
	}
}

func TestBatchingChunkedPrefillSpreadsFirstTokens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := testProfile(t, Batching)
		clk := NewClock(1)
		e := Start(p, clk, Limits{MaxSeqs: p.MaxNumSeqs, BatchTokens: 2048, KVBudget: p.KVTokenBudget}, nil)
		defer e.Close()
		done := submitAll(t, e, clk, 64, 70, 4)
		firsts := map[float64]int{}
		for _, ch := range done {
			firsts[(<-ch)[0]]++
		}
		// 64 × 70 = 4480 prompt tokens in 2048-token steps: three steps
		// deliver first tokens (29, 29 less the decodes, then the rest).
		if len(firsts) != 3 {
			t.Errorf("first tokens came at %d distinct step ends, want 3: %v", len(firsts), firsts)
		}
	})
}

func TestMaxNumSeqsAndKVBudgetQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := testProfile(t, Batching)
		clk := NewClock(1)
		e := Start(p, clk, Limits{MaxSeqs: 4, BatchTokens: 0, KVBudget: 1000}, nil)
		defer e.Close()
		done := submitAll(t, e, clk, 10, 100, 20)
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if r, w := e.nRunning.Load(), e.nWaiting.Load(); r != 4 || w != 6 {
			t.Errorf("max_num_seqs 4: running %d, waiting %d; want 4 and 6", r, w)
		}
		for _, ch := range done {
			if times := <-ch; len(times) != 20 {
				t.Errorf("a request got %d tokens, want 20", len(times))
			}
		}

		// A KV budget of 250 tokens holds two 100-token prompts, and the
		// growing outputs force the newer one out (recompute preemption).
		e2 := Start(p, clk, Limits{MaxSeqs: 8, BatchTokens: 0, KVBudget: 250}, nil)
		defer e2.Close()
		done = submitAll(t, e2, clk, 3, 100, 40)
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if r, w := e2.nRunning.Load(), e2.nWaiting.Load(); r != 2 || w != 1 {
			t.Errorf("kv budget 250: running %d, waiting %d; want 2 and 1", r, w)
		}
		for _, ch := range done {
			if times := <-ch; len(times) != 40 {
				t.Errorf("a request got %d tokens, want 40", len(times))
			}
		}
		if e2.preemptions.Load() == 0 {
			t.Error("no preemption although two sequences outgrew a 250-token KV budget")
		}
	})
}

func TestAbandonFreesSlotAtNextStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := testProfile(t, Serial)
		clk := NewClock(1)
		e := Start(p, clk, Limits{MaxSeqs: 1, BatchTokens: 0, KVBudget: p.KVTokenBudget}, nil)
		defer e.Close()
		a := &Sequence{PromptTokens: 40, OutputTokens: 1000, ArrivalS: clk.Now()}
		b := &Sequence{PromptTokens: 40, OutputTokens: 5, ArrivalS: clk.Now()}
		if err := e.Submit(a, b); err != nil {
			t.Fatal(err)
		}
		wa, wb := watch(clk, a), watch(clk, b)
		time.Sleep(time.Second) // a holds the lock, b waits
		e.Abandon(a)
		ta := <-wa
		tb := <-wb
		if a.state.Load() != seqAborted {
			t.Errorf("abandoned sequence state %d, want aborted", a.state.Load())
		}
		// b starts within one step of the abandonment.
		if start := tb[0] - p.StepS(1, 40); start > 1+p.StepS(1, 0)+1e-9 {
			t.Errorf("the waiting request started at %.3f s, more than one step after the first was abandoned at 1 s", start)
		}
		if len(ta) > 30 {
			t.Errorf("abandoned request kept producing: %d tokens", len(ta))
		}
	})
}

func TestTimeScaleCompressesWallTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := testProfile(t, Serial)
		clk := NewClock(20)
		e := Start(p, clk, Limits{MaxSeqs: 1, BatchTokens: 0, KVBudget: p.KVTokenBudget}, nil)
		defer e.Close()
		start := time.Now()
		s := &Sequence{PromptTokens: 40, OutputTokens: 50, ArrivalS: clk.Now()}
		e.Submit(s)
		<-watch(clk, s)
		simS := p.StepS(1, 40) + 49*p.StepS(1, 0)
		if got := time.Since(start).Seconds(); !near(got, simS/20, 1e-6) {
			t.Errorf("wall time %.6f s, want %.6f s (simulated %.3f s / 20)", got, simS/20, simS)
		}
	})
}

func TestCloseAbortsEverything(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := testProfile(t, Batching)
		clk := NewClock(1)
		e := Start(p, clk, Limits{MaxSeqs: 2, BatchTokens: 0, KVBudget: p.KVTokenBudget}, nil)
		done := submitAll(t, e, clk, 4, 40, 500)
		time.Sleep(100 * time.Millisecond)
		e.Close()
		for _, ch := range done {
			<-ch
		}
		if err := e.Submit(&Sequence{PromptTokens: 1, OutputTokens: 1}); err == nil {
			t.Error("submit after close succeeded")
		}
	})
}
