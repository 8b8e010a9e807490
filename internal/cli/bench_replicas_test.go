package cli

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
)

// bench against two endpoints (--base-url twice) is one server of two
// replicas balanced by the client: round-robin sends clients alternately,
// each record names its replica, the bundle lists both endpoints, --gpus 2
// gives one GPU each and goodput per GPU, and verify recomputes it.
func TestBenchAgainstSeveralEndpoints(t *testing.T) {
	a, _, _ := startSim(t, "--engine", "batching", "--time-scale", "1000", "--seed", "1")
	b, _, _ := startSim(t, "--engine", "batching", "--time-scale", "1000", "--seed", "2")
	dir := filepath.Join(t.TempDir(), "pair")
	code, out, errs := runMain(context.Background(), "bench", "--base-url", a, "--base-url", b+"/", "--gpus", "2",
		"--tokenizer", "usage", "--max-tokens", "4", "--concurrency", "4", "--repeats", "1", "--progress", "never", "-o", dir)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	res, err := bundle.ReadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := res.Servers[0]
	if len(s.Replicas) != 2 || s.Replicas[0].BaseURL != a || s.Replicas[1].BaseURL != b || s.Balance != "round-robin" || s.GPUCount() != 2 {
		t.Fatalf("server %+v: want replicas at %s and %s, round-robin, 2 GPUs", s, a, b)
	}
	per := [2]int{}
	for _, r := range res.Records {
		if r.Replica == nil {
			t.Fatalf("record without a replica: %+v", r)
		}
		if r.Kind == "recorded" {
			if *r.Replica != r.Client%2 {
				t.Errorf("client %d went to replica %d", r.Client, *r.Replica)
			}
			per[*r.Replica]++
		}
	}
	if per != [2]int{2, 2} {
		t.Errorf("recorded requests per replica %v, want 2 and 2", per)
	}
	found := false
	for _, ag := range res.Aggregates {
		if ag.Concurrency == 4 {
			found = true
			if !slices.Equal(ag.ReplicaRequests, []int{2, 2}) || ag.GoodputPerGPU == nil || ag.GPUCount != 2 {
				t.Errorf("aggregate: replica requests %v, gpus %d, per GPU %+v", ag.ReplicaRequests, ag.GPUCount, ag.GoodputPerGPU)
			}
		}
	}
	if !found {
		t.Fatal("no aggregate at 4 clients")
	}
	if code, vout, verrs := runMain(context.Background(), "verify", dir); code != 0 {
		t.Errorf("verify: exit %d\n%s\n%s", code, vout, verrs)
	}
}

// Sessions over two endpoints (a comma list, least-outstanding) keep to
// one replica each, every turn recording it, and the bundle verifies.
func TestBenchSessionsOverEndpointsKeepTheirReplica(t *testing.T) {
	a, _, _ := startSim(t, "--engine", "batching", "--time-scale", "1000", "--seed", "1")
	b, _, _ := startSim(t, "--engine", "batching", "--time-scale", "1000", "--seed", "2")
	dir := filepath.Join(t.TempDir(), "sessions")
	code, out, errs := runMain(context.Background(), "bench", "--base-url", a+","+b, "--balance", "least-outstanding",
		"--dataset-name", "random", "--random-input-len", "8", "--random-output-len", "4", "--num-prompts", "12",
		"--multi-turn", "--max-turns", "3", "--concurrency", "4", "--repeats", "1", "--progress", "never", "-o", dir)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	res, err := bundle.ReadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s := res.Servers[0]; len(s.Replicas) != 2 || s.Balance != "least-outstanding" {
		t.Fatalf("server %+v", s)
	}
	type conv struct{ wave, client int }
	replica := map[conv]int{}
	turns := 0
	for _, r := range res.Records {
		if r.Kind != "recorded" || r.Session == nil || r.Replica == nil {
			continue
		}
		turns++
		k := conv{r.Wave, r.Client}
		if got, ok := replica[k]; ok && got != *r.Replica {
			t.Errorf("client %d's session: turn %d on replica %d, an earlier turn on %d", r.Client, r.Turn, *r.Replica, got)
		}
		replica[k] = *r.Replica
	}
	if turns != 12 || len(replica) != 4 {
		t.Errorf("%d turns of %d sessions recorded with a replica, want 12 of 4", turns, len(replica))
	}
	if code, vout, verrs := runMain(context.Background(), "verify", dir); code != 0 {
		t.Errorf("verify: exit %d\n%s\n%s", code, vout, verrs)
	}
}
