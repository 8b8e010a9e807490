package config

import (
	"fmt"

	"github.com/rehearse/rehearse/internal/search"
)

// Capacity is a capacity search of every rehearsed server (SPEC §8): the
// sustained closed loop's concurrency C is probed, each probe warmed up
// then measured until it has min_requests and a resolved Wilson interval
// against the slo: target (or its cap), doubling from Start and then
// bisecting. It needs slo:.
type Capacity struct {
	Start          int `yaml:"start"`
	MaxConcurrency int `yaml:"max_concurrency"`
	MinRequests    int `yaml:"min_requests"`
	// MaxRequests and MaxDuration cap one probe's measured part.
	MaxRequests int      `yaml:"max_requests"`
	MaxDuration Duration `yaml:"max_duration"`
	// WarmupRequests is nil until defaults are applied (then -1: two per
	// client of the probe).
	WarmupRequests *int `yaml:"warmup_requests"`
	// Repeats is how many times the final pass and fail points are re-run
	// (nil until defaults are applied).
	Repeats *int `yaml:"repeats"`
	// Predicted is a bracket to probe first, per server name.
	Predicted map[string]Bracket `yaml:"predicted"`
	// PredictFrom predicts the bracket to probe first from a simulator
	// profile, per server name (the runner computes it before any request:
	// predict.Capacity).
	PredictFrom map[string]PredictFrom `yaml:"predict_from"`
	// Screen makes the doubling screen its loads, a screen only able to
	// fail one (search.Config.Screen); nil until defaults are applied
	// (then true). false keeps every probe a full one.
	Screen *bool `yaml:"screen"`
}

// PredictFrom is the simulator profile a server's bracket is predicted
// from: a built-in profile's name or a profile JSON file (relative to the
// rehearsal file), with the engine limits the server runs with where they
// differ from the profile's (vLLM's --max-num-seqs; the KV cache's tokens).
type PredictFrom struct {
	Profile       string `yaml:"profile"`
	MaxNumSeqs    int    `yaml:"max_num_seqs"`
	KVTokenBudget int    `yaml:"kv_token_budget"`
}

// Bracket is a predicted capacity bracket.
type Bracket struct {
	MaxPass int `yaml:"max_pass"`
	MinFail int `yaml:"min_fail"`
}

// Defaults of a capacity search.
const (
	DefaultCapacityStart = 1
	DefaultCapacityMax   = 1024
	// DefaultCapacityMinRequests is min_requests when none is given for a
	// target α that is not valid (the check refuses it then); a valid α
	// gets search.MinPass(α).
	DefaultCapacityMinRequests = 100
	// DefaultCapacityMaxRequests is min_requests · 8: a probe looks at its
	// interval at min_requests · 2^k (search.Look), four times at most.
	DefaultCapacityMaxRequestsFactor = 8
	DefaultCapacityRepeats           = 1
	// DefaultCapacityScreen: the doubling screens its loads.
	DefaultCapacityScreen = true
)

// ApplyDefaults fills what c leaves unset, for the attainment target
// alpha: min_requests is the fewest requests whose interval can pass α
// (search.MinPass: 73 at 0.95), so the first look can pass a load and no
// look is spent where none could.
func (c *Capacity) ApplyDefaults(alpha float64) {
	if c.Start == 0 {
		c.Start = DefaultCapacityStart
	}
	if c.MaxConcurrency == 0 {
		c.MaxConcurrency = max(DefaultCapacityMax, c.Start)
	}
	if c.MinRequests == 0 {
		c.MinRequests = DefaultCapacityMinRequests
		if n := search.MinPass(alpha); n > 0 {
			c.MinRequests = n
		}
	}
	if c.MaxRequests == 0 {
		c.MaxRequests = DefaultCapacityMaxRequestsFactor * c.MinRequests
	}
	if c.WarmupRequests == nil {
		v := -1
		c.WarmupRequests = &v
	}
	if c.Repeats == nil {
		v := DefaultCapacityRepeats
		c.Repeats = &v
	}
	if c.Screen == nil {
		v := DefaultCapacityScreen
		c.Screen = &v
	}
}

// Spec is the search as results.json records it, for server.
func (c *Capacity) Spec(server string) search.Spec {
	s := search.Spec{
		Start: c.Start, Max: c.MaxConcurrency, MinRequests: c.MinRequests, MaxRequests: c.MaxRequests,
		MaxDurationS: c.MaxDuration.D().Seconds(), WarmupRequests: *c.WarmupRequests, Repeats: *c.Repeats,
		Screen: c.Screen == nil || *c.Screen, Steer: true,
	}
	if b, ok := c.Predicted[server]; ok {
		s.Predicted = &search.Bracket{MaxPass: b.MaxPass, MinFail: b.MinFail}
	}
	return s
}

// CapacityProblem is one thing wrong with a capacity search: the key
// under capacity: and why (bench-like commands name the flag instead).
type CapacityProblem struct{ Key, Msg string }

// Check lists what is wrong with c after defaults, for capacity: and
// rehearse capacity's flags alike.
func (c *Capacity) Check() []CapacityProblem {
	var out []CapacityProblem
	add := func(key, format string, a ...any) { out = append(out, CapacityProblem{key, fmt.Sprintf(format, a...)}) }
	switch {
	case c.Start < 1:
		add("start", "%d: must be at least 1", c.Start)
	case c.MaxConcurrency < c.Start:
		add("max_concurrency", "%d is below the start %d", c.MaxConcurrency, c.Start)
	}
	if c.MinRequests < 1 {
		add("min_requests", "%d: must be at least 1", c.MinRequests)
	}
	if c.MaxRequests < c.MinRequests {
		add("max_requests", "%d is below min_requests %d (a probe could never resolve)", c.MaxRequests, c.MinRequests)
	}
	if c.MaxDuration < 0 {
		add("max_duration", "%v: negative", c.MaxDuration)
	}
	if c.WarmupRequests != nil && *c.WarmupRequests < -1 {
		add("warmup_requests", "%d: must be 0 or more (absent: two per client)", *c.WarmupRequests)
	}
	if c.Repeats != nil && *c.Repeats < 0 {
		add("repeats", "%d: must be 0 or more", *c.Repeats)
	}
	for _, name := range sortedKeys(mapKeys(c.Predicted)) {
		if b := c.Predicted[name]; b.MaxPass < 0 || b.MinFail < 0 || (b.MinFail > 0 && b.MinFail <= b.MaxPass) {
			add("predicted."+name, "[%d, %d]: want 0 ≤ max_pass < min_fail", b.MaxPass, b.MinFail)
		}
	}
	for _, name := range sortedKeys(mapKeys(c.PredictFrom)) {
		f, key := c.PredictFrom[name], "predict_from."+name
		switch {
		case f.Profile == "":
			add(key+".profile", "empty: want a built-in profile's name or a profile JSON file")
		case f.MaxNumSeqs < 0:
			add(key+".max_num_seqs", "%d: must be 0 (the profile's) or more", f.MaxNumSeqs)
		case f.KVTokenBudget < 0:
			add(key+".kv_token_budget", "%d: must be 0 (the profile's) or more", f.KVTokenBudget)
		}
		if _, ok := c.Predicted[name]; ok {
			add(key, "and predicted.%s both give %s a bracket: keep one", name, name)
		}
	}
	return out
}

func (r *Rehearsal) validateCapacity(names map[string]int, p *Problems) {
	c := r.Capacity
	if c == nil {
		return
	}
	if r.SLO == nil {
		p.add("capacity", "needs slo: (the objectives and attainment target a probe is judged against)")
	}
	for _, e := range c.Check() {
		p.add("capacity."+e.Key, "%s", e.Msg)
	}
	for _, name := range sortedKeys(mapKeys(c.Predicted)) {
		if _, ok := names[name]; !ok && len(names) > 0 {
			p.add("capacity.predicted."+name, "names no server")
		}
	}
	for _, name := range sortedKeys(mapKeys(c.PredictFrom)) {
		if _, ok := names[name]; !ok && len(names) > 0 {
			p.add("capacity.predict_from."+name, "names no server")
		}
	}
}

func mapKeys[V any](m map[string]V) map[string]int {
	out := make(map[string]int, len(m))
	for k := range m {
		out[k] = 0
	}
	return out
}
