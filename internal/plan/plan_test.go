package plan

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/workload"
)

func describe(ws []Wave) string {
	var lines []string
	for _, w := range ws {
		line := fmt.Sprintf("%s/%s %s r%d", w.Kind, w.Mode, w.Label(), w.Repeat)
		if w.Cold {
			line += " cold"
		}
		if b := w.Sustained; b != nil {
			line += fmt.Sprintf(" n=%d d=%v warmup=%d", b.NumRequests, b.Duration, b.WarmupRequests)
		}
		if o := w.Open; o != nil {
			line += fmt.Sprintf(" %s seed=%d n=%d d=%v cap=%d", o.Arrival, o.Seed, o.NumRequests, o.Duration, o.MaxConcurrency)
		}
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}

func TestServer(t *testing.T) {
	open := &OpenLoop{RequestRatesRPS: []float64{2.5, 4}, Arrival: "gamma", Burstiness: 0.5, Seed: 9, NumRequests: 5, Duration: 30 * time.Second, MaxConcurrency: 3}
	mc := &MechanismCheck{Server: "b", Concurrency: 64}
	for _, tc := range []struct {
		name   string
		wl     Workload
		server string
		want   []string
	}{
		{"no warm-up: the first recorded wave is cold", Workload{Concurrencies: []int{1, 8}, Repeats: 2}, "a", []string{
			"recorded/closed 1 client r1 cold", "recorded/closed 1 client r2", "recorded/closed 8 clients r1", "recorded/closed 8 clients r2",
		}},
		{"warm-up at the first concurrency", Workload{Concurrencies: []int{8, 1}, Repeats: 1, WarmupWaves: 2}, "a", []string{
			"warmup/closed 8 clients r1", "warmup/closed 8 clients r2", "recorded/closed 8 clients r1", "recorded/closed 1 client r1",
		}},
		{"warm-up at warmup_concurrency", Workload{Concurrencies: []int{8}, Repeats: 1, WarmupWaves: 1, WarmupConcurrency: 2}, "a", []string{
			"warmup/closed 2 clients r1", "recorded/closed 8 clients r1",
		}},
		{"warm-up waves at each concurrency, just before its repeats: none is cold", Workload{Concurrencies: []int{1, 8}, Repeats: 2, WarmupWavesPerLoad: 1}, "a", []string{
			"warmup/closed 1 client r1", "recorded/closed 1 client r1", "recorded/closed 1 client r2",
			"warmup/closed 8 clients r1", "recorded/closed 8 clients r1", "recorded/closed 8 clients r2",
		}},
		{"warm-up waves first and at each concurrency", Workload{Concurrencies: []int{8}, Repeats: 1, WarmupWaves: 1, WarmupConcurrency: 2, WarmupWavesPerLoad: 2}, "a", []string{
			"warmup/closed 2 clients r1", "warmup/closed 8 clients r1", "warmup/closed 8 clients r2", "recorded/closed 8 clients r1",
		}},
		{"open loop: a seed per repeat", Workload{Concurrencies: []int{1}, Repeats: 2, Open: open}, "a", []string{
			"recorded/closed 1 client r1 cold", "recorded/closed 1 client r2",
			"recorded/open 2.5 req/s r1 gamma seed=9 n=5 d=30s cap=3", "recorded/open 2.5 req/s r2 gamma seed=10 n=5 d=30s cap=3",
			"recorded/open 4 req/s r1 gamma seed=9 n=5 d=30s cap=3", "recorded/open 4 req/s r2 gamma seed=10 n=5 d=30s cap=3",
		}},
		{"open loop only, warm-up at one client", Workload{Repeats: 1, WarmupWaves: 1, Open: &OpenLoop{RequestRatesRPS: []float64{3}, Arrival: "fixed", NumRequests: 2}}, "a", []string{
			"warmup/closed 1 client r1", "recorded/open 3 req/s r1 fixed seed=0 n=2 d=0s cap=0",
		}},
		{"sustained: a wave per concurrency and repeat, after the warm-up waves", Workload{Concurrencies: []int{16, 64}, Repeats: 2, WarmupWaves: 1,
			Sustained: &Bounds{NumRequests: 200, Duration: 30 * time.Second, WarmupRequests: 16}}, "a", []string{
			"warmup/closed 16 clients r1",
			"recorded/sustained 16 clients, sustained r1 n=200 d=30s warmup=16", "recorded/sustained 16 clients, sustained r2 n=200 d=30s warmup=16",
			"recorded/sustained 64 clients, sustained r1 n=200 d=30s warmup=16", "recorded/sustained 64 clients, sustained r2 n=200 d=30s warmup=16",
		}},
		{"sustained without any warm-up: the first is cold", Workload{Concurrencies: []int{4}, Repeats: 2, Sustained: &Bounds{NumRequests: 10}}, "a", []string{
			"recorded/sustained 4 clients, sustained r1 cold n=10 d=0s warmup=0", "recorded/sustained 4 clients, sustained r2 n=10 d=0s warmup=0",
		}},
		{"sustained warm-up requests: not cold", Workload{Concurrencies: []int{4}, Repeats: 1, Sustained: &Bounds{Duration: 5 * time.Second, WarmupRequests: 4}}, "a", []string{
			"recorded/sustained 4 clients, sustained r1 n=0 d=5s warmup=4",
		}},
		{"the mechanism check last, on its server", Workload{Concurrencies: []int{1}, Repeats: 1, MechanismCheck: mc}, "b", []string{
			"recorded/closed 1 client r1 cold", "mechanism_check/closed 64 clients r1",
		}},
		{"not on another server", Workload{Concurrencies: []int{1}, Repeats: 1, MechanismCheck: mc}, "a", []string{
			"recorded/closed 1 client r1 cold",
		}},
	} {
		if got, want := describe(Server(tc.wl, tc.server)), strings.Join(tc.want, "\n"); got != want {
			t.Errorf("%s:\n%s\nwant\n%s", tc.name, got, want)
		}
	}
}

func parse(t *testing.T, yaml string) *config.Rehearsal {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), "t.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestWorkloadOfTheRehearsal(t *testing.T) {
	cfg := parse(t, `model: {id: m}
servers: [{name: v, launch: [vllm, "{port}"]}]
workload:
  timeout: 1m30s
  extra_body: {ignore_eos: true}
  open_loop: {request_rates_rps: [2], arrival: gamma, burstiness: 0.5, num_requests: 10, duration: 30s}
`)
	w := WorkloadOf(cfg, workload.Texts("p"))
	if w.Load.Timeout != 90*time.Second || w.Kind() != "closed+open" || w.Open == nil || w.Open.Duration != 30*time.Second || w.Open.Burstiness != 0.5 ||
		w.MechanismCheck == nil || w.MechanismCheck.Concurrency != 64 || w.MechanismCheck.Period != 100*time.Millisecond ||
		w.ExtraBody["ignore_eos"] != true || !w.IncludeUsage || len(w.Load.Prompts) != 1 || w.Load.MaxTokens != cfg.Workload.MaxTokens {
		t.Errorf("workload = %+v", w)
	}
}

func TestWorkloadKindAndWarmupConcurrency(t *testing.T) {
	cfg := parse(t, `model: {id: m}
servers: [{name: v, base_url: "http://127.0.0.1:1"}]
workload:
  concurrencies: []
  warmup_waves: 1
  warmup_concurrency: 4
  open_loop: {request_rates_rps: [2], arrival: poisson, num_requests: 10}
`)
	w := WorkloadOf(cfg, workload.Texts("p"))
	if w.Kind() != "open" || w.WarmupConcurrency != 4 || w.Concurrencies == nil || len(w.Concurrencies) != 0 {
		t.Errorf("workload = %+v", w)
	}
}

func TestWorkloadKeepsPromptSource(t *testing.T) {
	cfg := parse(t, `model: {id: m}
servers: [{name: v, base_url: "http://127.0.0.1:1"}]
`)
	set := workload.Set{
		Prompts: []workload.Prompt{{Text: "a", MaxTokens: 3}, {Text: "b"}},
		Record:  workload.SourceRecord{Name: "synthetic", Params: map[string]any{"seed": 1}, SHA256: "abc", Skipped: map[string]int{"empty": 2}},
	}
	w := WorkloadOf(cfg, set)
	if w.ExtraBody["ignore_eos"] != nil {
		t.Fatalf("extra_body %v without ignore_eos asked", w.ExtraBody)
	}
	set.IgnoreEOS = true
	w = WorkloadOf(cfg, set)
	if w.ExtraBody["ignore_eos"] != true || cfg.Workload.ExtraBody["ignore_eos"] != nil {
		t.Fatalf("extra_body %v (the file's %v)", w.ExtraBody, cfg.Workload.ExtraBody)
	}
	if s := w.Source; s.Name != "synthetic" || s.SHA256 != "abc" {
		t.Fatalf("prompt source %+v", s)
	}
	if l := w.Load; len(l.PromptMaxTokens) != 2 || l.MaxTokensFor(0) != 3 || l.MaxTokensFor(1) != cfg.Workload.MaxTokens {
		t.Fatalf("prompt max_tokens %v", l.PromptMaxTokens)
	}
}

func TestWorkloadSustained(t *testing.T) {
	cfg := parse(t, `model: {id: m}
servers: [{name: v, base_url: "http://127.0.0.1:1"}]
workload:
  concurrencies: [16]
  mode: sustained
  sustained: {duration: 30s, warmup_requests: 16}
  open_loop: {request_rates_rps: [2], arrival: poisson, num_requests: 10}
`)
	w := WorkloadOf(cfg, workload.Texts("p"))
	if w.Kind() != "sustained+open" || w.Sustained == nil || w.Sustained.Duration != 30*time.Second || w.Sustained.WarmupRequests != 16 {
		t.Errorf("workload = %+v, sustained %+v", w, w.Sustained)
	}
	if w := WorkloadOf(parse(t, "model: {id: m}\nservers: [{name: v, base_url: \"http://127.0.0.1:1\"}]\n"), workload.Texts("p")); w.Kind() != "closed" || w.Sustained != nil {
		t.Errorf("default workload = %+v", w)
	}
}

// vLLM's --num-warmups is one warm-up wave before the recorded ones: its
// requests all at once, or, under a lower cap, at most the cap in flight;
// the first recorded wave is then not cold.
func TestNumWarmups(t *testing.T) {
	open := &OpenLoop{RequestRatesRPS: []float64{4}, Arrival: "poisson", NumRequests: 10, MaxConcurrency: 2, Pacing: workload.PacingVLLM}
	for _, tc := range []struct {
		wl   Workload
		want string
	}{
		{Workload{Concurrencies: []int{10}, Repeats: 1, NumWarmups: 3},
			"warmup/closed 3 clients r1\nrecorded/closed 10 clients r1"},
		{Workload{Concurrencies: []int{}, Repeats: 1, NumWarmups: 5, WarmupConcurrency: 2, Open: open},
			"warmup/sustained 2 clients, sustained r1 n=5 d=0s warmup=0\nrecorded/open 4 req/s r1 poisson seed=0 n=10 d=0s cap=2"},
		{Workload{Concurrencies: []int{}, Repeats: 1, NumWarmups: 2, WarmupConcurrency: 2, Open: open},
			"warmup/closed 2 clients r1\nrecorded/open 4 req/s r1 poisson seed=0 n=10 d=0s cap=2"},
	} {
		if got := describe(Server(tc.wl, "a")); got != tc.want {
			t.Errorf("got\n%s\nwant\n%s", got, tc.want)
		}
	}
}
