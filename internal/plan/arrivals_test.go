package plan

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/workload"
)

func TestServerRampAndTrace(t *testing.T) {
	ramp := &contract.Ramp{Strategy: contract.RampExponential, StartRPS: 1, EndRPS: 20}
	for _, tc := range []struct {
		name string
		wl   Workload
		want []string
	}{
		{"a ramp wave per repeat, a seed per repeat", Workload{Repeats: 2, Open: &OpenLoop{Arrival: "poisson", Seed: 4, Duration: 10 * time.Second, Ramp: ramp}}, []string{
			"recorded/open ramp 1→20 req/s, exponential r1 poisson seed=4 n=0 d=10s cap=0",
			"recorded/open ramp 1→20 req/s, exponential r2 poisson seed=5 n=0 d=10s cap=0",
		}},
		{"a replay per repeat, after the closed loop", Workload{Concurrencies: []int{2}, Repeats: 2, Open: &OpenLoop{Arrival: "trace", NumRequests: 7}}, []string{
			"recorded/closed 2 clients r1 cold", "recorded/closed 2 clients r2",
			"recorded/open trace replay r1 trace seed=0 n=7 d=0s cap=0", "recorded/open trace replay r2 trace seed=0 n=7 d=0s cap=0",
		}},
	} {
		ws := Server(tc.wl, "a")
		if got, want := describe(ws), strings.Join(tc.want, "\n"); got != want {
			t.Errorf("%s:\n%s\nwant\n%s", tc.name, got, want)
		}
		for _, w := range ws {
			if w.Open != nil && !((w.Open.Ramp == ramp) == (tc.wl.Open.Ramp == ramp)) {
				t.Errorf("%s: the ramp does not reach the wave", tc.name)
			}
		}
	}
}

// TestWorkloadCarriesTheTrace: the planned workload keeps the ramp, and
// the traced arrivals aligned with the prompts only for arrival trace.
func TestWorkloadCarriesTheTrace(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "t.jsonl"), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const head = "model: {id: m}\nservers: [{name: v, base_url: \"http://127.0.0.1:1\"}]\n"
	set := workload.Set{Prompts: []workload.Prompt{{Text: "a", MaxTokens: 2}, {Text: "b", MaxTokens: 3}},
		Arrivals: []time.Duration{0, 1500 * time.Millisecond}, Record: workload.SourceRecord{Name: workload.SourceTrace}}
	cfg, err := config.Parse([]byte(head+"workload: {concurrencies: [], prompts: {source: trace, path: t.jsonl}, open_loop: {arrival: trace, duration: 1m}}\n"), "t.yaml", dir)
	if err != nil {
		t.Fatal(err)
	}
	w := WorkloadOf(cfg, set)
	if w.Kind() != "open" || !slices.Equal(w.Load.Arrivals, []time.Duration{0, 1500 * time.Millisecond}) || w.Open.Arrival != "trace" || w.Open.Duration != time.Minute {
		t.Errorf("trace workload: kind %s, arrivals %v, open %+v", w.Kind(), w.Load.Arrivals, w.Open)
	}
	cfg, err = config.Parse([]byte(head+"workload: {concurrencies: [], prompts: {source: trace, path: t.jsonl}, open_loop: {arrival: fixed, ramp: {strategy: linear, start_rps: 2, end_rps: 8}, num_requests: 10}}\n"), "t.yaml", dir)
	if err != nil {
		t.Fatal(err)
	}
	w = WorkloadOf(cfg, set)
	if w.Load.Arrivals != nil || w.Open.Ramp == nil || *w.Open.Ramp != (contract.Ramp{Strategy: "linear", StartRPS: 2, EndRPS: 8}) {
		t.Errorf("ramp workload: arrivals %v, ramp %+v", w.Load.Arrivals, w.Open.Ramp)
	}
}
