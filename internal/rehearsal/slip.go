package rehearsal

import (
	"context"
	"math"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/promscrape"
)

// The simulator's own series of its clock (internal/sim/metrics.go).
const (
	simSteps       = "rehearse_sim_steps_total"
	simSlip        = "rehearse_sim_clock_slip_seconds_total"
	simScale       = "rehearse_sim_time_scale"
	simLateness    = "rehearse_sim_step_lateness_seconds"
	simLatenessMax = "rehearse_sim_step_lateness_max_seconds"
)

// simClock is one reading of a simulator's clock series.
type simClock struct {
	steps, slipS, scale, latenessMax float64
	// bounds and cum are the lateness histogram's buckets, +Inf last.
	bounds []float64
	cum    []uint64
}

// scrapeSimClock reads a simulated server's clock series; ok is false when
// the page could not be read or is not a simulator's.
func scrapeSimClock(ctx context.Context, s promscrape.Scraper) (simClock, bool) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	fams, err := s.Families(ctx)
	if err != nil {
		return simClock{}, false
	}
	return simClockOf(fams)
}

func simClockOf(fams map[string]*dto.MetricFamily) (simClock, bool) {
	one := func(name string) (*dto.Metric, bool) {
		f, ok := fams[name]
		if !ok || len(f.Metric) != 1 {
			return nil, false
		}
		return f.Metric[0], true
	}
	var c simClock
	steps, ok1 := one(simSteps)
	slip, ok2 := one(simSlip)
	scale, ok3 := one(simScale)
	late, ok4 := one(simLateness)
	lmax, ok5 := one(simLatenessMax)
	if !(ok1 && ok2 && ok3 && ok4 && ok5) || late.Histogram == nil {
		return simClock{}, false
	}
	c.steps, c.slipS, c.scale = steps.GetCounter().GetValue(), slip.GetCounter().GetValue(), scale.GetGauge().GetValue()
	c.latenessMax = lmax.GetGauge().GetValue()
	for _, b := range late.Histogram.Bucket {
		c.bounds = append(c.bounds, b.GetUpperBound())
		c.cum = append(c.cum, b.GetCumulativeCount())
	}
	if n := late.Histogram.GetSampleCount(); len(c.bounds) == 0 || !math.IsInf(c.bounds[len(c.bounds)-1], 1) {
		c.bounds = append(c.bounds, math.Inf(1))
		c.cum = append(c.cum, n)
	}
	return c, true
}

// slipBetween is what the simulator's clock did between two readings:
// steps run, those more than contract.StallThresholdS late (counted from
// the buckets, so a step between 20 ms and the next bound counts), the
// upper bound of the latest step's bucket (beyond the last bound, the
// simulator's largest lateness so far), and the seconds of schedule lost,
// in wall time. ok is false when the readings do not belong together (the
// simulator restarted, or its buckets changed).
func slipBetween(a, b simClock) (*contract.ServerSlip, bool) {
	if len(a.bounds) != len(b.bounds) || b.steps < a.steps || b.slipS < a.slipS || b.scale <= 0 {
		return nil, false
	}
	for i := range a.bounds {
		if a.bounds[i] != b.bounds[i] || b.cum[i] < a.cum[i] {
			return nil, false
		}
	}
	s := &contract.ServerSlip{Steps: int(b.steps - a.steps), SlipS: (b.slipS - a.slipS) / b.scale}
	n := len(b.cum)
	total := b.cum[n-1] - a.cum[n-1]
	var atThreshold uint64
	for i, bound := range b.bounds {
		if bound >= contract.StallThresholdS {
			atThreshold = b.cum[i] - a.cum[i]
			break
		}
	}
	s.Late = int(total - atThreshold)
	prev := uint64(0)
	for i, bound := range b.bounds {
		d := b.cum[i] - a.cum[i]
		if d > prev {
			s.MaxS = bound
			if math.IsInf(bound, 1) {
				s.MaxS = b.latenessMax
			}
		}
		prev = d
	}
	return s, true
}
