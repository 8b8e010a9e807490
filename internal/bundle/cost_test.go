package bundle_test

import (
	"math"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/bundle/bundletest"
	"github.com/rehearse/rehearse/internal/plot/plottest"
)

func pricedCapacity(t *testing.T) *bundle.Results {
	t.Helper()
	res := plottest.CapacityResults(plottest.DefaultCapacity())
	res.Provenance.Cost = &bundle.CostBasis{GPUHourUSD: 3.5, GPUs: 2}
	res.Recompute()
	return res
}

// The cost at a capacity answer is gpu_hour_usd × gpus ÷ (good tok/s at
// max_pass × 3600) × 10⁶, and verify recomputes it.
func TestCostAtCapacity(t *testing.T) {
	res := pricedCapacity(t)
	if probs := bundle.VerifyResults(res); len(probs) > 0 {
		t.Fatalf("priced results do not verify: %v", probs)
	}
	if res.Cost == nil || len(res.Cost.Capacity) != len(res.Capacity) {
		t.Fatalf("cost block %+v", res.Cost)
	}
	for i, c := range res.Capacity {
		e := res.Cost.Capacity[i]
		if c.GoodputTokS == nil || e.USDPerMillionOutputTokens == nil {
			t.Fatalf("%s: no goodput or no cost: %+v", c.Server, e)
		}
		want := 3.5 * 2 / (*c.GoodputTokS * 3600) * 1e6
		if math.Abs(*e.USDPerMillionOutputTokens-want) > 1e-9*want {
			t.Errorf("%s: $%v per million tokens, want %v", c.Server, *e.USDPerMillionOutputTokens, want)
		}
	}
	if len(res.Cost.Aggregates) != len(res.Aggregates) {
		t.Errorf("%d aggregate costs for %d aggregates", len(res.Cost.Aggregates), len(res.Aggregates))
	}
}

func TestVerifyCatchesAlteredCost(t *testing.T) {
	for name, alter := range map[string]func(*bundle.Results){
		"figure":       func(r *bundle.Results) { *r.Cost.Capacity[0].USDPerMillionOutputTokens *= 0.5 },
		"price":        func(r *bundle.Results) { r.Provenance.Cost.GPUHourUSD = 1 },
		"no basis":     func(r *bundle.Results) { r.Provenance.Cost = nil },
		"not written":  func(r *bundle.Results) { r.Cost = nil },
		"zero gpus":    func(r *bundle.Results) { r.Provenance.Cost.GPUs = 0 },
		"gpus in cost": func(r *bundle.Results) { r.Cost.GPUs = 8 },
	} {
		res := pricedCapacity(t)
		alter(res)
		probs := bundle.VerifyResults(res)
		found := false
		for _, p := range probs {
			if strings.Contains(p.Field, "cost") {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: verify did not object to the cost: %v", name, probs)
		}
	}
}

func TestUSDPerMillionTokens(t *testing.T) {
	b := bundle.CostBasis{GPUHourUSD: 3.6, GPUs: 1}
	if v := b.USDPerMillionTokens(1000); v == nil || math.Abs(*v-1) > 1e-12 {
		t.Errorf("$3.60/h at 1000 tok/s: %v, want $1 per million", v)
	}
	if v := b.USDPerMillionTokens(0); v != nil {
		t.Errorf("no tokens: %v, want nil", *v)
	}
	if (bundle.CostBasis{GPUHourUSD: -1, GPUs: 1}).Check() == nil || (bundle.CostBasis{GPUHourUSD: math.Inf(1), GPUs: 1}).Check() == nil {
		t.Error("a negative or infinite price passes Check")
	}
}

// Parts priced alike merge into one priced bundle; parts priced
// differently, or one priced and one not, are refused: one bundle's cost
// figures rest on one price.
func TestMergeKeepsOnePrice(t *testing.T) {
	part := func(started string, c *bundle.CostBasis) *bundle.Results {
		r := bundletest.SeedLike()
		r.Records, r.MechanismCheck, r.Workload.MechanismCheck = nil, nil, nil
		r.Provenance.StartedAt, r.Provenance.Cost = started, c
		return r
	}
	p := &bundle.CostBasis{GPUHourUSD: 2, GPUs: 1}
	out, err := bundle.MergeWith([]*bundle.Results{part("2026-11-30T12:00:00Z", p), part("2026-11-30T13:00:00Z", &bundle.CostBasis{GPUHourUSD: 2, GPUs: 1})}, []string{"a", "b"}, bundle.MergeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if out.Cost == nil || out.Provenance.Cost == nil || *out.Provenance.Cost != *p {
		t.Errorf("merged cost %+v, provenance %+v", out.Cost, out.Provenance.Cost)
	}
	for _, other := range []*bundle.CostBasis{{GPUHourUSD: 3, GPUs: 1}, nil} {
		_, err := bundle.MergeWith([]*bundle.Results{part("2026-11-30T12:00:00Z", p), part("2026-11-30T13:00:00Z", other)}, []string{"a", "b"}, bundle.MergeOptions{})
		if err == nil || !strings.Contains(err.Error(), "b: priced at ") || !strings.Contains(err.Error(), "one bundle's cost figures need one price") {
			t.Errorf("parts priced at %+v and %+v: %v", p, other, err)
		}
	}
}
