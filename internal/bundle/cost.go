package bundle

import (
	"fmt"
	"math"
)

// CostBasis is the price of the hardware under test as the person who ran
// the rehearsal gave it (--gpu-hour-cost, --gpus): the basis of every cost
// figure of the bundle. It is provenance: nothing in the records implies it.
type CostBasis struct {
	// GPUHourUSD is the price of one GPU for one hour, in US dollars.
	GPUHourUSD float64 `json:"gpu_hour_usd"`
	// GPUs is how many GPUs the server under test occupies.
	GPUs int `json:"gpus"`
}

// Check reports what is wrong with b, naming the field.
func (b CostBasis) Check() error {
	if !(b.GPUHourUSD > 0) || math.IsInf(b.GPUHourUSD, 0) {
		return fmt.Errorf("gpu_hour_usd %v: want a positive number of US dollars", b.GPUHourUSD)
	}
	if b.GPUs < 1 {
		return fmt.Errorf("gpus %d: want at least 1", b.GPUs)
	}
	return nil
}

// USDPerMillionTokens is the cost of a million tokens produced at tokS
// tokens per second: gpu_hour_usd × gpus ÷ (tokS × 3600) × 10⁶; nil where
// tokS is not positive (nothing was produced, so no price per token).
func (b CostBasis) USDPerMillionTokens(tokS float64) *float64 {
	if !(tokS > 0) || math.IsInf(tokS, 0) {
		return nil
	}
	v := b.GPUHourUSD * float64(b.GPUs) / (tokS * 3600) * 1e6
	return &v
}

// Cost is the bundle's cost figures, derived from provenance.cost and the
// figures they price; verify recomputes them.
type Cost struct {
	GPUHourUSD float64 `json:"gpu_hour_usd"`
	GPUs       int     `json:"gpus"`
	// Capacity prices each capacity answer: output tokens of good requests
	// at max_pass (the search's goodput_tok_s).
	Capacity []CapacityCost `json:"capacity,omitempty"`
	// Aggregates prices every aggregate's median goodput (output tokens of
	// successful requests per second).
	Aggregates []AggregateCost `json:"aggregates,omitempty"`
}

// CapacityCost is one server's cost per million output tokens at its
// capacity answer; null without a passing load or with no good token there.
type CapacityCost struct {
	Server                    string   `json:"server"`
	MaxPass                   *int     `json:"max_pass"`
	GoodputTokS               *float64 `json:"goodput_tok_s"`
	USDPerMillionOutputTokens *float64 `json:"usd_per_million_output_tokens"`
}

// AggregateCost is one aggregate's cost per million output tokens at its
// median goodput; null where that is 0 or absent.
type AggregateCost struct {
	Server                    string   `json:"server"`
	Load                      string   `json:"load"`
	GoodputTokS               *float64 `json:"goodput_tok_s"`
	USDPerMillionOutputTokens *float64 `json:"usd_per_million_output_tokens"`
}

// ComputeCost is the cost block of r: nil without provenance.cost.
func (r *Results) ComputeCost() *Cost {
	b := r.Provenance.Cost
	if b == nil {
		return nil
	}
	c := &Cost{GPUHourUSD: b.GPUHourUSD, GPUs: b.GPUs}
	for _, cp := range r.Capacity {
		e := CapacityCost{Server: cp.Server, MaxPass: cp.MaxPass, GoodputTokS: cp.GoodputTokS}
		if cp.MaxPass != nil && cp.GoodputTokS != nil {
			e.USDPerMillionOutputTokens = b.USDPerMillionTokens(*cp.GoodputTokS)
		}
		c.Capacity = append(c.Capacity, e)
	}
	for _, a := range r.Aggregates {
		e := AggregateCost{Server: a.Server, Load: a.LoadLabel(), GoodputTokS: a.Goodput.Median}
		if a.Goodput.Median != nil {
			e.USDPerMillionOutputTokens = b.USDPerMillionTokens(*a.Goodput.Median)
		}
		c.Aggregates = append(c.Aggregates, e)
	}
	return c
}

// CapacityCostOf is the cost entry of server's capacity answer, if any.
func (c *Cost) CapacityCostOf(server string) (CapacityCost, bool) {
	if c == nil {
		return CapacityCost{}, false
	}
	for _, e := range c.Capacity {
		if e.Server == server {
			return e, true
		}
	}
	return CapacityCost{}, false
}

// checkCost checks provenance.cost and recomputes the cost block from it
// and the figures it prices.
func checkCost(res *Results) []Problem {
	var probs []Problem
	if b := res.Provenance.Cost; b != nil {
		if err := b.Check(); err != nil {
			probs = append(probs, Problem{File: ResultsFile, Field: "provenance.cost", Msg: err.Error()})
		}
	}
	want := res.ComputeCost()
	switch {
	case res.Cost == nil && want == nil:
		return probs
	case res.Cost != nil && want == nil:
		return append(probs, Problem{File: ResultsFile, Field: "cost", Msg: "cost figures without provenance.cost, the price they rest on"})
	case res.Cost == nil:
		return append(probs, Problem{File: ResultsFile, Field: "cost", Msg: "absent, but provenance.cost is set: the cost figures were not written"})
	}
	for _, d := range diffJSON(res.Cost, want) {
		probs = append(probs, Problem{File: ResultsFile, Field: "cost." + d.path, Msg: fmt.Sprintf("stored %s, recomputed %s", d.a, d.b)})
	}
	return probs
}
