package export

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/bundle/bundletest"
	"github.com/rehearse/rehearse/internal/contract"
)

// vllmKeys are the keys `vllm bench serve --save-result` writes for a
// generative model without --metadata, --goodput aside (request_goodput is
// always there, null without it), with --percentile-metrics
// ttft,tpot,itl,e2el and the default --metric-percentiles 99: taken from
// vllm/benchmarks/serve.py at vllm-project/vllm commit
// 009e6d4a1cd6ba3fb2a9fc00f4ec06f5297232a1 (main_async's result_json,
// benchmark()'s result dict less the --save-detailed arrays, and
// process_one_metric's mean/median/std/p99 keys).
var vllmKeys = []string{
	"date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id", "num_prompts",
	"request_rate", "burstiness", "max_concurrency",
	"duration", "completed", "failed", "total_input_tokens", "total_output_tokens",
	"request_throughput", "request_goodput", "output_throughput", "total_token_throughput",
	"latencies", "queue_times", "max_output_tokens_per_s", "max_concurrent_requests", "rtfx",
	"mean_ttft_ms", "median_ttft_ms", "std_ttft_ms", "p99_ttft_ms",
	"mean_tpot_ms", "median_tpot_ms", "std_tpot_ms", "p99_tpot_ms",
	"mean_itl_ms", "median_itl_ms", "std_itl_ms", "p99_itl_ms",
	"mean_e2el_ms", "median_e2el_ms", "std_e2el_ms", "p99_e2el_ms",
}

// vllmDetailed are the arrays --save-detailed adds (same source).
var vllmDetailed = []string{"input_lens", "output_lens", "ttfts", "itls", "start_times", "generated_texts", "errors"}

// metadataKeys are the keys rehearse adds as --metadata KEY=VALUE would.
var metadataKeys = []string{"server", "load", "notes"}

// withOpenLoop turns the batching server's 8-client waves of SeedLike into
// open-loop waves at 2.5 req/s (Poisson, capped at 4), so the fixture has
// both kinds of load.
func withOpenLoop(res *bundle.Results) *bundle.Results {
	for i, w := range res.Waves {
		if w.Server == "batching" && w.Concurrency == 8 && w.Kind == contract.KindRecorded {
			res.Waves[i].Mode, res.Waves[i].RequestRateRPS, res.Waves[i].Arrival, res.Waves[i].MaxConcurrency = contract.ModeOpen, 2.5, "poisson", 4
		}
	}
	res.Recompute()
	return res
}

func fixture() *bundle.Results {
	return withOpenLoop(bundletest.WithInputTokens(bundletest.SeedLike()))
}

func decodeLines(t *testing.T, data []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	for i, line := range bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		out = append(out, m)
	}
	return out
}

func keysOf(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func sorted(ss ...[]string) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s...)
	}
	sort.Strings(out)
	return out
}

func TestVLLMKeysAreVLLMs(t *testing.T) {
	res := fixture()
	for _, detailed := range []bool{false, true} {
		out, err := Export("vllm", res, Options{Detailed: detailed})
		if err != nil {
			t.Fatal(err)
		}
		objs := decodeLines(t, out.Data)
		if len(objs) != len(res.Aggregates) {
			t.Fatalf("%d objects for %d loads", len(objs), len(res.Aggregates))
		}
		want := sorted(vllmKeys, metadataKeys)
		if detailed {
			want = sorted(vllmKeys, metadataKeys, vllmDetailed)
		}
		for i, o := range objs {
			if got := keysOf(o); !slices.Equal(got, want) {
				t.Errorf("detailed %v, object %d keys:\n got %v\nwant %v", detailed, i, got, want)
			}
		}
	}
	// vLLM's --metric-percentiles and --percentile-metrics.
	out, err := Export("vllm", res, Options{Percentiles: []float64{50, 99.9}, Metrics: []string{"ttft"}})
	if err != nil {
		t.Fatal(err)
	}
	o := decodeLines(t, out.Data)[0]
	for _, k := range []string{"p50_ttft_ms", "p99.9_ttft_ms", "mean_ttft_ms"} {
		if _, ok := o[k]; !ok {
			t.Errorf("no %s in %v", k, keysOf(o))
		}
	}
	if _, ok := o["mean_tpot_ms"]; ok {
		t.Errorf("tpot written though only ttft was asked")
	}
	if _, err := Export("vllm", res, Options{Metrics: []string{"goodput"}}); err == nil {
		t.Error("an unknown metric was accepted")
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func TestVLLMFiguresMatchRecords(t *testing.T) {
	res := fixture()
	out, err := Export("vllm", res, Options{Detailed: true})
	if err != nil {
		t.Fatal(err)
	}
	objs := decodeLines(t, out.Data)
	for i, ag := range res.Aggregates {
		o := objs[i]
		where := ag.Server + " at " + ag.LoadLabel()
		if o["server"] != ag.Server || o["load"] != ag.LoadLabel() {
			t.Fatalf("object %d is %v at %v, want %s", i, o["server"], o["load"], where)
		}
		// Figures recomputed here from the records alone.
		var ids []int
		for _, w := range res.Waves {
			if w.Kind == contract.KindRecorded && contract.KeyOf(w) == ag.Key() {
				ids = append(ids, w.ID)
			}
		}
		completed, failed, outTok, inTok := 0, 0, 0, 0
		dur := 0.0
		var ttfts []float64
		for _, id := range ids {
			wall := 0.0
			for _, r := range res.Records {
				if r.Wave != id {
					continue
				}
				wall = max(wall, r.EndS)
				if !r.OK {
					failed++
					continue
				}
				completed++
				outTok += r.OutputTokens
				inTok += *r.UsagePromptTokens // vLLM's prompt_len: usage first
				ttfts = append(ttfts, *r.FirstContentS-r.StartS)
			}
			dur += wall
		}
		checks := []struct {
			key  string
			want float64
		}{
			{"completed", float64(completed)}, {"failed", float64(failed)}, {"num_prompts", float64(completed + failed)},
			{"total_output_tokens", float64(outTok)}, {"total_input_tokens", float64(inTok)},
			{"duration", dur}, {"output_throughput", float64(outTok) / dur},
			{"request_throughput", float64(completed) / dur}, {"total_token_throughput", float64(inTok+outTok) / dur},
			{"median_ttft_ms", *ag.TTFT.P50 * 1000}, {"p99_ttft_ms", *ag.TTFT.P99 * 1000},
			{"median_e2el_ms", *ag.E2E.P50 * 1000}, {"p99_itl_ms", *ag.ITL.P99 * 1000}, {"p99_tpot_ms", *ag.TPOT.P99 * 1000},
		}
		sum := 0.0
		for _, v := range ttfts {
			sum += v
		}
		checks = append(checks, struct {
			key  string
			want float64
		}{"mean_ttft_ms", sum / float64(len(ttfts)) * 1000})
		for _, c := range checks {
			got, ok := o[c.key].(float64)
			if !ok || !near(got, c.want) {
				t.Errorf("%s: %s = %v, want %v", where, c.key, o[c.key], c.want)
			}
		}
		if n := len(o["latencies"].([]any)); n != completed+failed {
			t.Errorf("%s: %d latencies for %d requests", where, n, completed+failed)
		}
		if n := len(o["generated_texts"].([]any)); n != completed+failed {
			t.Errorf("%s: %d generated_texts for %d requests", where, n, completed+failed)
		}
		if ag.Mode == contract.ModeOpen {
			if o["request_rate"] != 2.5 || o["max_concurrency"] != 4.0 || o["burstiness"] != 1.0 {
				t.Errorf("%s: request_rate %v, max_concurrency %v, burstiness %v", where, o["request_rate"], o["max_concurrency"], o["burstiness"])
			}
		} else if o["request_rate"] != "inf" || o["max_concurrency"] != float64(ag.Concurrency) {
			t.Errorf("%s: request_rate %v (want \"inf\"), max_concurrency %v", where, o["request_rate"], o["max_concurrency"])
		}
		if o["backend"] != "openai-chat" || o["request_goodput"] != nil || o["model_id"] != res.Provenance.Model.ID {
			t.Errorf("%s: backend %v, request_goodput %v, model_id %v", where, o["backend"], o["request_goodput"], o["model_id"])
		}
		if mc, _ := o["max_concurrent_requests"].(float64); mc < 1 || mc > float64(max(ag.Concurrency, 8)) {
			t.Errorf("%s: max_concurrent_requests %v", where, o["max_concurrent_requests"])
		}
	}
}

func TestVLLMGoodputUnderSLO(t *testing.T) {
	res := fixture()
	var o contract.Objectives
	if err := o.Set(contract.ObjTTFT, 100); err != nil {
		t.Fatal(err)
	}
	res.SLO = contract.NewSLO(o, 0.9)
	res.Recompute()
	out, err := Export("vllm", res, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i, obj := range decodeLines(t, out.Data) {
		ag := res.Aggregates[i]
		good := ag.SLO.Good
		want := float64(good) / obj["duration"].(float64)
		if got, ok := obj["request_goodput"].(float64); !ok || !near(got, want) {
			t.Errorf("%s at %s: request_goodput %v, want %v (%d good)", ag.Server, ag.LoadLabel(), obj["request_goodput"], want, good)
		}
	}
}

func TestVLLMFileName(t *testing.T) {
	c := 64
	for _, tc := range []struct {
		rate any
		mc   *int
		want string
	}{
		{"inf", &c, "openai-chat-infqps-concurrency64-Qwen2.5-1.5B-Instruct-20261201-120000.json"},
		{4.0, nil, "openai-chat-4.0qps-Qwen2.5-1.5B-Instruct-20261201-120000.json"},
		{2.5, nil, "openai-chat-2.5qps-Qwen2.5-1.5B-Instruct-20261201-120000.json"},
	} {
		if got := VLLMFileName("openai-chat", tc.rate, tc.mc, "Qwen/Qwen2.5-1.5B-Instruct", "20261201-120000"); got != tc.want {
			t.Errorf("VLLMFileName(%v) = %s, want %s", tc.rate, got, tc.want)
		}
	}
}

func TestLLMDReportMatchesRecords(t *testing.T) {
	res := fixture()
	out, err := Export("llmd-br", res, Options{})
	if err != nil {
		t.Fatal(err)
	}
	reps := decodeLines(t, out.Data)
	if len(reps) != len(res.Aggregates) {
		t.Fatalf("%d reports for %d loads", len(reps), len(res.Aggregates))
	}
	get := func(m any, path string) any {
		for _, k := range strings.Split(path, ".") {
			mm, ok := m.(map[string]any)
			if !ok {
				return nil
			}
			m = mm[k]
		}
		return m
	}
	for i, ag := range res.Aggregates {
		rep := reps[i]
		where := ag.Server + " at " + ag.LoadLabel()
		if rep["version"] != "0.2" || get(rep, "run.uid") == nil {
			t.Fatalf("%s: version %v, run %v", where, rep["version"], rep["run"])
		}
		agg := "results.request_performance.aggregate."
		checks := []struct {
			path string
			want float64
		}{
			{agg + "requests.total", float64(ag.Failures.Total)},
			{agg + "requests.failures", float64(ag.Failures.Count)},
			{agg + "latency.time_to_first_token.p50", *ag.TTFT.P50},
			{agg + "latency.time_to_first_token.p99", *ag.TTFT.P99},
			{agg + "latency.request_latency.p95", *ag.E2E.P95},
			{agg + "latency.time_per_output_token.p90", *ag.TPOT.P90},
			{agg + "latency.inter_token_latency.p50", *ag.ITL.P50},
			{agg + "throughput.output_token_rate.p50", *ag.Goodput.Median},
			{agg + "throughput.output_token_rate.min", *ag.Goodput.Min},
			{agg + "throughput.request_rate.max", *ag.RequestThroughput.Max},
			{agg + "requests.output_length.mean", *ag.OutputLength.Mean},
			{agg + "requests.input_length.p50", *ag.InputLength.P50},
			{"results.observability.drop_rate.mean", ag.Failures.Rate * 100},
		}
		for _, c := range checks {
			got, ok := get(rep, c.path).(float64)
			if !ok || !near(got, c.want) {
				t.Errorf("%s: %s = %v, want %v", where, c.path, get(rep, c.path), c.want)
			}
		}
		if u := get(rep, agg+"latency.time_per_output_token.units"); u != "s/token" {
			t.Errorf("%s: tpot units %v", where, u)
		}
		load := get(rep, "scenario.load.standardized").(map[string]any)
		if ag.Mode == contract.ModeOpen {
			if load["rate_qps"] != 2.5 {
				t.Errorf("%s: rate_qps %v", where, load["rate_qps"])
			}
		} else if load["concurrency"] != float64(ag.Concurrency) {
			t.Errorf("%s: concurrency %v", where, load["concurrency"])
		}
		stack := get(rep, "scenario.stack").([]any)
		if len(stack) != 1 || get(stack[0], "metadata.label") != ag.Server || get(stack[0], "standardized.kind") != "generic" {
			t.Errorf("%s: stack %v", where, stack)
		}
	}
	// The mechanism check (batching, 32 clients) is the observability of
	// that load only.
	for i, ag := range res.Aggregates {
		has := get(reps[i], "results.observability.components") != nil
		if want := ag.Server == "batching" && ag.Concurrency == 32; has != want {
			t.Errorf("%s at %s: observability components %v, want %v", ag.Server, ag.LoadLabel(), has, want)
		}
	}
}

func TestJSONLRoundTripsEveryRecord(t *testing.T) {
	res := fixture()
	out, err := Export("jsonl", res, Options{})
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimRight(out.Data, "\n"), []byte("\n"))
	if len(lines) != len(res.Records) {
		t.Fatalf("%d lines for %d records", len(lines), len(res.Records))
	}
	cols := Columns()
	for i, line := range lines {
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatal(err)
		}
		if len(m) != len(cols) {
			t.Fatalf("line %d has %d fields, want %d", i+1, len(m), len(cols))
		}
		var rec contract.Record
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(rec, res.Records[i]) {
			t.Fatalf("line %d decodes to\n%+v\nwant\n%+v", i+1, rec, res.Records[i])
		}
	}
}

func TestCSVHasEveryRecordAndField(t *testing.T) {
	res := fixture()
	// A text with a comma, a quote and a newline must survive.
	res.Records[0].Text = "a, \"b\"\nc"
	out, err := Export("csv", res, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(bytes.NewReader(out.Data)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(res.Records)+1 {
		t.Fatalf("%d rows for %d records and a header", len(rows), len(res.Records))
	}
	if !slices.Equal(rows[0], Columns()) {
		t.Fatalf("header %v, want %v", rows[0], Columns())
	}
	col := map[string]int{}
	for i, c := range rows[0] {
		col[c] = i
	}
	for _, want := range []string{"kind", "server", "wave", "start_s", "end_s", "first_content_s", "chunk_times_s", "ok", "error_kind", "output_tokens", "input_tokens", "usage_completion_tokens", "text", "session", "turn"} {
		if _, ok := col[want]; !ok {
			t.Errorf("no column %s", want)
		}
	}
	for i, rec := range res.Records {
		row := rows[i+1]
		var chunks []float64
		if err := json.Unmarshal([]byte(row[col["chunk_times_s"]]), &chunks); err != nil && rec.ChunkTimesS != nil {
			t.Fatalf("row %d chunk_times_s %q: %v", i+1, row[col["chunk_times_s"]], err)
		}
		if !slices.Equal(chunks, rec.ChunkTimesS) {
			t.Errorf("row %d chunk_times_s %v, want %v", i+1, chunks, rec.ChunkTimesS)
		}
		if n, _ := strconv.Atoi(row[col["output_tokens"]]); n != rec.OutputTokens {
			t.Errorf("row %d output_tokens %q, want %d", i+1, row[col["output_tokens"]], rec.OutputTokens)
		}
		if s, _ := strconv.ParseFloat(row[col["end_s"]], 64); s != rec.EndS {
			t.Errorf("row %d end_s %q, want %v", i+1, row[col["end_s"]], rec.EndS)
		}
		if row[col["text"]] != rec.Text || row[col["ok"]] != strconv.FormatBool(rec.OK) || row[col["server"]] != rec.Server {
			t.Errorf("row %d: text %q ok %q server %q", i+1, row[col["text"]], row[col["ok"]], row[col["server"]])
		}
		if rec.FirstContentS == nil && row[col["first_content_s"]] != "" {
			t.Errorf("row %d: absent first_content_s written as %q", i+1, row[col["first_content_s"]])
		}
	}
}

func TestExportsArePure(t *testing.T) {
	for _, name := range Names() {
		a, err := Export(name, fixture(), Options{Detailed: true})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := Export(name, fixture(), Options{Detailed: true})
		if !bytes.Equal(a.Data, b.Data) || len(a.Data) == 0 {
			t.Errorf("%s: two exports of the same results differ (or are empty)", name)
		}
	}
	if _, err := Export("parquet", fixture(), Options{}); err == nil || !strings.Contains(err.Error(), "csv, jsonl, llmd-br, vllm") {
		t.Errorf("unknown format: %v", err)
	}
}
