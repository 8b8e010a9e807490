package contract

import (
	"slices"
	"sort"
)

// ModelFigures are an aggregate's figures for the recorded attempts that
// asked for one model (Record.Model: a LoRA adapter of vLLM's
// --lora-modules): how many, how many failed, and the TTFT and E2E of the
// successful ones, pooled over the repeats as the aggregate's own are.
type ModelFigures struct {
	Model    string      `json:"model"`
	Requests int         `json:"requests"`
	Failures int         `json:"failures"`
	TTFT     Percentiles `json:"ttft_s"`
	E2E      Percentiles `json:"e2e_s"`
}

// SideProbeFigures are the side probes sent beside an aggregate's
// recorded waves (waves of kind side_probe whose beside is one of them),
// as vLLM reports its probe requests apart from the load: how many were
// sent, how many failed, and the E2E (end_s − start_s) of the successful
// ones with its largest value.
type SideProbeFigures struct {
	Requests int         `json:"requests"`
	Failures int         `json:"failures"`
	E2E      Percentiles `json:"e2e_s"`
	MaxE2ES  *float64    `json:"max_e2e_s"`
}

// ApplyApart sets on aggs the figures kept apart from their own, each a
// function of the records alone: Models, where a recorded record of the
// population names its model, and SideProbes, where side probes ran
// beside its waves.
func ApplyApart(aggs []Aggregate, waves []Wave, records []Record) {
	t := NewApartTally(waves)
	for i := range records {
		t.Add(&records[i])
	}
	t.Apply(aggs)
}

// ApartTally is ApplyApart one record at a time (verify's streaming pass
// keeps no record): per population, the E2E and TTFT of each model and
// of the side probes, one float64 per request.
type ApartTally struct {
	keys   map[int]Key // recorded wave id → its population
	beside map[int]Key // side-probe wave id → the population it ran beside
	models map[Key]map[string]*apartPop
	probes map[Key]*apartPop
}

// apartPop is one population's tally: attempts, failures and the
// latencies of the successful ones.
type apartPop struct {
	requests, failures int
	ttft, e2e          []float64
}

func (p *apartPop) add(r *Record) {
	p.requests++
	if !r.OK {
		p.failures++
		return
	}
	if v, ok := r.TTFT(); ok {
		p.ttft = append(p.ttft, v)
	}
	p.e2e = append(p.e2e, r.EndS-r.StartS)
}

// NewApartTally starts the tally of waves' populations.
func NewApartTally(waves []Wave) *ApartTally {
	t := &ApartTally{keys: map[int]Key{}, beside: map[int]Key{}, models: map[Key]map[string]*apartPop{}, probes: map[Key]*apartPop{}}
	for _, w := range waves {
		if w.Kind == KindRecorded {
			t.keys[w.ID] = KeyOf(w)
		}
	}
	for _, w := range waves {
		if k, ok := t.keys[w.Beside]; ok && w.Kind == KindSideProbe && w.Beside != w.ID {
			t.beside[w.ID] = k
		}
	}
	return t
}

// Add counts one record: a recorded one that names its model, or a side
// probe.
func (t *ApartTally) Add(r *Record) {
	switch r.Kind {
	case KindRecorded:
		k, ok := t.keys[r.Wave]
		if !ok || r.Model == "" {
			return
		}
		ms := t.models[k]
		if ms == nil {
			ms = map[string]*apartPop{}
			t.models[k] = ms
		}
		p := ms[r.Model]
		if p == nil {
			p = &apartPop{}
			ms[r.Model] = p
		}
		p.add(r)
	case KindSideProbe:
		k, ok := t.beside[r.Wave]
		if !ok {
			return
		}
		p := t.probes[k]
		if p == nil {
			p = &apartPop{}
			t.probes[k] = p
		}
		p.add(r)
	}
}

// Apply sets Models (by model name) and SideProbes on aggs.
func (t *ApartTally) Apply(aggs []Aggregate) {
	for i := range aggs {
		a := &aggs[i]
		a.Models, a.SideProbes = nil, nil
		k := a.Key()
		if ms := t.models[k]; len(ms) > 0 {
			names := make([]string, 0, len(ms))
			for m := range ms {
				names = append(names, m)
			}
			sort.Strings(names)
			for _, m := range names {
				p := ms[m]
				a.Models = append(a.Models, ModelFigures{Model: m, Requests: p.requests, Failures: p.failures,
					TTFT: Summarize(p.ttft), E2E: Summarize(p.e2e)})
			}
		}
		if p := t.probes[k]; p != nil {
			f := &SideProbeFigures{Requests: p.requests, Failures: p.failures, E2E: Summarize(p.e2e)}
			if len(p.e2e) > 0 {
				m := slices.Max(p.e2e)
				f.MaxE2ES = &m
			}
			a.SideProbes = f
		}
	}
}
