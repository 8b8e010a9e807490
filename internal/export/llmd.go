package export

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
)

// The llmd-br format is the llm-d benchmark report, schema version 0.2
// (llm-d/llm-d-benchmark, llmdbenchmark/analysis/benchmark_report/
// schema_v0_2.py and br_v0_2_example.yaml, read at commit
// 8bc9f1ddd873a24f1657d6cca2e0d0fb6947dd36): version, run, scenario (stack
// and load) and results (request_performance, observability). Only the
// schema's own fields are written (its models forbid others, except under
// observability and a generic component's standardized part).

// LLMDVersion is the schema version of the reports written.
const LLMDVersion = "0.2"

// LLMDLeftEmpty says what the reports do not carry, and why.
var LLMDLeftEmpty = []string{
	"run.cid, run.pid and run.user: rehearse runs on no cluster and records no user",
	"scenario.stack: each server is a generic component (kind generic; its engine, launch argv, model and the load generator host's GPUs beside it), since rehearse does not know the engine's parallelism or role that an inference_engine component requires",
	"results.request_performance.time_series, results.profiling, results.component_health and results.session_performance are left out",
	"results.observability: only drop_rate (the failure rate) and, for the load of the mechanism check, the polled metric as the server's running_requests (or under its own name); no KV-cache or GPU series",
	"throughput statistics are over the repeats (one rate per recorded wave); latency and length statistics over the pooled successful requests (input lengths over every attempt with a client count)",
}

// LLMD is the llmd-br format: one benchmark report per load.
func LLMD(r *bundle.Results, _ Options) (Output, error) {
	var reports []object
	ls := loads(r)
	for i, l := range ls {
		reports = append(reports, llmdReport(r, l, i))
	}
	data, err := lines(reports)
	if err != nil {
		return Output{}, err
	}
	notes := []string{fmt.Sprintf("llmd-br: %d benchmark report(s) v%s, one per load (stage is the load's index); left empty:", len(reports), LLMDVersion)}
	notes = append(notes, LLMDLeftEmpty...)
	return Output{Data: data, Notes: notes}, nil
}

func hash(parts ...any) string {
	data, _ := json.Marshal(parts)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:16])
}

func llmdReport(r *bundle.Results, l load, stage int) object {
	start, end := time.Time{}, time.Time{}
	for _, w := range l.waves {
		t, err := time.Parse(time.RFC3339Nano, w.StartedAt)
		if err != nil {
			continue
		}
		if start.IsZero() || t.Before(start) {
			start = t
		}
		if e := t.Add(time.Duration(w.WallS * float64(time.Second))); e.After(end) {
			end = e
		}
	}
	runTime := object{}
	if !start.IsZero() {
		runTime = object{
			{"start", start.UTC().Format(time.RFC3339Nano)},
			{"end", end.UTC().Format(time.RFC3339Nano)},
			{"duration", "PT" + strconv.FormatFloat(end.Sub(start).Seconds(), 'f', -1, 64) + "S"},
		}
	}
	p := r.Provenance
	run := object{
		{"uid", hash(p.StartedAt, p.Host.Hostname, l.key.Server, l.key.Mode, l.key.Concurrency, l.key.RequestRateRPS)},
		{"eid", hash(p.StartedAt, p.Host.Hostname, p.Command)},
		{"time", runTime},
		{"description", "rehearse: " + l.key.Server + " at " + l.key.LoadLabel()},
		{"keywords", []string{"rehearse", l.key.Mode}},
	}
	return object{
		{"version", LLMDVersion},
		{"run", run},
		{"scenario", object{{"stack", llmdStack(r, l)}, {"load", llmdLoad(r, l, stage)}}},
		{"results", object{
			{"request_performance", object{{"aggregate", llmdAggregate(l)}}},
			{"observability", llmdObservability(r, l)},
		}},
	}
}

func llmdStack(r *bundle.Results, l load) []object {
	var out []object
	for _, s := range r.Servers {
		if s.Name != l.key.Server {
			continue
		}
		tool, version := "unknown", "unknown"
		if len(s.LaunchArgv) > 0 {
			tool = s.LaunchArgv[0]
		}
		if s.Simulated != "" {
			tool = "rehearse sim"
			version = r.Provenance.Tool.Version
		}
		for _, rt := range r.Provenance.Runtimes {
			if rt.Server == s.Name || (rt.Server == "" && rt.Name == "vllm") {
				if rt.Name == "vllm" || rt.Name == "sglang" || rt.Name == "tgi" {
					tool, version = rt.Name, rt.Version
				}
			}
		}
		model := s.Model
		if model == "" {
			model = r.Provenance.Model.ID
		}
		var gpus []string
		for _, g := range r.Provenance.GPUs {
			gpus = append(gpus, g.Name)
		}
		std := object{
			{"kind", "generic"},
			{"tool", tool},
			{"tool_version", version},
			{"model", object{{"name", model}}},
			{"base_url", s.BaseURL},
		}
		if len(gpus) > 0 {
			std = append(std, field{"host_accelerators", gpus})
		}
		native := object{}
		if len(s.LaunchArgv) > 0 {
			native = append(native, field{"args", object{{"argv", s.LaunchArgv}}})
		}
		if len(s.Env) > 0 {
			native = append(native, field{"envars", s.Env})
		}
		out = append(out, object{
			{"metadata", object{
				{"schema_version", "0.0.1"},
				{"label", s.Name},
				{"cfg_id", hash(s.BaseURL, s.LaunchArgv, s.Env, model)},
			}},
			{"standardized", std},
			{"native", native},
		})
	}
	return out
}

func llmdLoad(r *bundle.Results, l load, stage int) object {
	var in, outLens []float64
	for _, rec := range l.records {
		switch {
		case rec.InputTokens != nil:
			in = append(in, float64(*rec.InputTokens))
		case rec.UsagePromptTokens != nil:
			in = append(in, float64(*rec.UsagePromptTokens))
		}
		if rec.OK {
			outLens = append(outLens, float64(rec.OutputTokens))
		}
	}
	source := "unknown"
	if ps := r.Workload.PromptSource; ps != nil {
		switch ps.Name {
		case "random", "prefix_repetition", "synthetic":
			source = "random"
		default:
			source = "sampled"
		}
	}
	std := object{
		{"tool", "rehearse"},
		{"tool_version", r.Provenance.Tool.Version},
		{"source", source},
		{"stage", stage},
		{"input_seq_len", seqLen(in)},
	}
	if len(outLens) > 0 {
		std = append(std, field{"output_seq_len", seqLen(outLens)})
	}
	if len(r.Workload.Sessions) > 0 {
		most := 0
		for _, s := range r.Workload.Sessions {
			most = max(most, len(s.Turns))
		}
		std = append(std, field{"multi_turn", object{{"enabled", true}, {"max_turns", object{{"distribution", "other"}, {"value", most}}}}})
	}
	if l.key.Mode == contract.ModeOpen {
		if l.key.RequestRateRPS > 0 {
			std = append(std, field{"rate_qps", l.key.RequestRateRPS})
		}
		if mc := vllmMaxConcurrency(l); mc != nil {
			std = append(std, field{"concurrency", *mc})
		}
	} else if l.key.Concurrency >= 1 {
		std = append(std, field{"concurrency", l.key.Concurrency})
	}
	return object{
		{"metadata", object{
			{"schema_version", "0.0.1"},
			{"cfg_id", hash(r.Workload)},
			{"description", "rehearse " + l.key.Mode + " load: " + l.key.LoadLabel()},
		}},
		{"standardized", std},
		{"native", object{{"config", r.Workload}}},
	}
}

// seqLen is a schema SequenceLength of observed lengths: fixed where every
// length is the same, else other with the mean, min and max.
func seqLen(xs []float64) object {
	if len(xs) == 0 {
		return object{{"distribution", "other"}, {"value", 0}}
	}
	lo, hi := slices.Min(xs), slices.Max(xs)
	if lo == hi {
		return object{{"distribution", "fixed"}, {"value", lo}}
	}
	o := object{{"distribution", "other"}, {"value", mean(xs)}, {"std_dev", std(xs)}, {"min", int(lo)}}
	if hi >= 1 {
		o = append(o, field{"max", int(hi)})
	}
	return o
}

// llmdPercentiles are the schema's Statistics percentiles, named as it
// names them.
var llmdPercentiles = []struct {
	name string
	p    float64
}{{"p0p1", 0.1}, {"p1", 1}, {"p5", 5}, {"p10", 10}, {"p25", 25}, {"p50", 50}, {"p75", 75}, {"p90", 90}, {"p95", 95}, {"p99", 99}, {"p99p9", 99.9}}

// stats is a schema Statistics of xs in units, or nil for an empty
// population (the schema requires a mean).
func stats(units string, xs []float64) any {
	if len(xs) == 0 {
		return nil
	}
	o := object{{"units", units}, {"mean", mean(xs)}, {"stddev", std(xs)}, {"min", slices.Min(xs)}}
	for _, p := range llmdPercentiles {
		o = append(o, field{p.name, pct(xs, p.p)})
	}
	return append(o, field{"max", slices.Max(xs)})
}

// put appends key: v to o unless v is nil.
func put(o object, k string, v any) object {
	if v == nil {
		return o
	}
	return append(o, field{k, v})
}

func llmdAggregate(l load) object {
	var lat contract.Latencies
	var lengths contract.TrafficLengths
	failures := 0
	for _, rec := range l.records {
		lat.Add(rec)
		lengths.Add(rec)
		if !rec.OK {
			failures++
		}
	}
	var inRate, outRate, totRate, reqRate []float64
	for _, w := range l.waves {
		recs := l.byWave[w.ID]
		win := contract.GoodputWindowS(l.key.Mode, recs)
		if win <= 0 {
			continue
		}
		in, out, oks := 0, 0, 0
		for _, rec := range recs {
			if !rec.OK {
				continue
			}
			oks++
			out += rec.OutputTokens
			if rec.InputTokens != nil {
				in += *rec.InputTokens
			} else if rec.UsagePromptTokens != nil {
				in += *rec.UsagePromptTokens
			}
		}
		inRate = append(inRate, float64(in)/win)
		outRate = append(outRate, float64(out)/win)
		totRate = append(totRate, float64(in+out)/win)
		reqRate = append(reqRate, float64(oks)/win)
	}
	requests := object{{"total", len(l.records)}, {"failures", failures}}
	requests = put(requests, "input_length", stats("count", lengths.Input))
	requests = put(requests, "output_length", stats("count", lengths.Output))
	latency := object{}
	latency = put(latency, "time_to_first_token", stats("s", lat.TTFT))
	latency = put(latency, "time_per_output_token", stats("s/token", lat.TPOT))
	latency = put(latency, "inter_token_latency", stats("s/token", lat.ITL))
	latency = put(latency, "request_latency", stats("s", lat.E2E))
	throughput := object{}
	throughput = put(throughput, "input_token_rate", stats("tokens/s", inRate))
	throughput = put(throughput, "output_token_rate", stats("tokens/s", outRate))
	throughput = put(throughput, "total_token_rate", stats("tokens/s", totRate))
	throughput = put(throughput, "request_rate", stats("queries/s", reqRate))
	return object{{"requests", requests}, {"latency", latency}, {"throughput", throughput}}
}

func llmdObservability(r *bundle.Results, l load) object {
	o := object{}
	if n := len(l.records); n > 0 {
		failed := 0
		for _, rec := range l.records {
			if !rec.OK {
				failed++
			}
		}
		rate := 100 * float64(failed) / float64(n)
		o = append(o, field{"drop_rate", object{{"units", "percent"}, {"mean", rate}, {"min", rate}, {"max", rate}}})
	}
	mc := r.MechanismCheck
	if mc == nil || mc.Server != l.key.Server || l.key.Mode == contract.ModeOpen || mc.Concurrency != l.key.Concurrency || len(mc.Series) == 0 {
		return o
	}
	var vs []float64
	for _, s := range mc.Series {
		if !math.IsNaN(s[1]) && !math.IsInf(s[1], 0) {
			vs = append(vs, s[1])
		}
	}
	st := stats("count", vs)
	if st == nil {
		return o
	}
	name := strings.NewReplacer(":", "_", ".", "_").Replace(mc.Metric)
	agg := object{}
	switch {
	case strings.HasSuffix(mc.Metric, "num_requests_running"):
		agg = append(agg, field{"running_requests", st})
	case strings.HasSuffix(mc.Metric, "num_requests_waiting"):
		agg = append(agg, field{"waiting_requests", st})
	default:
		o = append(o, field{name, object{{"statistics", st}, {"note", "polled during rehearse's mechanism-check wave at this load"}}})
		return o
	}
	return append(o, field{"components", []object{{{"component_label", l.key.Server}, {"aggregate", agg}}}})
}
