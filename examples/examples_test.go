package examples

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/config"
)

func TestEveryExampleParsesAndValidates(t *testing.T) {
	files, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 3 {
		t.Fatalf("found %d example files, want at least 3", len(files))
	}
	for _, f := range files {
		r, err := config.Load(f)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if len(r.Servers) != 2 || r.Baseline != r.Servers[0].Name {
			t.Errorf("%s: want two servers with the first as baseline, got %d, baseline %q", f, len(r.Servers), r.Baseline)
		}
		if r.Workload.Mode == config.ModeSustained || r.Workload.Sessions != nil || r.Capacity != nil ||
			(len(r.Workload.Concurrencies) == 0 && r.Workload.OpenLoop != nil) || !r.Servers[0].Launched() ||
			f == "ollama.yaml" {
			// The sustained, sessions, capacity and open-loop examples are
			// workloads of their own (sustained.yaml, sessions.yaml,
			// capacity.yaml, ramp.yaml, trace.yaml), and so is the one of
			// servers already running, for segments (segments.yaml), and
			// the real engine on a CPU (ollama.yaml, TestOllamaExample).
			continue
		}
		if !slices.Equal(r.Workload.Concurrencies, []int{1, 8, 32, 64}) || r.Workload.Repeats != 3 || r.Workload.MaxTokens != 128 {
			t.Errorf("%s: not the canonical workload: %+v", f, r.Workload)
		}
		if r.MechanismCheck == nil || r.MechanismCheck.Concurrency != 64 || r.MechanismCheck.Server != r.Servers[1].Name {
			t.Errorf("%s: mechanism check: %+v", f, r.MechanismCheck)
		}
		for _, s := range r.Servers {
			argv := r.Argv(s, 8123, "/bin/rehearse")
			if !slices.Contains(argv, "8123") {
				t.Errorf("%s: server %s: the port does not reach the argv %q", f, s.Name, argv)
			}
		}
	}
}

func TestSeedLaunchIsTheSeeds(t *testing.T) {
	r, err := config.Load("t4-seed.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, _ := r.Server("vllm")
	got := r.Argv(s, 8000, "")
	want := []string{"vllm", "serve", "Qwen/Qwen2.5-1.5B-Instruct", "--revision", "989aa7980e4cf806f80c7fef2b1adb7bc71aa306",
		"--port", "8000", "--dtype", "half", "--max-model-len", "2048", "--gpu-memory-utilization", "0.85"}
	if !slices.Equal(got, want) {
		t.Errorf("vLLM argv = %q,\nwant the seed's %q", got, want)
	}
}

func TestEmbeddedSimulatedNamesItsProfiles(t *testing.T) {
	r, err := config.Parse(Simulated, "simulated.yaml", ".")
	if err != nil {
		t.Fatal(err)
	}
	if r.Servers[0].Simulated == "" || r.Servers[1].Simulated == "" {
		t.Error("the simulated example does not name its profiles")
	}
}

// TestReadmeKeysAreTheFilesKeys keeps README.md's key reference true: its
// YAML block must have no unknown key and no value of the wrong kind.
func TestReadmeKeysAreTheFilesKeys(t *testing.T) {
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(data), "```yaml\n")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatal("README.md has no yaml block")
	}
	_, err = config.Parse([]byte(block), "README.md", t.TempDir())
	if err == nil {
		return
	}
	for _, bad := range []string{"unknown key", ": want ", "not valid YAML", "is not a duration"} {
		if strings.Contains(err.Error(), bad) {
			t.Errorf("the README's key reference is out of date:\n%v", err)
			break
		}
	}
}

// TestReplicaExamples checks the servers of several replicas or GPUs
// (SPEC §10): the shapes they declare, and that each replica's argv and
// GPU set reach it. replicas.yaml is run against the simulator by
// internal/rehearsal's TestReplicasExampleAgainstSim.
func TestReplicaExamples(t *testing.T) {
	for _, c := range []struct {
		file     string
		replicas []int // per server
		gpus     []int
		balanced []bool
	}{
		{"replicas.yaml", []int{1, 2}, []int{0, 0}, []bool{false, true}},
		{"batching-replicas.yaml", []int{1, 2}, []int{1, 2}, []bool{false, true}},
		{"vllm-parallel.yaml", []int{1, 1}, []int{2, 2}, []bool{false, false}},
	} {
		r, err := config.Load(c.file)
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range r.Servers {
			if s.ReplicaCount() != c.replicas[i] || s.GPUCount() != c.gpus[i] || s.Balanced() != c.balanced[i] {
				t.Errorf("%s: %s: %d replicas, %d GPUs, balanced %v", c.file, s.Name, s.ReplicaCount(), s.GPUCount(), s.Balanced())
			}
			for j := range s.ReplicaCount() {
				argv := r.ReplicaArgv(s, j, 9000+j, "/bin/rehearse")
				if !slices.Contains(argv, strconv.Itoa(9000+j)) {
					t.Errorf("%s: %s replica %d: the port does not reach the argv %q", c.file, s.Name, j, argv)
				}
			}
		}
	}
	r, _ := config.Load("vllm-parallel.yaml")
	for _, s := range r.Servers {
		if s.GPUList(0) != "0,1" {
			t.Errorf("%s: CUDA_VISIBLE_DEVICES would be %q", s.Name, s.GPUList(0))
		}
	}
	argv := strings.Join(r.Argv(r.Servers[0], 1, ""), " ") + " | " + strings.Join(r.Argv(r.Servers[1], 1, ""), " ")
	if !strings.Contains(argv, "--tensor-parallel-size 2") || !strings.Contains(argv, "--data-parallel-size 2") {
		t.Errorf("vllm-parallel argv: %s", argv)
	}
}
