package report

import (
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/bundle/bundletest"
	"github.com/rehearse/rehearse/internal/plot"
)

// replicatedBundle makes the seed-like batching server two client-balanced
// replicas on GPUs 0 and 1.
func replicatedBundle() *bundle.Results {
	res := bundletest.SeedLike()
	for i := range res.Servers {
		if res.Servers[i].Name == "batching" {
			res.Servers[i].GPUs = [][]int{{0}, {1}}
			res.Servers[i].Balance = "round-robin"
			res.Servers[i].Replicas = []bundle.Replica{
				{Index: 0, BaseURL: "http://127.0.0.1:1", GPUs: []int{0}, Log: "batching.replica-0.log"},
				{Index: 1, BaseURL: "http://127.0.0.1:2", GPUs: []int{1}, Log: "batching.replica-1.log"},
			}
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

func TestReportOfReplicas(t *testing.T) {
	res := replicatedBundle()
	md := string(Markdown(res, nil, []bundle.Digest{{File: "batching.replica-1.log", SHA256: strings.Repeat("a", 64)}}))
	for _, want := range []string{
		"batching goodput per GPU, median [min–max] tok/s",
		"## Replicas and GPUs",
		"Goodput per GPU is left out for `naive`: the rehearsal file does not give its GPUs",
		"Recorded requests per replica",
		"| `batching` | 8 clients | 12 (50.0%) | 12 (50.0%) |",
		"replica 1 at http://127.0.0.1:2, GPUs 1 (CUDA_VISIBLE_DEVICES). Log: [`batching.replica-1.log`]",
		"complete log of replica 1 of server `batching`",
		"GPUs: 2 ([0], [1])",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("README lacks %q", want)
		}
	}
	figs, err := plot.Render(res)
	if err != nil {
		t.Fatal(err)
	}
	var pareto *plot.Figure
	for i := range figs {
		if figs[i].Name == "pareto.svg" {
			pareto = &figs[i]
		}
	}
	if pareto == nil {
		t.Fatal("no pareto.svg")
	}
	if !strings.Contains(string(pareto.SVG), "batching") || strings.Contains(string(pareto.SVG), ">naive<") {
		t.Errorf("pareto.svg should draw batching alone")
	}
	// The mechanism figure draws each replica's part of the sum.
	two := 2.0
	res.MechanismCheck.Replicas = []bundle.ReplicaSeries{
		{Replica: 0, Max: &two, Series: [][2]float64{{0, 1}, {0.1, 2}}},
		{Replica: 1, Max: &two, Series: [][2]float64{{0, 2}, {0.1, 1}}},
	}
	if figs, err = plot.Render(res); err != nil {
		t.Fatal(err)
	}
	for _, f := range figs {
		if f.Name == "mechanism.svg" && !strings.Contains(string(f.SVG), "replica 1") {
			t.Error("mechanism.svg does not draw replica 1")
		}
	}
	// Without GPU counts there is no figure and no column.
	plain := bundletest.SeedLike()
	figs, err = plot.Render(plain)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range figs {
		if f.Name == "pareto.svg" {
			t.Error("pareto.svg without any GPU count")
		}
	}
	if md := string(Markdown(plain, nil, nil)); strings.Contains(md, "per GPU") || strings.Contains(md, "Replicas and GPUs") {
		t.Error("a bundle without replicas or GPUs speaks of them")
	}
}
