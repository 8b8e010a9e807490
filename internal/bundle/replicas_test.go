package bundle_test

import (
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/bundle/bundletest"
)

// replicated makes the seed-like batching server two client-balanced
// replicas on GPUs 0 and 1, its records alternating between them.
func replicated() *bundle.Results {
	res := bundletest.SeedLike()
	for i := range res.Servers {
		if res.Servers[i].Name == "batching" {
			res.Servers[i].GPUs = [][]int{{0}, {1}}
			res.Servers[i].Balance = "round-robin"
			res.Servers[i].Replicas = []bundle.Replica{{Index: 0, BaseURL: "http://127.0.0.1:1"}, {Index: 1, BaseURL: "http://127.0.0.1:2"}}
		}
	}
	for i := range res.Records {
		if res.Records[i].Server == "batching" {
			r := res.Records[i].Client % 2
			res.Records[i].Replica = &r
		}
	}
	res.Recompute()
	return res
}

func TestReplicaAggregatesAreRecomputed(t *testing.T) {
	res := replicated()
	for _, p := range bundle.VerifyResults(res) {
		t.Errorf("verify: %s", p)
	}
	seen := false
	for _, a := range res.Aggregates {
		if a.Server != "batching" {
			if a.GoodputPerGPU != nil || a.ReplicaRequests != nil {
				t.Errorf("%s: per-GPU or per-replica figures without gpus or replicas", a.Server)
			}
			continue
		}
		seen = true
		if a.GPUCount != 2 || a.GoodputPerGPU == nil || *a.GoodputPerGPU.Median != *a.Goodput.Median/2 {
			t.Errorf("%d clients: gpus %d, per GPU %+v, goodput %v", a.Concurrency, a.GPUCount, a.GoodputPerGPU, *a.Goodput.Median)
		}
		total := a.ReplicaRequests[0] + a.ReplicaRequests[1]
		if len(a.ReplicaRequests) != 2 || total != a.Failures.Total || a.ReplicaRequests[0]-a.ReplicaRequests[1] > a.Repeats {
			t.Errorf("%d clients: replica requests %v of %d", a.Concurrency, a.ReplicaRequests, a.Failures.Total)
		}
	}
	if !seen {
		t.Fatal("no batching aggregate")
	}
	// A stored figure that disagrees with the records is found.
	for i := range res.Aggregates {
		if res.Aggregates[i].ReplicaRequests != nil {
			res.Aggregates[i].ReplicaRequests[0]++
			*res.Aggregates[i].GoodputPerGPU.Median *= 2
			break
		}
	}
	text := problems(bundle.VerifyResults(res))
	for _, want := range []string{"replica_requests", "goodput_per_gpu_tok_s"} {
		if !strings.Contains(text, want) {
			t.Errorf("verify misses a wrong %s:\n%s", want, text)
		}
	}
}

func TestRecordReplicaOutOfRange(t *testing.T) {
	res := replicated()
	var bad, single int
	for i, r := range res.Records {
		if r.Server == "batching" && bad == 0 {
			v := 2
			res.Records[i].Replica = &v
			bad = i
		}
		if r.Server == "naive" && single == 0 {
			v := 0
			res.Records[i].Replica = &v
			single = i
		}
	}
	res.Recompute()
	text := problems(bundle.VerifyResults(res))
	for _, want := range []string{"2 is not one of the server's 2 replicas", "but server naive has no replicas"} {
		if !strings.Contains(text, want) {
			t.Errorf("verify misses %q:\n%s", want, text)
		}
	}
}

func TestMechanismReplicaMaxIsChecked(t *testing.T) {
	res := replicated()
	two, three := 2.0, 3.0
	res.MechanismCheck.Replicas = []bundle.ReplicaSeries{
		{Replica: 0, Max: &two, Series: [][2]float64{{0, 1}, {0.1, 2}}, LabelSets: []bundle.LabelSeries{{Labels: `engine="0"`, Max: &three, Series: [][2]float64{{0, 1}}}}},
	}
	text := problems(bundle.VerifyResults(res))
	if !strings.Contains(text, "mechanism_check.replicas[0].label_sets[0].max") || strings.Contains(text, "mechanism_check.replicas[0].max") {
		t.Errorf("verify of per-replica maxima:\n%s", text)
	}
}

func problems(ps []bundle.Problem) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(p.String() + "\n")
	}
	return b.String()
}

// TestSessionChangingReplicaIsFound: a session whose turns went to two
// replicas is a problem; the same session run again by the client (a new
// conversation, its turn 1) may go to another.
func TestSessionChangingReplicaIsFound(t *testing.T) {
	res := replicated()
	var rs []int
	for i, r := range res.Records {
		if r.Server != "batching" || len(rs) == 3 {
			continue
		}
		rs = append(rs, i)
	}
	if len(rs) < 3 {
		t.Fatal("want 3 batching records")
	}
	// Records rs[0..2]: one client's session 0, turns 1, 2, then turn 1
	// again (a second conversation), in start order.
	mk := func(k, turn, replica int) {
		r := &res.Records[rs[k]]
		s := 0
		r.Session, r.Turn, r.Client = &s, turn, 0
		r.Wave = res.Records[rs[0]].Wave
		r.StartS = float64(k)
		r.Replica = &replica
	}
	mk(0, 1, 0)
	mk(1, 2, 0)
	mk(2, 1, 1)
	if text := problems(bundle.VerifyResults(res)); strings.Contains(text, "keeps to one replica") {
		t.Errorf("a session run again on another replica is flagged:\n%s", text)
	}
	mk(1, 2, 1)
	if text := problems(bundle.VerifyResults(res)); !strings.Contains(text, "a session keeps to one replica") {
		t.Errorf("verify misses a session that changed replica:\n%s", text)
	}
}
