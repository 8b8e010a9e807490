package rehearsal_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/contract"
)

// TestSustainedExampleRuns runs examples/sustained.yaml against its two
// `rehearse sim` servers, one repeat at time scale 200 (its client timeout
// and duration bound scaled with it): every sustained wave's warm-up is a
// wave of its own, the bundle verifies (run.do), and each server has a
// sustained aggregate per concurrency judged against the file's slo:.
func TestSustainedExampleRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("launches two simulators")
	}
	cfg, err := config.Load(filepath.Join("..", "..", "examples", "sustained.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	const from, to = 50.0, 200.0
	for i := range cfg.Servers {
		argv := cfg.Servers[i].Launch
		k := slices.Index(argv, "--time-scale")
		if k < 0 || argv[k+1] != "50" {
			t.Fatalf("servers[%d]: no --time-scale 50 in %q", i, argv)
		}
		argv[k+1] = "200"
	}
	w := &cfg.Workload
	w.Repeats = 1
	w.Timeout = config.Duration(float64(w.Timeout) * from / to)
	w.Sustained.Duration = config.Duration(float64(w.Sustained.Duration) * from / to)
	r := &run{cfg: cfg, dir: filepath.Join(t.TempDir(), "bundle")}
	out := r.do(t, context.Background())
	if len(out.Failed) > 0 {
		t.Fatalf("failed: %v", out.Failed)
	}
	res := out.Results
	warm, measured := 0, 0
	for _, wave := range res.Waves {
		if wave.Mode != contract.ModeSustained {
			t.Errorf("wave %+v is not sustained", wave)
		}
		switch wave.Kind {
		case contract.KindWarmup:
			warm++
		case contract.KindRecorded:
			measured++
		}
	}
	if warm != 4 || measured != 4 {
		t.Errorf("%d warm-up and %d measured waves, want 4 and 4", warm, measured)
	}
	var keys []string
	for _, a := range res.Aggregates {
		keys = append(keys, a.Server+" at "+a.LoadLabel())
	}
	want := []string{"serial at 4 clients, sustained", "serial at 16 clients, sustained", "batching at 4 clients, sustained", "batching at 16 clients, sustained"}
	if !slices.Equal(keys, want) {
		t.Errorf("aggregates %q, want %q", keys, want)
	}
	// The example's slo: reaches results.json and every aggregate.
	if res.SLO == nil || res.SLO.Expr != "ttft<=10ms,tpot<=1ms" || res.SLO.AttainmentTarget != 0.9 {
		t.Errorf("slo block %+v", res.SLO)
	}
	for _, a := range res.Aggregates {
		if a.SLO == nil || a.SLO.N != a.Failures.Total || a.SLO.N == 0 {
			t.Errorf("%s at %s: slo %+v", a.Server, a.LoadLabel(), a.SLO)
		}
	}
	// run.do has verified the bundle.
}
