package fit

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
)

// fitPoint is what the fit reads from one fitted load's successful
// records.
type fitPoint struct {
	key         contract.Key
	concurrency int     // closed loop: the clients; else 0
	batch       float64 // the clients of a closed wave; else the measured decode occupancy
	ok          int     // successful requests
	tpotS       float64 // median of (end − first content) ÷ (generated − 1)
	ttftS       float64 // median TTFT
	ttftLessTPO float64 // median of TTFT − that request's TPOT
	// servedLessTPO is ttftLessTPO with each TTFT counted from its send or
	// from the end of the request of its wave that ended last before its
	// first token, whichever is later: a serial engine's first token
	// without the wait for the lock.
	servedLessTPO float64
	firstTTFTS    float64 // median over waves of the wave's smallest TTFT
	contextS      float64 // median context (prompt + generated ÷ 2) of its requests, tokens
	recs          []contract.Record
}

// label names the point's load as every output does.
func (pt fitPoint) label() string { return pt.key.LoadLabel() }

// compareKeys orders loads: closed, sustained, open; by concurrency, rate
// and shape.
func compareKeys(a, b contract.Key) int {
	rank := func(m string) int {
		switch m {
		case contract.ModeClosed:
			return 0
		case contract.ModeSustained:
			return 1
		}
		return 2
	}
	return cmp.Or(cmp.Compare(rank(a.Mode), rank(b.Mode)), cmp.Compare(a.Concurrency, b.Concurrency),
		cmp.Compare(a.RequestRateRPS, b.RequestRateRPS), cmp.Compare(a.Shape, b.Shape))
}

// fitRecords returns the records of the server's recorded waves at each of
// the loads.
func fitRecords(res *bundle.Results, server string, keys []contract.Key) map[contract.Key][]contract.Record {
	waves := map[int]contract.Key{}
	for _, w := range res.Waves {
		k := contract.KeyOf(w)
		if w.Kind == contract.KindRecorded && w.Server == server && slices.Contains(keys, k) {
			waves[w.ID] = k
		}
	}
	out := map[contract.Key][]contract.Record{}
	for _, r := range res.Records {
		if k, ok := waves[r.Wave]; ok && r.Kind == contract.KindRecorded {
			out[k] = append(out[k], r)
		}
	}
	return out
}

// coldWaves describes the cold waves (the first after a launch) among the
// fitted ones at concurrency c: the model has no warm-up term.
func coldWaves(res *bundle.Results, server string, pt fitPoint, recs []contract.Record) string {
	c := pt.concurrency
	var parts []string
	for _, w := range res.Waves {
		if !w.Cold || w.Kind != contract.KindRecorded || w.Server != server || contract.KeyOf(w) != pt.key {
			continue
		}
		var ttft, tpot []float64
		for _, r := range recs {
			if r.Wave != w.ID || !r.OK || r.FirstContentS == nil {
				continue
			}
			ttft = append(ttft, *r.FirstContentS-r.StartS)
			if g := generated(r); g > 1 {
				tpot = append(tpot, (r.EndS-*r.FirstContentS)/float64(g-1))
			}
		}
		if len(ttft) == 0 || len(tpot) == 0 {
			parts = append(parts, fmt.Sprintf("repeat %d", w.Repeat))
			continue
		}
		mt, mp := *contract.Median(ttft), *contract.Median(tpot)
		if math.Abs(mt-pt.ttftS) <= 0.1*pt.ttftS && math.Abs(mp-pt.tpotS) <= 0.1*pt.tpotS {
			continue // it ran like the warm ones
		}
		parts = append(parts, fmt.Sprintf("repeat %d (median TTFT %.3f s, TPOT %.4f s against %.3f s and %.4f s over all the waves)", w.Repeat, mt, mp, pt.ttftS, pt.tpotS))
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("the fitted waves at %s include a cold wave, the first after the server's launch: %s; the model has no warm-up cost, the medians keep it out of the fit, but a tail percentile over few requests is its value", clients(c), strings.Join(parts, ", "))
}

// generated is the number of tokens the server generated for a record.
func generated(r contract.Record) int {
	if r.UsageCompletionTokens != nil {
		return *r.UsageCompletionTokens
	}
	return r.OutputTokens
}

// recordTPOT is a successful record's generated TPOT.
func recordTPOT(r contract.Record) (float64, bool) {
	if !r.OK || r.FirstContentS == nil {
		return 0, false
	}
	g := generated(r)
	if g < 2 {
		return 0, false
	}
	return (r.EndS - *r.FirstContentS) / float64(g-1), true
}

// promptTokensOf is the prompt tokens the server reported, -1 when none.
func promptTokensOf(r contract.Record) int {
	if r.UsagePromptTokens == nil {
		return -1
	}
	return *r.UsagePromptTokens
}

// decodeTPOT is the median TPOT of the records with the prefill steps they
// shared taken out: for each, the prefill (perTok × usage_prompt_tokens) of
// every other request of its wave whose first token came while it streamed
// (a continuous-batching step that prefills a prompt also decodes the
// running sequences, and costs the prefill on top), spread over its
// tokens.
func decodeTPOT(recs []contract.Record, perTok float64) float64 {
	var out []float64
	for i, r := range recs {
		tpot, ok := recordTPOT(r)
		if !ok {
			continue
		}
		shared := 0.0
		for j, o := range recs {
			if j == i || o.Wave != r.Wave || o.FirstContentS == nil {
				continue
			}
			if f := *o.FirstContentS; f > *r.FirstContentS && f <= r.EndS {
				shared += perTok * float64(max(promptTokensOf(o), 0))
			}
		}
		out = append(out, tpot-shared/float64(generated(r)-1))
	}
	return *contract.Median(out)
}

// promptSpread is the largest over the smallest prompt of the records
// (0 when none reports one).
func promptSpread(recs []contract.Record) float64 {
	lo, hi := math.Inf(1), 0.0
	for _, r := range recs {
		if n := promptTokensOf(r); n > 0 {
			lo, hi = min(lo, float64(n)), max(hi, float64(n))
		}
	}
	if hi == 0 {
		return 0
	}
	return hi / lo
}

// alone are the successful records no other record of their wave
// overlapped (send to end).
func alone(recs []contract.Record) []contract.Record {
	var out []contract.Record
	for i, r := range recs {
		if !r.OK {
			continue
		}
		solo := true
		for j, o := range recs {
			if j != i && o.Wave == r.Wave && o.StartS < r.EndS && r.StartS < o.EndS {
				solo = false
				break
			}
		}
		if solo {
			out = append(out, r)
		}
	}
	return out
}

// occupancy is, for each record of one wave that streamed, the
// time-averaged number of the wave's records streaming (first content to
// end) while it streamed, itself included.
func occupancy(recs []contract.Record) []float64 {
	type span struct{ a, b float64 }
	var spans []span
	for _, r := range recs {
		if r.FirstContentS != nil && r.EndS > *r.FirstContentS {
			spans = append(spans, span{*r.FirstContentS, r.EndS})
		}
	}
	out := make([]float64, 0, len(spans))
	for _, s := range spans {
		sum := 0.0
		for _, o := range spans {
			if lo, hi := max(s.a, o.a), min(s.b, o.b); hi > lo {
				sum += hi - lo
			}
		}
		out = append(out, sum/(s.b-s.a))
	}
	return out
}

// readPoint reads one fitted load's point from its records: the medians
// of its TPOT, TTFT and context, and (not closed) its decode occupancy.
func readPoint(k contract.Key, recs []contract.Record) (fitPoint, error) {
	pt := fitPoint{key: k, recs: recs}
	if k.Mode == contract.ModeClosed {
		pt.concurrency = k.Concurrency
	}
	if len(recs) == 0 {
		if k.Mode == contract.ModeClosed {
			return pt, fmt.Errorf("no recorded closed-loop wave at %s to fit", clients(k.Concurrency))
		}
		return pt, fmt.Errorf("no recorded wave at %s to fit", k.LoadLabel())
	}
	var tpot, ttft, diff, served, ctx []float64
	firstByWave := map[int]float64{}
	byWave := map[int][]contract.Record{}
	for _, r := range recs {
		byWave[r.Wave] = append(byWave[r.Wave], r)
		if !r.OK || r.FirstContentS == nil {
			continue
		}
		pt.ok++
		t := *r.FirstContentS - r.StartS
		ttft = append(ttft, t)
		if v, ok := firstByWave[r.Wave]; !ok || t < v {
			firstByWave[r.Wave] = t
		}
		if v, ok := recordTPOT(r); ok {
			tpot = append(tpot, v)
			diff = append(diff, t-v)
			from := r.StartS
			for _, o := range recs {
				if o.Wave == r.Wave && o.EndS > from && o.EndS < *r.FirstContentS && (o.Client != r.Client || o.StartS != r.StartS) {
					from = o.EndS
				}
			}
			served = append(served, *r.FirstContentS-from-v)
			if n := promptTokensOf(r); n >= 0 {
				ctx = append(ctx, float64(n)+float64(generated(r))/2)
			}
		}
	}
	if len(tpot) == 0 {
		return pt, fmt.Errorf("no successful request with more than one token at %s to fit a decode step from", k.LoadLabel())
	}
	var firsts []float64
	for _, v := range firstByWave {
		firsts = append(firsts, v)
	}
	pt.tpotS = *contract.Median(tpot)
	pt.ttftS = *contract.Median(ttft)
	pt.ttftLessTPO = *contract.Median(diff)
	pt.servedLessTPO = *contract.Median(served)
	pt.firstTTFTS = *contract.Median(firsts)
	if len(ctx) > 0 {
		pt.contextS = *contract.Median(ctx)
	}
	if pt.concurrency == 0 {
		var occ []float64
		for _, rs := range byWave {
			occ = append(occ, occupancy(rs)...)
		}
		pt.batch = 1
		if len(occ) > 0 {
			pt.batch = max(1, *contract.Median(occ))
		}
	}
	return pt, nil
}

// clients says "1 client" or "N clients".
// clients labels a closed-loop load as every output does ("64 clients").
func clients(n int) string {
	return contract.Key{Mode: contract.ModeClosed, Concurrency: n}.LoadLabel()
}
