package plottest

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/search"
)

// CapacityOptions shapes a synthetic capacity search (SPEC §8) of each
// server: sustained closed-loop probes generated from the same queueing
// model as Results, driven by the real search, so the entry recomputes
// from its records as verify does.
type CapacityOptions struct {
	Servers []Server
	// Objectives is the SLO, e.g. "ttft<=2s,tpot<=60ms".
	Objectives string
	Alpha      float64
	Spec       search.Spec
	MaxTokens  int
	Seed       uint64
	Jitter     float64
}

// DefaultCapacity searches Default's two servers under TTFT ≤ 2 s and
// TPOT ≤ 50 ms: the serial server passes at two clients, the batching
// one at more than a hundred.
func DefaultCapacity() CapacityOptions {
	d := Default()
	return CapacityOptions{
		Servers:    d.Servers,
		Objectives: "ttft<=2s,tpot<=50ms",
		Alpha:      0.95,
		Spec:       search.Spec{Start: 1, Max: 256, MinRequests: 40, MaxRequests: 160, Repeats: 1},
		MaxTokens:  32,
		Seed:       3,
		Jitter:     0.1,
	}
}

// CapacityResults builds the bundle of a capacity search of every server
// of o, its aggregates and capacity entries computed as a rehearsal's are.
// It panics on options the search refuses (a test's mistake).
func CapacityResults(o CapacityOptions) *bundle.Results {
	obj, err := contract.ParseObjectives(o.Objectives)
	if err != nil {
		panic(err)
	}
	slo := contract.NewSLO(obj, o.Alpha)
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))
	spec := o.Spec
	r := syntheticResults(bundle.Workload{
		Kind: contract.ModeSustained, Concurrencies: []int{}, Repeats: 1,
		Prompts: []string{"Explain batching.", "Write a haiku about queues."}, MaxTokens: o.MaxTokens,
		TimeoutS: 60, PercentileMethod: contract.PercentileMethod, Capacity: &spec,
	})
	r.SLO = slo
	clock := anchor
	id := 0
	for _, s := range o.Servers {
		addServer(r, s)
		srch, err := search.New(spec.Config(o.Alpha))
		if err != nil {
			panic(err)
		}
		for {
			p, ok := srch.Next()
			if !ok {
				break
			}
			w := contract.Wave{ID: id, Server: s.Name, Concurrency: p.Load, Repeat: 1, Kind: contract.KindRecorded,
				Mode: contract.ModeSustained, StartedAt: clock.Format(time.RFC3339), Probe: p.Kind()}
			limit, _ := spec.Caps(p.Kind(), p.Load)
			recs := sustained(rng, o, s, &w, *slo, limit)
			w.WallS = contract.WaveWallS(recs)
			r.Waves = append(r.Waves, w)
			r.Records = append(r.Records, recs...)
			if err := srch.Observe(p, search.Measure(w.ID, recs, *slo, spec.MinRequests)); err != nil {
				panic(err)
			}
			clock = clock.Add(time.Duration((w.WallS + 1) * float64(time.Second)))
			id++
		}
		r.Capacity = append(r.Capacity, search.NewCapacity(s.Name, spec, *slo, srch.Result()))
	}
	r.Provenance.FinishedAt = clock.Format(time.RFC3339)
	r.Recompute()
	return r
}

// sustained generates one sustained closed-loop probe of c = w.Concurrency
// clients, each sending its next request when its last one ends, until the
// probe resolves at a look (search.Look) or reaches limit requests, and
// records on w why it ended. Its requests are sent one at a time, each
// ended before the next (none in flight at a look), so every record is of
// the verdict's population.
func sustained(rng *rand.Rand, o CapacityOptions, s Server, w *contract.Wave, slo contract.SLO, limit int) []contract.Record {
	c := w.Concurrency
	jit := func() float64 { return 1 + o.Jitter*(2*rng.Float64()-1) }
	ready := make([]float64, c) // when each client sends its next request
	free := 0.0                 // serial: when the server is next free
	var recs []contract.Record
	for n := 0; n < limit; n++ {
		client := 0
		for i := range ready {
			if ready[i] < ready[client] {
				client = i
			}
		}
		start := ready[client]
		prefill, tpot := s.PrefillS*jit(), s.TPOTS*jit()
		begin := start
		if s.Serial {
			begin = max(start, free)
		} else {
			tpot *= 1 + s.BatchSlowdown*float64(c-1)
			prefill *= 1 + s.BatchSlowdown*float64(c-1)/4
		}
		first := begin + prefill
		chunks := make([]float64, o.MaxTokens)
		for k := range chunks {
			chunks[k] = round(first + tpot*float64(k))
		}
		end := round(chunks[len(chunks)-1] + 0.0002)
		if s.Serial {
			free = end
		}
		f := chunks[0]
		u := o.MaxTokens
		recs = append(recs, contract.Record{
			Kind: w.Kind, Server: s.Name, Concurrency: c, Repeat: w.Repeat, Wave: w.ID, Client: client, Prompt: n % 2,
			IntendedStartS: round(start), StartS: round(start), EndS: end, FirstContentS: &f, ChunkTimesS: chunks,
			OK: true, FinishReason: "length", Text: strings.Repeat(" tok", o.MaxTokens), OutputTokens: o.MaxTokens,
			UsageCompletionTokens: &u, Request: &n,
		})
		ready[client] = end
		if search.StopRule(slo, o.Spec.MinRequests, c)(recs) {
			w.EndedBy, w.Look = contract.EndedUntil, &contract.Look{Prefix: len(recs), Ended: len(recs), Sent: len(recs)}
			break
		}
	}
	if w.EndedBy == "" {
		w.EndedBy = contract.EndedNumRequests
	}
	if len(recs) == 0 {
		panic(fmt.Sprintf("plottest: probe at %d clients with no request", c))
	}
	return recs
}
