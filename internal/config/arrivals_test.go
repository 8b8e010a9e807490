package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRampAndTraceKeys: workload.open_loop.ramp and arrival: trace with
// workload.prompts {source: trace}, each refusal one problem naming its
// field.
func TestRampAndTraceKeys(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "t.jsonl"), []byte(`{"timestamp": 0, "input_length": 3, "output_length": 1, "hash_ids": [0]}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "t.log"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const base = "servers: [{name: s, base_url: 'http://127.0.0.1:1'}]\nmodel: {id: m}\nworkload: {concurrencies: [], "
	const trace = "prompts: {source: trace, path: t.jsonl}, "
	for _, c := range []struct{ wl, want string }{
		{"open_loop: {arrival: fixed, ramp: {strategy: linear, start_rps: 1, end_rps: 20}, duration: 10s}", ""},
		{"open_loop: {arrival: poisson, ramp: {strategy: exponential, start_rps: 1, end_rps: 20}, num_requests: 50}", ""},
		{"open_loop: {arrival: fixed, ramp: {strategy: step, start_rps: 1, end_rps: 20}, duration: 10s}", `workload.open_loop.ramp: ramp strategy "step": want one of linear, exponential`},
		{"open_loop: {arrival: fixed, ramp: {strategy: exponential, start_rps: 0, end_rps: 20}, duration: 10s}", "workload.open_loop.ramp: ramp start rate 0: an exponential ramp needs a positive start rate"},
		{"open_loop: {arrival: fixed, ramp: {strategy: linear, start_rps: 1, end_rps: 20}}", "workload.open_loop: needs num_requests or duration"},
		{"open_loop: {arrival: fixed, request_rates_rps: [2], ramp: {strategy: linear, start_rps: 1, end_rps: 20}, duration: 1s}", "workload.open_loop.request_rates_rps: given with ramp"},
		{"open_loop: {arrival: fixed, ramp: {strategy: linear, start: 1, end_rps: 20}, duration: 1s}", "workload.open_loop.ramp.start: unknown key"},
		{trace + "open_loop: {arrival: trace}", ""},
		{"prompts: {source: trace, path: t.jsonl, time_scale: 0.5, block_size: 16, count: 1, seed: 3, ignore_eos: true}, open_loop: {arrival: trace, num_requests: 1, duration: 5s, max_concurrency: 2}", ""},
		{trace + "open_loop: {arrival: trace, request_rates_rps: [4]}", "workload.open_loop.request_rates_rps: trace arrivals take their times from the trace"},
		{trace + "open_loop: {arrival: trace, ramp: {strategy: linear, start_rps: 1, end_rps: 2}}", "workload.open_loop.ramp: trace arrivals take their times from the trace"},
		{trace + "open_loop: {arrival: trace, seed: 2}", "workload.open_loop: burstiness and seed apply to drawn arrivals"},
		{"open_loop: {arrival: trace}", "workload.open_loop.arrival: trace: the arrival times come from a trace; set workload.prompts"},
		{"prompts: {source: trace, path: t.jsonl, time_scale: -1}, open_loop: {arrival: trace}", "workload.prompts.time_scale: -1: want a positive number"},
		{"prompts: {source: trace, path: t.jsonl, format: parquet}, open_loop: {arrival: trace}", `workload.prompts.format: "parquet": want one of mooncake, azure`},
		{"prompts: {source: trace, path: t.log}, open_loop: {arrival: trace}", "workload.prompts.format: empty, and the path's extension names no trace format"},
		{"prompts: {source: trace, path: missing.csv}, open_loop: {arrival: trace}", "workload.prompts.path:"},
		{"prompts: {source: trace, path: t.jsonl, input_len: {fixed: 3}}, open_loop: {arrival: trace}", "workload.prompts: input_len, output_len, use_output_len, max_model_len and the prefix keys are not the trace source's"},
		{"prompts: {source: trace, path: t.jsonl, prefix_len: 64}, open_loop: {arrival: trace}", "the prefix keys are not the trace source's"},
		{"prompts: {source: synthetic, input_len: {fixed: 3}, output_len: {fixed: 3}, count: 2, time_scale: 2}, open_loop: {arrival: fixed, request_rates_rps: [1], num_requests: 2}", "workload.prompts: format, time_scale and block_size are the trace source's, not the synthetic source's"},
	} {
		r, err := Parse([]byte(base+c.wl+"}\n"), "x.yaml", dir)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.wl, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s:\n got %v\nwant %q", c.wl, err, c.want)
		case c.want != "" && strings.Count(err.Error(), "\n") > 0:
			t.Errorf("%s: more than one problem: %v", c.wl, err)
		case c.want == "" && strings.HasPrefix(c.wl, "prompts: {source: trace, path: t.jsonl, time_scale"):
			tr := r.Workload.Prompts.Spec().Trace
			if tr == nil || tr.TimeScale != 0.5 || tr.BlockSize != 16 || tr.Count != 1 || tr.Seed != 3 || !tr.IgnoreEOS {
				t.Errorf("trace spec %+v", tr)
			}
		}
	}
}

// TestVLLMKeys: the workload keys of vllm bench serve's meanings, each
// refusal one problem naming its field.
func TestVLLMKeys(t *testing.T) {
	const base = "servers: [{name: s, base_url: 'http://127.0.0.1:1', insecure_tls: true}]\nmodel: {id: m}\nworkload: {concurrencies: [], "
	const open = "open_loop: {request_rates_rps: [2], arrival: poisson, num_requests: 5, pacing: vllm}"
	for _, c := range []struct{ wl, want string }{
		{"body_style: vllm, num_warmups: 2, request_id_prefix: run-, extra_body: {temperature: 0.3}, " + open, ""},
		{"open_loop: {arrival: gamma, burstiness: 0.5, ramp: {strategy: linear, start_rps: 1, end_rps: 8}, num_requests: 5, pacing: vllm}", ""},
		{"extra_body: {temperature: 0.3}, " + open, "workload.extra_body.temperature:"},
		{"body_style: tgi, " + open, `workload.body_style: "tgi": want vllm`},
		{"num_warmups: -1, " + open, "workload.num_warmups: -1: must be 0 or more"},
		{"request_id_prefix: \"a\\nb\", " + open, "workload.request_id_prefix:"},
		{"open_loop: {request_rates_rps: [2], arrival: poisson, num_requests: 5, pacing: k6}", `workload.open_loop.pacing: "k6": want vllm`},
		{"open_loop: {request_rates_rps: [2], arrival: poisson, duration: 5s, pacing: vllm}", "workload.open_loop.pacing: vllm needs num_requests"},
		{"open_loop: {request_rates_rps: [2], arrival: poisson, num_requests: 5, duration: 5s, pacing: vllm}", "workload.open_loop.pacing: vllm: a vLLM wave is bounded by num_requests alone"},
		{"open_loop: {arrival: fixed, ramp: {strategy: linear, start_rps: 0, end_rps: 8}, num_requests: 5, pacing: vllm}", "the ramp's first request is drawn at start_rps"},
	} {
		_, err := Parse([]byte(base+c.wl+"}\n"), "x.yaml", t.TempDir())
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.wl, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want %q", c.wl, err, c.want)
		}
	}
}
