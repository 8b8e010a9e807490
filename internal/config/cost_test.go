package config

import (
	"strings"
	"testing"
)

func TestCost(t *testing.T) {
	r, err := Parse([]byte(seedYAML+"cost: {gpu_hour_usd: 3.5}\n"), "r.yaml", "/cfg")
	if err != nil {
		t.Fatal(err)
	}
	if r.Cost == nil || r.Cost.GPUHourUSD != 3.5 || r.Cost.GPUs != DefaultCostGPUs {
		t.Errorf("cost %+v", r.Cost)
	}
	r, err = Parse([]byte(seedYAML+"cost: {gpu_hour_usd: 2, gpus: 4}\n"), "r.yaml", "/cfg")
	if err != nil || r.Cost.GPUs != 4 {
		t.Errorf("cost %+v, %v", r.Cost, err)
	}
	if r, err := Parse([]byte(seedYAML), "r.yaml", "/cfg"); err != nil || r.Cost != nil {
		t.Errorf("no cost: %+v, %v", r.Cost, err)
	}
}

func TestCostBadInput(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"cost: {gpu_hour_usd: -1}", "r.yaml: cost.gpu_hour_usd: -1: want a positive number of US dollars per GPU-hour"},
		{"cost: {gpus: 2}", "r.yaml: cost.gpu_hour_usd: 0: want a positive number"},
		{"cost: {gpu_hour_usd: 3, gpus: -2}", "r.yaml: cost.gpus: -2: want at least 1"},
		{"cost: {gpu_hour: 3}", "cost.gpu_hour: unknown key (known: gpu_hour_usd, gpus)"},
		{"cost: {gpu_hour_usd: cheap}", "cost.gpu_hour_usd"},
	} {
		_, err := Parse([]byte(seedYAML+tc.yaml+"\n"), "r.yaml", "/cfg")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.yaml, err, tc.want)
		}
	}
}
