package rehearsal

import (
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/config"
)

func parse(t *testing.T, yaml string) *config.Rehearsal {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), "t.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestSimulationProvenance(t *testing.T) {
	cfg := parse(t, `model: {id: m}
servers:
  - {name: a, simulated: p1, launch: [r, sim, --port, "{port}", --time-scale, "25"]}
  - {name: b, simulated: p2, launch: [r, sim, --port, "{port}", --time-scale=25]}
  - {name: real, launch: [vllm, serve, --port, "{port}"]}
`)
	sim := Simulation(cfg)
	if sim == nil || sim.TimeScale != 25 || sim.Profiles["a"] != "p1" || sim.Profiles["b"] != "p2" || len(sim.Profiles) != 2 {
		t.Fatalf("simulation = %+v", sim)
	}
	if !strings.Contains(sim.Note, "Servers a, b were `rehearse sim`") || !strings.Contains(sim.Note, "Servers real were real") {
		t.Errorf("note: %s", sim.Note)
	}
	cfg.Servers[1].Launch[4] = "--time-scale=5"
	if sim := Simulation(cfg); sim.TimeScale != 0 || !strings.Contains(sim.Note, "different time scales") {
		t.Errorf("mixed scales: %+v", sim)
	}
	if Simulation(parse(t, "model: {id: m}\nservers: [{name: v, launch: [vllm, '{port}']}]\n")) != nil {
		t.Error("no simulated server, yet a simulation")
	}
}

func TestFindTimeScale(t *testing.T) {
	for _, c := range []struct {
		argv  []string
		found bool
		value float64
		err   string
	}{
		{[]string{"sim", "--time-scale", "25"}, true, 25, ""},
		{[]string{"sim", "--time-scale=0.5"}, true, 0.5, ""},
		{[]string{"sim", "--time-scale=2", "--time-scale", "3"}, true, 3, ""},
		{[]string{"sim"}, false, 0, ""},
		{[]string{"sim", "--time-scale=-1"}, true, 0, `--time-scale "-1" is not a positive number`},
		{[]string{"sim", "--time-scale", "x"}, true, 0, `--time-scale "x" is not a positive number`},
	} {
		a, found, err := FindTimeScale(c.argv)
		if found != c.found || a.Value != c.value || (err == nil) != (c.err == "") || (err != nil && err.Error() != c.err) {
			t.Errorf("%q: %+v %v %v", c.argv, a, found, err)
		}
	}
}
