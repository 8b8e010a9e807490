package rehearsal

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/plan"
	"github.com/rehearse/rehearse/internal/workload"
)

// recorded is the workload results.json records for a rehearsal file and
// its prompts: the plan, then its record.
func recorded(t *testing.T, yaml string, prompts workload.Set) bundle.Workload {
	t.Helper()
	cfg := parse(t, yaml)
	return recordedWorkload(cfg, plan.WorkloadOf(cfg, prompts))
}

func TestRecordedWorkloadOfTheRehearsal(t *testing.T) {
	w := recorded(t, `model: {id: m}
servers: [{name: v, launch: [vllm, "{port}"]}]
workload:
  timeout: 1m30s
  extra_body: {ignore_eos: true}
  open_loop: {request_rates_rps: [2], arrival: gamma, burstiness: 0.5, num_requests: 10, duration: 30s}
`, workload.Texts("p"))
	if w.TimeoutS != 90 || w.Kind != "closed+open" || w.Open == nil || w.Open.DurationS != 30 || w.Open.Burstiness != 0.5 ||
		w.MechanismCheck == nil || w.MechanismCheck.Concurrency != 64 || w.MechanismCheck.PeriodS != 0.1 ||
		w.ExtraBody["ignore_eos"] != true || !w.IncludeUsage || w.PercentileMethod == "" || len(w.Prompts) != 1 {
		t.Errorf("workload = %+v", w)
	}
}

func TestRecordedWorkloadKindAndWarmupConcurrency(t *testing.T) {
	w := recorded(t, `model: {id: m}
servers: [{name: v, base_url: "http://127.0.0.1:1"}]
workload:
  concurrencies: []
  warmup_waves: 1
  warmup_concurrency: 4
  open_loop: {request_rates_rps: [2], arrival: poisson, num_requests: 10}
`, workload.Texts("p"))
	if w.Kind != "open" || w.WarmupConcurrency != 4 || w.Concurrencies == nil || len(w.Concurrencies) != 0 {
		t.Errorf("workload = %+v", w)
	}
}

func TestRecordedWorkloadPromptSource(t *testing.T) {
	const file = `model: {id: m}
servers: [{name: v, base_url: "http://127.0.0.1:1"}]
`
	set := workload.Set{
		Prompts: []workload.Prompt{{Text: "a", MaxTokens: 3}, {Text: "b"}},
		Record:  workload.SourceRecord{Name: "synthetic", Params: map[string]any{"seed": 1}, SHA256: "abc", Skipped: map[string]int{"empty": 2}},
	}
	w := recorded(t, file, set)
	if w.ExtraBody["ignore_eos"] != nil {
		t.Fatalf("extra_body %v without ignore_eos asked", w.ExtraBody)
	}
	set.IgnoreEOS = true
	w = recorded(t, file, set)
	if w.ExtraBody["ignore_eos"] != true {
		t.Fatalf("extra_body %v", w.ExtraBody)
	}
	s := w.PromptSource
	if s == nil || s.Name != "synthetic" || s.SHA256 != "abc" || s.Count != 2 || s.Params["seed"] != 1 || s.Skipped["empty"] != 2 {
		t.Fatalf("prompt source %+v", s)
	}
	if len(w.PromptMaxTokens) != 2 || w.PromptMaxTokens[0] != 3 || w.PromptMaxTokens[1] != 0 {
		t.Fatalf("prompt max_tokens %v", w.PromptMaxTokens)
	}
}

func TestRecordedWorkloadSustained(t *testing.T) {
	w := recorded(t, `model: {id: m}
servers: [{name: v, base_url: "http://127.0.0.1:1"}]
workload:
  concurrencies: [16]
  mode: sustained
  sustained: {duration: 30s, warmup_requests: 16}
  open_loop: {request_rates_rps: [2], arrival: poisson, num_requests: 10}
`, workload.Texts("p"))
	if w.Kind != "sustained+open" || w.Sustained == nil || *w.Sustained != (bundle.Sustained{DurationS: 30, WarmupRequests: 16}) {
		t.Errorf("workload = %+v, sustained %+v", w, w.Sustained)
	}
	if w := recorded(t, "model: {id: m}\nservers: [{name: v, base_url: \"http://127.0.0.1:1\"}]\n", workload.Texts("p")); w.Kind != "closed" || w.Sustained != nil {
		t.Errorf("default workload = %+v", w)
	}
}

// TestRecordedWorkloadSessions: the sessions' turns, the think time (its
// distribution fixed when the file names none) and the conversations are
// recorded as the load sends them.
func TestRecordedWorkloadSessions(t *testing.T) {
	set := workload.Set{
		Prompts:  []workload.Prompt{{Text: "a"}, {Text: "b", Messages: []workload.Message{{Role: "system", Content: "s"}, {Role: "user", Content: "b"}}}},
		Sessions: []workload.Session{{Turns: []int{0, 1}}},
	}
	w := recorded(t, `model: {id: m}
servers: [{name: v, base_url: "http://127.0.0.1:1"}]
workload:
  prompts: {source: synthetic, input_len: {fixed: 8}, output_len: {fixed: 4}, count: 2}
  sessions: {turns: 2, think_time: 1500ms}
`, set)
	if len(w.Sessions) != 1 || !slices.Equal(w.Sessions[0].Turns, []int{0, 1}) ||
		w.ThinkTime == nil || *w.ThinkTime != (bundle.ThinkTime{MeanS: 1.5, Distribution: workload.ThinkFixed}) {
		t.Errorf("sessions %+v, think time %+v", w.Sessions, w.ThinkTime)
	}
	if len(w.PromptMessages) != 2 || w.PromptMessages[0] != nil || len(w.PromptMessages[1]) != 2 || w.PromptMessages[1][0] != (bundle.Message{Role: "system", Content: "s"}) {
		t.Errorf("prompt messages %+v", w.PromptMessages)
	}
}

// TestRecordedWorkloadCarriesTheTrace: the bundle's workload records the
// ramp, and the traced arrivals aligned with the prompts only for arrival
// trace.
func TestRecordedWorkloadCarriesTheTrace(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "t.jsonl"), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const head = "model: {id: m}\nservers: [{name: v, base_url: \"http://127.0.0.1:1\"}]\n"
	set := workload.Set{Prompts: []workload.Prompt{{Text: "a", MaxTokens: 2}, {Text: "b", MaxTokens: 3}},
		Arrivals: []time.Duration{0, 1500 * time.Millisecond}, Record: workload.SourceRecord{Name: workload.SourceTrace}}
	cfg, err := config.Parse([]byte(head+"workload: {concurrencies: [], prompts: {source: trace, path: t.jsonl}, open_loop: {arrival: trace, duration: 1m}}\n"), "t.yaml", dir)
	if err != nil {
		t.Fatal(err)
	}
	w := recordedWorkload(cfg, plan.WorkloadOf(cfg, set))
	if w.Kind != "open" || !slices.Equal(w.ArrivalsS, []float64{0, 1.5}) || w.Open.Arrival != "trace" || w.Open.DurationS != 60 {
		t.Errorf("trace workload: kind %s, arrivals %v, open %+v", w.Kind, w.ArrivalsS, w.Open)
	}
	cfg, err = config.Parse([]byte(head+"workload: {concurrencies: [], prompts: {source: trace, path: t.jsonl}, open_loop: {arrival: fixed, ramp: {strategy: linear, start_rps: 2, end_rps: 8}, num_requests: 10}}\n"), "t.yaml", dir)
	if err != nil {
		t.Fatal(err)
	}
	w = recordedWorkload(cfg, plan.WorkloadOf(cfg, set))
	if w.ArrivalsS != nil || w.Open.Ramp == nil || *w.Open.Ramp != (contract.Ramp{Strategy: "linear", StartRPS: 2, EndRPS: 8}) {
		t.Errorf("ramp workload: arrivals %v, ramp %+v", w.ArrivalsS, w.Open.Ramp)
	}
}

// TestPlanDigest: the digest depends on the plan (a seed, a prompt, a
// server) and not on the segment.
func TestPlanDigest(t *testing.T) {
	cfg := &config.Rehearsal{Servers: []config.Server{{Name: "a", BaseURL: "http://127.0.0.1:1", Model: "m"}}}
	wl := plan.Workload{Concurrencies: []int{4}, Repeats: 1, Load: plan.Load{Prompts: []string{"x"}}, Open: &plan.OpenLoop{Seed: 1}}
	d := PlanDigest(cfg, wl)
	seg := *cfg
	seg.Segment = plan.Segment{Index: 1, Count: 4}
	if PlanDigest(&seg, wl) != d {
		t.Error("the segment changed the digest")
	}
	if digest(cfg, recordedWorkload(cfg, wl)) != d {
		t.Error("the digest of the record is not the plan's")
	}
	other := wl
	other.Open = &plan.OpenLoop{Seed: 2}
	if PlanDigest(cfg, other) == d {
		t.Error("another seed, the same digest")
	}
	other = wl
	other.Load.Prompts = []string{"y"}
	if PlanDigest(cfg, other) == d {
		t.Error("another prompt, the same digest")
	}
	srv := *cfg
	srv.Servers = []config.Server{{Name: "a", BaseURL: "http://127.0.0.1:2", Model: "m"}}
	if PlanDigest(&srv, wl) == d {
		t.Error("another server, the same digest")
	}
}
