package examples

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/config"
)

// TestOllamaExample: ollama.yaml's two servers differ only in
// OLLAMA_NUM_PARALLEL, are isolated (scratch HOME and OLLAMA_MODELS, a
// loopback {port}), prepare the model they serve, name their tokenizer,
// sample (greedy decoding of its model repeats one word), and the
// Modelfile they copy exists and takes one thread. internal/ollamatest
// rehearses the same setup end to end where ollama is installed.
func TestOllamaExample(t *testing.T) {
	r, err := config.Load("ollama.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Servers) != 2 || r.Baseline != "serial" || r.Tokenizer.Variant != "qwen3" ||
		*r.Workload.Temperature <= 0 || r.Workload.ExtraBody["seed"] == nil || !r.Model.RandomWeights {
		t.Fatalf("not the example described: %+v", r)
	}
	// ollama has no /metrics: the mechanism check reads none.
	if m := r.MechanismCheck; m == nil || m.Evidence != config.EvidenceClient || m.Server != "batching" || m.Metric != "" {
		t.Errorf("mechanism check: %+v", m)
	}
	if r.SLO == nil || r.Capacity == nil || r.Capacity.MaxConcurrency != 8 || r.Workload.Mode != "closed" {
		t.Errorf("closed waves, then a capacity search under an SLO: mode %q, slo %+v, capacity %+v", r.Workload.Mode, r.SLO, r.Capacity)
	}
	// The sibling file: the same servers, the sustained loop.
	s, err := config.Load("ollama-sustained.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if s.Workload.Mode != "sustained" || s.Workload.MaxTokens != r.Workload.MaxTokens || s.Capacity != nil ||
		!slices.EqualFunc(s.Servers, r.Servers, func(a, b config.Server) bool { return reflect.DeepEqual(a, b) }) {
		t.Errorf("ollama-sustained.yaml is not ollama.yaml's servers in the sustained loop: %+v", s)
	}
	parallel := []string{"1", "8"}
	for i, s := range r.Servers {
		l := r.ReplicaLaunch(s, 0, 8123, "/bin/rehearse", "/tmp/scratch")
		if l.Env["OLLAMA_HOST"] != "127.0.0.1:8123" || l.Env["HOME"] != "/tmp/scratch" ||
			l.Env["OLLAMA_MODELS"] != "/tmp/scratch/models" || l.Env["OLLAMA_NUM_PARALLEL"] != parallel[i] {
			t.Errorf("%s: env %v", s.Name, l.Env)
		}
		if s.Ready.Path != "/api/version" || len(l.Prepare) != 3 || s.Model != "ci" {
			t.Errorf("%s: ready %+v, prepare %q, model %q", s.Name, s.Ready, l.Prepare, s.Model)
		}
		if !slices.Equal(l.Prepare[1][:3], []string{"/bin/rehearse", "model", "write"}) || l.Prepare[2][0] != "ollama" {
			t.Errorf("%s: prepare %q", s.Name, l.Prepare)
		}
	}
	modelfile, err := os.ReadFile(filepath.Join("ollama", "Modelfile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"FROM ./ci.gguf\n", "PARAMETER num_thread 1\n"} {
		if !strings.Contains(string(modelfile), want) {
			t.Errorf("ollama/Modelfile lacks %q", want)
		}
	}
}
