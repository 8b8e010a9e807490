package plan

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/workload"
)

func TestServerRampAndTrace(t *testing.T) {
	ramp := &contract.Ramp{Strategy: contract.RampExponential, StartRPS: 1, EndRPS: 20}
	for _, tc := range []struct {
		name string
		wl   bundle.Workload
		want []string
	}{
		{"a ramp wave per repeat, a seed per repeat", bundle.Workload{Repeats: 2, Open: &bundle.OpenLoop{Arrival: "poisson", Seed: 4, DurationS: 10, Ramp: ramp}}, []string{
			"recorded/open ramp 1→20 req/s, exponential r1 poisson seed=4 n=0 d=10s cap=0",
			"recorded/open ramp 1→20 req/s, exponential r2 poisson seed=5 n=0 d=10s cap=0",
		}},
		{"a replay per repeat, after the closed loop", bundle.Workload{Concurrencies: []int{2}, Repeats: 2, Open: &bundle.OpenLoop{Arrival: "trace", NumRequests: 7}}, []string{
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

// TestWorkloadCarriesTheTrace: the bundle's workload records the ramp, and
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
	w := Workload(cfg, set)
	if w.Kind != "open" || !slices.Equal(w.ArrivalsS, []float64{0, 1.5}) || w.Open.Arrival != "trace" || w.Open.DurationS != 60 {
		t.Errorf("trace workload: kind %s, arrivals %v, open %+v", w.Kind, w.ArrivalsS, w.Open)
	}
	cfg, err = config.Parse([]byte(head+"workload: {concurrencies: [], prompts: {source: trace, path: t.jsonl}, open_loop: {arrival: fixed, ramp: {strategy: linear, start_rps: 2, end_rps: 8}, num_requests: 10}}\n"), "t.yaml", dir)
	if err != nil {
		t.Fatal(err)
	}
	w = Workload(cfg, set)
	if w.ArrivalsS != nil || w.Open.Ramp == nil || *w.Open.Ramp != (contract.Ramp{Strategy: "linear", StartRPS: 2, EndRPS: 8}) {
		t.Errorf("ramp workload: arrivals %v, ramp %+v", w.ArrivalsS, w.Open.Ramp)
	}
}
