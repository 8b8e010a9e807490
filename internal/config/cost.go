package config

import "math"

// Cost is the price of the hardware under test: the report then gives the
// cost per million output tokens at each capacity answer and at every
// load (results.json provenance.cost and its cost block). One price for
// every server of the rehearsal.
type Cost struct {
	// GPUHourUSD is the price of one GPU for one hour, in US dollars.
	GPUHourUSD float64 `yaml:"gpu_hour_usd"`
	// GPUs is how many GPUs a server under test occupies (default 1).
	GPUs int `yaml:"gpus"`
}

// DefaultCostGPUs is cost.gpus when the file leaves it out.
const DefaultCostGPUs = 1

func (c *Cost) applyDefaults() {
	if c.GPUs == 0 {
		c.GPUs = DefaultCostGPUs
	}
}

func (r *Rehearsal) validateCost(p *Problems) {
	c := r.Cost
	if c == nil {
		return
	}
	if !(c.GPUHourUSD > 0) || math.IsInf(c.GPUHourUSD, 0) {
		p.add("cost.gpu_hour_usd", "%v: want a positive number of US dollars per GPU-hour, e.g. 3.50", c.GPUHourUSD)
	}
	if c.GPUs < 1 {
		p.add("cost.gpus", "%d: want at least 1", c.GPUs)
	}
}
