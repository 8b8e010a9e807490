package rehearsal_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rehearse/rehearse/examples"
	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/rehearsal"
)

func TestScaleSimulated(t *testing.T) {
	for _, c := range []struct {
		k       float64
		arg     string
		timeout time.Duration
		period  time.Duration
	}{
		{10, "10", 6 * time.Second, 10 * time.Millisecond},
		{20, "20", 3 * time.Second, 5 * time.Millisecond},
		{1, "1", 60 * time.Second, 100 * time.Millisecond},
		{2.5, "2.5", 24 * time.Second, 40 * time.Millisecond},
	} {
		cfg, err := config.Parse(examples.Simulated, "simulated.yaml", ".")
		if err != nil {
			t.Fatal(err)
		}
		if err := rehearsal.ScaleSimulated(cfg, c.k); err != nil {
			t.Fatal(err)
		}
		for _, s := range cfg.Servers {
			i := slices.Index(s.Launch, "--time-scale")
			if i < 0 || s.Launch[i+1] != c.arg {
				t.Errorf("k=%g: %s argv %q", c.k, s.Name, s.Launch)
			}
		}
		if cfg.Workload.Timeout.D() != c.timeout || cfg.MechanismCheck.Period.D() != c.period {
			t.Errorf("k=%g: timeout %v period %v, want %v %v", c.k, cfg.Workload.Timeout, cfg.MechanismCheck.Period, c.timeout, c.period)
		}
	}
	cfg, err := config.Parse([]byte("model: {id: m}\nservers: [{name: s, launch: [x, '{port}']}]\n"), "x.yaml", ".")
	if err != nil {
		t.Fatal(err)
	}
	if err := rehearsal.ScaleSimulated(cfg, 10); err == nil || !strings.Contains(err.Error(), "servers[0].launch: no --time-scale argument") {
		t.Errorf("got %v", err)
	}
	// Both forms of the flag, as the provenance reads them.
	cfg, err = config.Parse([]byte("model: {id: m}\nservers:\n  - {name: a, launch: [x, '{port}', --time-scale, '5']}\n  - {name: b, launch: [x, '{port}', --time-scale=5]}\n"), "x.yaml", ".")
	if err != nil {
		t.Fatal(err)
	}
	if err := rehearsal.ScaleSimulated(cfg, 10); err != nil {
		t.Fatal(err)
	}
	if a, b := cfg.Servers[0].Launch, cfg.Servers[1].Launch; a[3] != "10" || b[2] != "--time-scale=10" {
		t.Errorf("argv %q and %q", a, b)
	}
	cfg, err = config.Parse([]byte("model: {id: m}\nservers: [{name: a, launch: [x, '{port}', --time-scale=fast]}]\n"), "x.yaml", ".")
	if err != nil {
		t.Fatal(err)
	}
	if err := rehearsal.ScaleSimulated(cfg, 10); err == nil || !strings.Contains(err.Error(), `servers[0].launch: --time-scale "fast" is not a positive number`) {
		t.Errorf("got %v", err)
	}
}
