package bundle_test

import (
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/bundle/bundletest"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/workload"
)

// apart is the seed-like bundle with its prompts assigned two LoRA
// adapters (round-robin) and two side probes beside each recorded wave
// of the batching server.
func apart(t *testing.T) *bundle.Results {
	t.Helper()
	res := bundletest.SeedLike()
	wl := &res.Workload
	wl.Models = &bundle.Models{Names: []string{"sql-lora", "chat-lora"}, Assignment: workload.AssignRoundRobin}
	wl.PromptModels, _ = workload.AssignModels(wl.Models.Names, wl.Models.Assignment, 0, len(wl.Prompts))
	wl.SideProbes = &bundle.SideProbes{RateRPS: 2, Prompt: "Hi", MaxTokens: 1}
	for i := range res.Records {
		r := &res.Records[i]
		r.Model = wl.PromptModels[r.Prompt]
	}
	next := len(res.Waves)
	for _, w := range res.Waves {
		if w.Kind != contract.KindRecorded || w.Server != "batching" {
			continue
		}
		sw := contract.Wave{ID: next, Server: w.Server, Repeat: w.Repeat, Kind: contract.KindSideProbe, Mode: contract.ModeOpen,
			RequestRateRPS: 2, StartedAt: w.StartedAt, Beside: w.ID}
		next++
		for k := range 2 {
			start := 0.6 * float64(k)
			fc := start + 0.01
			r := contract.Record{Kind: sw.Kind, Server: sw.Server, Repeat: sw.Repeat, Wave: sw.ID, Client: k, Prompt: -1,
				IntendedStartS: start, StartS: start, FirstContentS: &fc, ChunkTimesS: []float64{fc}, EndS: fc + 0.001 + float64(w.Concurrency)/1000,
				OK: true, Text: "Hello", OutputTokens: 1, MaxTokens: 1, FinishReason: "length"}
			res.Records = append(res.Records, r)
		}
		sw.WallS = contract.WaveWallS(res.Records[len(res.Records)-2:])
		res.Waves = append(res.Waves, sw)
	}
	res.Recompute()
	return res
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
