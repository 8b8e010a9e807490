// Package bundletest builds deterministic results for tests of the packages
// that read bundles: a two-server closed-loop rehearsal shaped like the
// seed's (a serial baseline that saturates and times out, a batching server
// that scales), with a mechanism check.
package bundletest

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
)

// SeedLike returns a complete, self-consistent Results value with aggregates
// computed. The same call always returns the same value.
func SeedLike() *bundle.Results {
	rng := rand.New(rand.NewPCG(7, 11))
	base := "naive"
	res := &bundle.Results{
		Schema: bundle.Schema,
		Provenance: bundle.Provenance{
			Tool:               bundle.Tool{Name: "rehearse", Version: "v0.0.0-test", Commit: "0123456789abcdef0123456789abcdef01234567", GoVersion: "go1.26.8"},
			StartedAt:          "2026-11-30T12:00:00Z",
			FinishedAt:         "2026-11-30T12:09:00Z",
			Host:               bundle.Host{Hostname: "testhost", OS: "linux", Arch: "amd64", CPU: "Test CPU", CPUs: 16, MemoryBytes: 128 << 30},
			GPUs:               []bundle.GPU{{Name: "NVIDIA H200", MemoryMiB: 143771, Driver: "580.159.04", CUDA: "13.0"}},
			Model:              bundle.Model{ID: "Qwen/Qwen2.5-1.5B-Instruct", Revision: "989aa7980e4cf806f80c7fef2b1adb7bc71aa306", Dtype: "float16"},
			Tokenizer:          bundle.Tokenizer{Name: "Qwen3 tokenizer.json", Source: "embedded", SHA256: "aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4"},
			OutputTokensSource: "tokenizer",
		},
		Workload: bundle.Workload{
			Kind: "closed_loop", Concurrencies: []int{1, 8, 32}, Repeats: 3,
			Prompts:   []string{"Explain KV caching.", "Write a haiku about GPUs."},
			MaxTokens: 128, Temperature: 0, TimeoutS: 60, PercentileMethod: contract.PercentileMethod,
			Endpoint: "/v1/chat/completions", IncludeUsage: true,
			MechanismCheck: &bundle.MechanismSpec{Server: "batching", Metric: "vllm:num_requests_running", Concurrency: 32, PeriodS: 0.1},
		},
		Baseline: &base,
		Servers: []bundle.Server{
			{Name: "naive", BaseURL: "http://127.0.0.1:8001", LaunchArgv: []string{"python3", "servers/naive_server.py", "--port", "8001"}, Log: "naive.log", Env: map[string]string{"HF_TOKEN": "[redacted]"}},
			{Name: "batching", BaseURL: "http://127.0.0.1:8002", LaunchArgv: []string{"python3", "servers/batching_server.py", "--port", "8002"}, Log: "batching.log"},
		},
	}
	anchor := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	id := 0
	for _, srv := range []string{"naive", "batching"} {
		for _, c := range res.Workload.Concurrencies {
			for rep := 0; rep < 3; rep++ {
				w := contract.Wave{ID: id, Server: srv, Concurrency: c, Repeat: rep, Kind: contract.KindRecorded, Mode: contract.ModeClosed,
					StartedAt: anchor.Add(time.Duration(id) * time.Minute).Format(time.RFC3339Nano), Cold: rep == 0 && c == 1 && srv == "naive"}
				recs := wave(rng, w, srv == "naive", res.Workload.TimeoutS)
				w.WallS = contract.WaveWallS(recs)
				w.ReleaseSpreadS = contract.WaveReleaseSpreadS(recs)
				res.Waves = append(res.Waves, w)
				res.Records = append(res.Records, recs...)
				id++
			}
		}
	}
	mw := contract.Wave{ID: id, Server: "batching", Concurrency: 32, Kind: contract.KindMechanismCheck, Mode: contract.ModeClosed, StartedAt: anchor.Add(time.Hour).Format(time.RFC3339Nano)}
	mrecs := wave(rng, mw, false, 60)
	mw.WallS = contract.WaveWallS(mrecs)
	mw.ReleaseSpreadS = contract.WaveReleaseSpreadS(mrecs)
	res.Waves = append(res.Waves, mw)
	res.Records = append(res.Records, mrecs...)
	mc := &bundle.MechanismCheck{Server: "batching", Metric: "vllm:num_requests_running", Concurrency: 32, PeriodS: 0.1, Wave: id}
	for i := 0; float64(i)*0.1 < mw.WallS+0.2; i++ {
		t := float64(i)*0.1 - 0.05
		running := 0.0
		for _, r := range mrecs {
			if r.StartS <= t && t < r.EndS {
				running++
			}
		}
		mc.Series = append(mc.Series, [2]float64{t, running})
		if mc.Max == nil || running > *mc.Max {
			v := running
			mc.Max = &v
		}
	}
	res.MechanismCheck = mc
	res.Notes = []string{"Synthetic results made by package bundletest for tests."}
	res.Recompute()
	return res
}

// wave simulates one closed-loop wave: a serial server handles one request
// at a time at 20 tok/s, a batching server all at once at a rate that
// degrades slowly with batch size.
func wave(rng *rand.Rand, w contract.Wave, serial bool, timeout float64) []contract.Record {
	var recs []contract.Record
	busyUntil := 0.0
	for c := 0; c < w.Concurrency; c++ {
		start := 0.0005 * float64(c) * rng.Float64()
		tokens := 96 + rng.IntN(33)
		var first, end, step float64
		if serial {
			step = 0.05
			begin := max(start, busyUntil)
			first = begin + 0.15 + 0.01*rng.Float64()
			end = first + step*float64(tokens-1)
			busyUntil = end
		} else {
			step = 0.015 * (1 + float64(w.Concurrency)/64)
			first = start + 0.03 + 0.004*float64(w.Concurrency)*rng.Float64()
			end = first + step*float64(tokens-1)
		}
		r := contract.Record{Kind: w.Kind, Server: w.Server, Concurrency: w.Concurrency, Repeat: w.Repeat, Wave: w.ID,
			Client: c, Prompt: c % 2, IntendedStartS: 0, StartS: round(start)}
		if end-start > timeout {
			// Timed out: keep what arrived before the deadline.
			deadline := start + timeout
			r.EndS = round(deadline)
			r.OK, r.ErrorKind, r.Error = false, contract.ErrTimeout, fmt.Sprintf("no end of stream within %v s", timeout)
			if first < deadline {
				fc := round(first)
				r.FirstContentS = &fc
				n := int((deadline-first)/step) + 1
				r.ChunkTimesS = chunks(first, step, n)
				r.Text = text(n)
				r.OutputTokens = n
			}
		} else {
			fc := round(first)
			r.FirstContentS = &fc
			r.EndS = round(end)
			r.ChunkTimesS = chunks(first, step, tokens)
			r.OK, r.FinishReason = true, "length"
			if tokens < 128 {
				r.FinishReason = "stop"
			}
			r.Text = text(tokens)
			r.OutputTokens = tokens
			u := tokens
			p := 21
			r.UsageCompletionTokens, r.UsagePromptTokens = &u, &p
		}
		recs = append(recs, r)
	}
	return recs
}

func chunks(first, step float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = round(first + step*float64(i))
	}
	return out
}

func text(n int) string {
	b := make([]byte, 0, n*4)
	for i := 0; i < n; i++ {
		b = append(b, " the"...)
	}
	return string(b)
}

func round(v float64) float64 {
	const q = 1e6
	return float64(int64(v*q+0.5)) / q
}

// WithInputTokens gives every record of res the client-counted input tokens
// of its prompt under the embedded Qwen3 tokenizer SeedLike's provenance
// names (5 and 7 for its two prompts) and recomputes the aggregates.
func WithInputTokens(res *bundle.Results) *bundle.Results {
	counts := []int{5, 7}
	for i := range res.Records {
		n := counts[res.Records[i].Prompt%len(counts)]
		res.Records[i].InputTokens = &n
	}
	res.Recompute()
	return res
}
