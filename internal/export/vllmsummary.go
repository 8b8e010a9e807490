package export

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// vllmMetricHeaders are the titles and names of process_one_metric's
// blocks, in vLLM's order.
var vllmMetricHeaders = []struct{ key, name, header string }{
	{"ttft", "TTFT", "Time to First Token"},
	{"tpot", "TPOT", "Time per Output Token (excl. 1st token)"},
	{"itl", "ITL", "Inter-token Latency"},
	{"e2el", "E2EL", "End-to-end Latency"},
}

// VLLMSummary writes the "Serving Benchmark Result" block vllm bench serve
// prints for the run whose result is o, line for line as serve.py's
// benchmark() prints it (Python's "{:<40} {:<10}" columns, trailing spaces
// included), from the same figures as the file.
func VLLMSummary(w io.Writer, o VLLMObject) {
	num := func(k string) float64 {
		v, _ := o.Get(k)
		switch x := v.(type) {
		case int:
			return float64(x)
		case float64:
			return x
		}
		return 0
	}
	line := func(label string, v any) {
		switch x := v.(type) {
		case int:
			fmt.Fprintf(w, "%-40s %-10d\n", label, x)
		case float64:
			fmt.Fprintf(w, "%-40s %-10.2f\n", label, x)
		}
	}
	_, tokenizer := o.Get("tokenizer_id")
	if t, _ := o.Get("tokenizer_id"); t == nil {
		tokenizer = false
	}
	fmt.Fprintln(w, center(" Serving Benchmark Result ", '=', 50))
	line("Successful requests:", int(num("completed")))
	line("Failed requests:", int(num("failed")))
	if mc, _ := o.Get("max_concurrency"); mc != nil {
		line("Maximum request concurrency:", int(num("max_concurrency")))
	}
	if rate, _ := o.Get("request_rate"); rate != "inf" {
		line("Request rate configured (RPS):", num("request_rate"))
	}
	line("Benchmark duration (s):", num("duration"))
	line("Total input tokens:", int(num("total_input_tokens")))
	if tokenizer {
		line("Total generated tokens:", int(num("total_output_tokens")))
	}
	line("Request throughput (req/s):", num("request_throughput"))
	if g, _ := o.Get("request_goodput"); g != nil {
		line("Request goodput (req/s):", num("request_goodput"))
	}
	if tokenizer {
		line("Output token throughput (tok/s):", num("output_throughput"))
		line("Peak output token throughput (tok/s):", num("max_output_tokens_per_s"))
	}
	line("Peak concurrent requests:", num("max_concurrent_requests"))
	if tokenizer {
		line("Total token throughput (tok/s):", num("total_token_throughput"))
	}
	if _, ok := o.Get("probe_completed"); ok {
		fmt.Fprintln(w, center("Probe Requests", '-', 50))
		line("Probe requests completed:", int(num("probe_completed")))
		line("Probe requests failed:", int(num("probe_failed")))
		line("Median probe E2EL (ms):", num("probe_median_e2el_ms"))
		line("P99 probe E2EL (ms):", num("probe_p99_e2el_ms"))
		line("Max probe E2EL (ms):", num("probe_max_e2el_ms"))
	}
	for _, m := range vllmMetricHeaders {
		if _, ok := o.Get("mean_" + m.key + "_ms"); !ok {
			continue
		}
		fmt.Fprintln(w, center(m.header, '-', 50))
		line("Mean "+m.name+" (ms):", num("mean_"+m.key+"_ms"))
		line("Median "+m.name+" (ms):", num("median_"+m.key+"_ms"))
		for _, f := range o {
			// p{P}_{metric}_ms, and not probe_*_e2el_ms.
			if p, ok := strings.CutSuffix(f.k, "_"+m.key+"_ms"); ok && strings.HasPrefix(p, "p") && isNumber(p[1:]) {
				line("P"+p[1:]+" "+m.name+" (ms):", num(f.k))
			}
		}
	}
	fmt.Fprintln(w, strings.Repeat("=", 50))
}

// center is Python's "{s:{c}^{n}}".format: s centred in n characters of
// c, the odd one on the right.
func center(s string, c rune, n int) string {
	pad := n - len([]rune(s))
	if pad <= 0 {
		return s
	}
	return strings.Repeat(string(c), pad/2) + s + strings.Repeat(string(c), pad-pad/2)
}

// isNumber reports whether s is a percentile as vLLM names one: 99, 99.9.
func isNumber(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}
