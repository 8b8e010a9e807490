package bundletest

import (
	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/workload"
)

// Apart is SeedLike with its prompts assigned two LoRA adapters
// (round-robin: prompt 0 sql-lora, prompt 1 chat-lora, each record keeping
// its prompt's) and two successful side probes beside each recorded wave
// of the batching server, their E2E growing with the wave's clients;
// aggregates recomputed.
func Apart() *bundle.Results {
	res := SeedLike()
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
			RequestRateRPS: wl.SideProbes.RateRPS, StartedAt: w.StartedAt, Beside: w.ID}
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
