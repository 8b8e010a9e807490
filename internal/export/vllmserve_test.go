package export

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/vllmcli"
)

// Python's json.dump of the values a result holds.
func TestPyJSON(t *testing.T) {
	for _, c := range []struct {
		v    float64
		want string
	}{
		{4, "4.0"}, {2.5, "2.5"}, {0.1, "0.1"}, {1e-05, "1e-05"}, {0.0001, "0.0001"}, {1e16, "1e+16"},
		{1234567890123456, "1234567890123456.0"}, {-0.5, "-0.5"}, {123.456, "123.456"}, {1.5e-7, "1.5e-07"},
	} {
		if got := pyRepr(c.v); got != c.want {
			t.Errorf("pyRepr(%v) = %s, want %s", c.v, got, c.want)
		}
	}
	o := object{{"a", "é\"\n"}, {"b", []float64{1, 0.5}}, {"c", nil}, {"d", 3}, {"e", [][]float64{{}, {2}}}, {"f", object{{"rps", 1}}}, {"g", true}}
	want := `{"a": "\u00e9\"\n", "b": [1.0, 0.5], "c": null, "d": 3, "e": [[], [2.0]], "f": {"rps": 1}, "g": true}`
	if got := string(o.PyJSON()); got != want {
		t.Errorf("PyJSON\n got %s\nwant %s", got, want)
	}
	if o = o.set("d", 4).set("h", "x"); len(o) != 8 || o[3].v != 4 || o[7].k != "h" {
		t.Errorf("set: %v", o)
	}
}

// The summary block is serve.py's, line for line: its columns, the lines
// it prints only when a value is given, its metric blocks in order.
func TestVLLMSummary(t *testing.T) {
	o := object{{"tokenizer_id", "m"}, {"request_rate", 5.0}, {"max_concurrency", 4}, {"duration", 5.781},
		{"completed", 10}, {"failed", 0}, {"total_input_tokens", 1369}, {"total_output_tokens", 2212},
		{"request_throughput", 1.7297}, {"request_goodput", nil}, {"output_throughput", 382.89}, {"total_token_throughput", 619.85},
		{"max_output_tokens_per_s", 12.0}, {"max_concurrent_requests", 3}, {"rtfx", 0.0},
		{"mean_ttft_ms", 71.54}, {"median_ttft_ms", 73.88}, {"std_ttft_ms", 1.0}, {"p90_ttft_ms", 78.0}, {"p99_ttft_ms", 79.49}}
	var b bytes.Buffer
	VLLMSummary(&b, o)
	want := `============ Serving Benchmark Result ============
Successful requests:                     10        
Failed requests:                         0         
Maximum request concurrency:             4         
Request rate configured (RPS):           5.00      
Benchmark duration (s):                  5.78      
Total input tokens:                      1369      
Total generated tokens:                  2212      
Request throughput (req/s):              1.73      
Output token throughput (tok/s):         382.89    
Peak output token throughput (tok/s):    12.00     
Peak concurrent requests:                3.00      
Total token throughput (tok/s):          619.85    
---------------Time to First Token----------------
Mean TTFT (ms):                          71.54     
Median TTFT (ms):                        73.88     
P90 TTFT (ms):                           78.00     
P99 TTFT (ms):                           79.49     
==================================================
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", strings.ReplaceAll(b.String(), " \n", "·\n"), strings.ReplaceAll(want, " \n", "·\n"))
	}
}

// A bench serve bundle's result has vLLM's keys only, valued as its command
// line gave them, under vLLM's name; a ramp-up's name and keys are vLLM's.
func TestVLLMServeRun(t *testing.T) {
	res := bundletestOneLoad()
	label, tok := "mylabel", "m"
	rate, burst, mc := 2.5, 1.0, 4
	res.Workload.VLLM = &vllmcli.Run{Serve: true, Backend: "vllm", Label: &label, ModelID: "org/m", TokenizerID: &tok, NumPrompts: 1000,
		Metadata: []vllmcli.KeyValue{{Key: "gpu", Value: "none"}, {Key: "date", Value: "overridden"}}, RequestRateRPS: &rate, Burstiness: &burst,
		MaxConcurrency: &mc, PercentileMetrics: []string{"ttft"}, MetricPercentiles: []float64{50}}
	r := VLLMResults(res, Options{})[0]
	if !strings.HasPrefix(r.FileName, "mylabel-2.5qps-concurrency4-m-") {
		t.Errorf("file name %s", r.FileName)
	}
	var keys []string
	for _, f := range r.Object {
		keys = append(keys, f.k)
	}
	got := strings.Join(keys, ",")
	if !strings.HasPrefix(got, "date,endpoint_type,backend,label,model_id,tokenizer_id,num_prompts,gpu,request_rate,burstiness,max_concurrency,duration,") ||
		!strings.HasSuffix(got, ",rtfx,mean_ttft_ms,median_ttft_ms,std_ttft_ms,p50_ttft_ms") || strings.Contains(got, "server") {
		t.Errorf("keys %s", got)
	}
	if v, _ := r.Object.Get("date"); v != "overridden" {
		t.Errorf("a --metadata key of vLLM's own takes its value in its place, as a Python dict update: date %v", v)
	}
	res.Workload.VLLM.RampUp, res.Workload.VLLM.RequestRateRPS, res.Workload.VLLM.MaxConcurrency = &vllmcli.RampUp{Strategy: "linear", StartRPS: 1, EndRPS: 20}, nil, nil
	r = VLLMResults(res, Options{})[0]
	if !strings.HasPrefix(r.FileName, "mylabel-ramp-up-linear-1qps-20qps-m-") {
		t.Errorf("ramp file name %s", r.FileName)
	}
	if v, _ := r.Object.Get("ramp_up_end_rps"); v != 20 {
		t.Errorf("ramp_up_end_rps %v", v)
	}
}

// bundletestOneLoad is the fixture cut to one server's one load.
func bundletestOneLoad() *bundle.Results {
	res := fixture()
	key := res.Aggregates[0].Key()
	var waves = res.Waves[:0]
	for _, w := range res.Waves {
		if w.Server == key.Server {
			waves = append(waves, w)
		}
	}
	res.Waves = waves
	res.Servers = res.Servers[:1]
	res.Recompute()
	return res
}
