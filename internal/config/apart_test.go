package config

import (
	"slices"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/workload"
)

// workload.models and workload.side_probes: defaults (vLLM's random
// assignment, its probe prompt and length) and every problem by its key.
func TestModelsAndSideProbes(t *testing.T) {
	r, err := Parse([]byte(promptsHead+"[a, b]\n  models: {names: [x, y], seed: 3}\n  side_probes: {rate_rps: 2}\n"), "r.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	m, sp := r.Workload.Models, r.Workload.SideProbes
	if m == nil || !slices.Equal(m.Names, []string{"x", "y"}) || m.Assignment != workload.AssignRandom || m.Seed != 3 {
		t.Errorf("models %+v", m)
	}
	if sp == nil || sp.RateRPS != 2 || sp.Prompt != VLLMProbePrompt || sp.MaxTokens != VLLMProbeMaxTokens {
		t.Errorf("side probes %+v", sp)
	}
	for _, c := range []struct{ yaml, want string }{
		{"  models: {names: []}\n", "workload.models: no model names"},
		{"  models: {names: [x, '']}\n", "workload.models: name 2 of 2 is empty"},
		{"  models: {names: [x], assignment: weighted}\n", `workload.models: assignment "weighted"`},
		{"  models: {names: [x], weights: [1]}\n", "workload.models.weights: unknown key"},
		{"  side_probes: {rate_rps: 0}\n", "workload.side_probes.rate_rps: 0: want a finite rate above 0"},
		{"  side_probes: {rate_rps: -1}\n", "workload.side_probes.rate_rps: -1"},
		{"  side_probes: {rate_rps: 1, max_tokens: -2}\n", "workload.side_probes.max_tokens: -2: must be at least 1"},
		{"  side_probes: {rate_rps: 1, prompt: ' '}\n", "workload.side_probes.prompt: empty prompt"},
	} {
		_, err := Parse([]byte(promptsHead+"[a, b]\n"+c.yaml), "r.yaml", t.TempDir())
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.yaml, err, c.want)
		}
	}
	_, err = Parse([]byte("segment: 0/2\n"+promptsHead+"[a, b]\n  side_probes: {rate_rps: 1}\n"), "r.yaml", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "workload.side_probes: a split plan's workers would each send them") {
		t.Errorf("side probes in a segment: %v", err)
	}
	_, err = Parse([]byte(promptsHead+synthHead+"  sessions: {turns: 2}\n  models: {names: [x]}\n"), "r.yaml", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "workload.models: each prompt has its own model") {
		t.Errorf("models with sessions: %v", err)
	}
}
