package plan

import (
	"slices"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/workload"
)

// Side probes go beside every recorded wave the plan orders, never beside
// a warm-up or the mechanism check; the models are assigned per prompt
// in the planned load, and stamped on each record by its prompt.
func TestSideProbesAndModelsPlanned(t *testing.T) {
	sp := &SideProbes{RateRPS: 4, Prompt: "Hi", MaxTokens: 1}
	wl := Workload{Concurrencies: []int{2}, Repeats: 2, WarmupWaves: 1, NumWarmups: 3, SideProbes: sp,
		Open:           &OpenLoop{RequestRatesRPS: []float64{5}, Arrival: workload.ArrivalPoisson, NumRequests: 4},
		MechanismCheck: &MechanismCheck{Server: "a", Concurrency: 2}}
	var beside int
	for _, w := range Server(wl, "a") {
		switch {
		case w.Kind == contract.KindRecorded && w.SideProbes != sp:
			t.Errorf("%s wave at %s: side probes %+v, want the workload's", w.Kind, w.Label(), w.SideProbes)
		case w.Kind != contract.KindRecorded && w.SideProbes != nil:
			t.Errorf("%s wave at %s: side probes %+v, want none", w.Kind, w.Label(), w.SideProbes)
		case w.SideProbes != nil:
			beside++
		}
	}
	if beside != 4 {
		t.Errorf("%d recorded waves with side probes, want 4 (2 closed, 2 open)", beside)
	}
	if got := sp.Interval(); got != 250*time.Millisecond {
		t.Errorf("interval %v at 4 req/s", got)
	}

	temp, usage := 0.0, true
	cfg := &config.Rehearsal{Workload: config.Workload{Concurrencies: []int{1}, Repeats: 1, MaxTokens: 4, Temperature: &temp, IncludeUsage: &usage,
		Models:     &config.Models{Names: []string{"x", "y", "z"}, Assignment: workload.AssignRoundRobin},
		SideProbes: &config.SideProbes{RateRPS: 2, Prompt: "Hi", MaxTokens: 1}}}
	set := workload.Set{Prompts: []workload.Prompt{{Text: "p0"}, {Text: "p1"}, {Text: "p2"}, {Text: "p3"}}}
	planned := WorkloadOf(cfg, set)
	if !slices.Equal(planned.Load.Models, []string{"x", "y", "z", "x"}) {
		t.Errorf("models %q", planned.Load.Models)
	}
	if s := planned.SideProbes; s == nil || *s != (SideProbes{RateRPS: 2, Prompt: "Hi", MaxTokens: 1}) {
		t.Errorf("side probes %+v", s)
	}
	if err := planned.Load.Validate(); err != nil {
		t.Error(err)
	}
	r := contract.Record{Prompt: 3}
	planned.Load.Stamp(&r)
	if r.Model != "x" || r.MaxTokens != 4 {
		t.Errorf("stamped %q, max_tokens %d", r.Model, r.MaxTokens)
	}
	bad := planned.Load
	bad.Models = bad.Models[:2]
	if err := bad.Validate(); err == nil {
		t.Error("2 models for 4 prompts validated")
	}
}
