package bundle_test

import (
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/bundle/bundletest"
)

func apart(t *testing.T) *bundle.Results {
	t.Helper()
	return bundletest.Apart()
}

// Models and side probes recompute from the records, verify whole and
// streamed, and verify finds what disagrees with the plan: a record's
// model, the assignment, a side-probe wave beside nothing, a side probe
// that claims a prompt, the figures kept apart.
func TestVerifyModelsAndSideProbes(t *testing.T) {
	res := apart(t)
	for _, a := range res.Aggregates {
		if len(a.Models) != min(2, a.Concurrency) { // 1 client sends prompt 0 only
			t.Errorf("%s at %s: models %+v", a.Server, a.LoadLabel(), a.Models)
		}
		if (a.SideProbes != nil) != (a.Server == "batching") || (a.SideProbes != nil && a.SideProbes.Requests != 2*a.Repeats) {
			t.Errorf("%s at %s: side probes %+v", a.Server, a.LoadLabel(), a.SideProbes)
		}
	}
	if p := bundle.VerifyResults(res); len(p) > 0 {
		t.Fatalf("verify:\n%s", problems(p))
	}
	if p := bundletest.Verify(writeBundle(t, res)); len(p) > 0 {
		t.Fatalf("verify of the bundle (streamed):\n%s", problems(p))
	}

	for _, c := range []struct {
		name  string
		tweak func(*bundle.Results)
		want  string
	}{
		{"a record's model", func(r *bundle.Results) { r.Records[0].Model = "other" }, `records[0].model: "other", but workload.prompt_models[0] is "sql-lora"`},
		{"the assignment", func(r *bundle.Results) { r.Workload.PromptModels[1] = "sql-lora" }, `workload.prompt_models[1]: "sql-lora", but workload.models (round-robin, seed 0) assigns prompt 1 "chat-lora"`},
		{"a side wave beside nothing", func(r *bundle.Results) { r.Waves[len(r.Waves)-1].Beside = 999 }, "beside: 999 names no other wave"},
		{"a side probe's prompt", func(r *bundle.Results) { r.Records[len(r.Records)-1].Prompt = 0 }, "a side probe sends workload.side_probes.prompt"},
		{"a side probe's model", func(r *bundle.Results) { r.Records[len(r.Records)-1].Model = "sql-lora" }, "on a side_probe request, which asks for the server's model"},
		{"a side probe's max_tokens", func(r *bundle.Results) { r.Records[len(r.Records)-1].MaxTokens = 4 }, "workload.side_probes.max_tokens is 1"},
		{"the side probes' figures", func(r *bundle.Results) { r.Aggregates[len(r.Aggregates)-1].SideProbes.Failures = 1 }, "side_probes.failures: stored 1, recomputed 0"},
		{"a model's figures", func(r *bundle.Results) { r.Aggregates[0].Models[0].Requests++ }, "models[0].requests"},
	} {
		r := apart(t)
		c.tweak(r)
		text := problems(bundle.VerifyResults(r))
		if !strings.Contains(text, c.want) {
			t.Errorf("%s: verify says\n%s\nwant %q", c.name, text, c.want)
		}
		streamed := problems(bundletest.Verify(writeBundle(t, r)))
		if !strings.Contains(streamed, c.want) {
			t.Errorf("%s: verify of the bundle says\n%s\nwant %q", c.name, streamed, c.want)
		}
	}
}
