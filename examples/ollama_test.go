package examples

import (
	"os"
	"path/filepath"
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
	if len(r.Servers) != 2 || r.Baseline != "serial" || r.MechanismCheck != nil || r.Tokenizer.Variant != "qwen3" ||
		*r.Workload.Temperature <= 0 || r.Workload.ExtraBody["seed"] == nil || !r.Model.RandomWeights {
		t.Fatalf("not the example described: %+v", r)
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
