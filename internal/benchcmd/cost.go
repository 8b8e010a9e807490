package benchcmd

import (
	"math"

	"github.com/spf13/pflag"

	"github.com/rehearse/rehearse/internal/config"
)

// costOptions are --gpu-hour-cost and --gpus: the price the bundle's cost
// figures rest on (recorded as provenance.cost).
type costOptions struct {
	gpuHourUSD float64
	gpus       int
	gpusSet    bool
	priceSet   bool
}

func costFlags(f *pflag.FlagSet, o *costOptions) {
	f.Float64Var(&o.gpuHourUSD, "gpu-hour-cost", 0, "price of one GPU-hour in US dollars: the report gives the cost per million output tokens (at the capacity answer, and at every load)")
	f.IntVar(&o.gpus, "gpus", 1, "GPUs the server under test occupies (split evenly over several --base-url): the results give goodput per GPU, and --gpu-hour-cost prices them")
}

// noteChanged records which cost flags were given.
func (o *costOptions) noteChanged(f *pflag.FlagSet) {
	o.gpusSet, o.priceSet = f.Changed("gpus"), f.Changed("gpu-hour-cost")
}

// check refuses a price that is not a positive number, and --gpus below 1.
func (o *costOptions) check() error {
	switch {
	case o.priceSet && !(o.gpuHourUSD > 0) || o.gpuHourUSD < 0 || math.IsInf(o.gpuHourUSD, 0):
		return usageError("--gpu-hour-cost %v: want a positive number of US dollars per GPU-hour, e.g. 3.50", o.gpuHourUSD)
	case o.gpus < 1:
		return usageError("--gpus %d: want at least 1", o.gpus)
	}
	return nil
}

// config is the rehearsal's cost: of the flags; nil without --gpu-hour-cost.
func (o *costOptions) config() *config.Cost {
	if !(o.gpuHourUSD > 0) {
		return nil
	}
	return &config.Cost{GPUHourUSD: o.gpuHourUSD, GPUs: o.gpus}
}
