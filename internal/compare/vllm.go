package compare

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
)

// VLLMTool is provenance.tool.name of results read from a vLLM result
// JSON.
const VLLMTool = "vllm bench serve"

// VLLMLimit is the most bytes a vLLM result JSON read by compare may hold.
var VLLMLimit = bundle.Limit{Kind: "a vLLM result JSON", Bytes: 1 << 30}

// VLLMNote is said of a side read from a vLLM result JSON.
const VLLMNote = "is a vLLM result JSON (vllm bench serve --save-result): one run per load, so its goodput has no repeat range; its figures follow vLLM's definitions (TTFT to its first chunk, output tokens from usage), and what it lacks (a percentile its --metric-percentiles did not ask for, SLO figures) shows as —"

// isFile reports whether path names something other than a directory,
// which compare reads as a vLLM result JSON.
func isFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir()
}

// ReadVLLM reads a vLLM result JSON file as results holding only
// aggregates, one per object: vllm bench serve --save-result writes one
// object, --append-result one per line, rehearse export --format vllm one
// per load and line; a JSON array of objects is read too. The file is
// opened as a bundle's files are (a regular file, within VLLMLimit, ctx
// stopping the read).
func ReadVLLM(ctx context.Context, path string) (*bundle.Results, error) {
	d, err := bundle.OpenDir(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	defer d.Close()
	data, err := d.ReadFile(ctx, filepath.Base(path), VLLMLimit)
	if err != nil {
		return nil, err
	}
	objs, err := vllmObjects(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	res := &bundle.Results{Schema: "vllm bench serve result", Provenance: bundle.Provenance{Tool: bundle.Tool{Name: VLLMTool}}}
	seen := map[string]bool{}
	for i, o := range objs {
		ag, err := vllmAggregate(o)
		if err != nil {
			return nil, fmt.Errorf("%s: result %d: %w", path, i+1, err)
		}
		if m, ok := o["model_id"].(string); ok && res.Provenance.Model.ID == "" {
			res.Provenance.Model.ID = m
		}
		if !seen[ag.Server] {
			seen[ag.Server] = true
			res.Servers = append(res.Servers, bundle.Server{Name: ag.Server})
		}
		res.Aggregates = append(res.Aggregates, ag)
	}
	return res, nil
}

// vllmObjects splits data into its result objects.
func vllmObjects(data []byte) ([]map[string]any, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil, fmt.Errorf("empty: not a vLLM result JSON")
	}
	var objs []map[string]any
	if data[0] == '[' {
		if err := json.Unmarshal(data, &objs); err != nil {
			return nil, fmt.Errorf("not a JSON array of vLLM results: %v", err)
		}
	} else {
		dec := json.NewDecoder(bytes.NewReader(data))
		for dec.More() {
			var o map[string]any
			if err := dec.Decode(&o); err != nil {
				return nil, fmt.Errorf("not a vLLM result JSON (one object, or one per line): %v", err)
			}
			objs = append(objs, o)
		}
	}
	if len(objs) == 0 {
		return nil, fmt.Errorf("no result object")
	}
	return objs, nil
}

// vllmAggregate is the comparable figures of one vLLM result: its load
// keyed as rehearse keys loads, throughputs as one-repeat spreads,
// latency percentiles where the file has them (ms to s), failures.
//
// The load: a finite request_rate is the open loop at that rate; "inf"
// with max_concurrency C is a closed-loop wave of C clients when it sent
// no more than C prompts (all released at once, one each) and the
// sustained closed loop at C otherwise; "inf" without max_concurrency is a
// closed wave of num_prompts clients. A result rehearse exported names its
// own server and load (metadata keys server and load), which win.
func vllmAggregate(o map[string]any) (contract.Aggregate, error) {
	r := vllmResult(o)
	completed, ok1 := r.num("completed")
	_, ok2 := r.num("duration")
	if !ok1 || !ok2 {
		return contract.Aggregate{}, fmt.Errorf("no completed or duration: not a vLLM result JSON")
	}
	failed, _ := r.num("failed")
	prompts, okPrompts := r.num("num_prompts")
	if !okPrompts {
		prompts = completed + failed
	}
	ag := contract.Aggregate{Server: "vllm", Mode: contract.ModeClosed, Repeats: 1,
		Failures: contract.Failures{Count: int(failed), Total: int(completed + failed), ByKind: map[string]int{}},
		Warnings: []string{"from a vLLM result JSON: figures follow vLLM's definitions"}}
	if ag.Failures.Total > 0 {
		ag.Failures.Rate = failed / float64(ag.Failures.Total)
	}
	if l, ok := o["label"].(string); ok && l != "" {
		ag.Server = l
	} else if b, ok := o["backend"].(string); ok && b != "" {
		ag.Server = b
	}
	mode, clients, rate, err := r.load(prompts)
	if err != nil {
		return contract.Aggregate{}, err
	}
	ag.Mode, ag.Concurrency, ag.RequestRateRPS = mode, clients, rate
	if s, ok := o["server"].(string); ok && s != "" {
		ag.Server = s
	}
	if l, ok := o["load"].(string); ok {
		applyLoadLabel(&ag, l)
	}
	ag.Goodput = r.spread("output_throughput")
	ag.RequestThroughput = r.spread("request_throughput")
	if v, ok := r.num("total_output_tokens"); ok {
		ag.OutputTokens = int(v)
	}
	ag.TTFT, ag.TPOT, ag.ITL, ag.E2E = r.percentiles("ttft", completed), r.percentiles("tpot", completed), r.percentiles("itl", completed), r.percentiles("e2el", completed)
	ag.InputLength, ag.OutputLength = r.meanLength("total_input_tokens", completed), r.meanLength("total_output_tokens", completed)
	return ag, nil
}

// vllmResult is one vLLM result object as decoded from its JSON.
type vllmResult map[string]any

// num is the finite number at key k; false when there is none.
func (r vllmResult) num(k string) (float64, bool) {
	v, ok := r[k].(float64)
	return v, ok && !math.IsNaN(v) && !math.IsInf(v, 0)
}

// load is the result's load as vllmAggregate keys it: the mode and its
// clients, or the open loop's rate; prompts is how many the run sent.
func (r vllmResult) load(prompts float64) (mode string, clients int, rateRPS float64, err error) {
	mc, hasMC := r.num("max_concurrency")
	hasMC = hasMC && mc >= 1
	rate, isNum := r["request_rate"].(float64)
	text, isText := r["request_rate"].(string)
	if isText {
		f, perr := strconv.ParseFloat(text, 64)
		switch {
		case perr == nil && math.IsInf(f, 1):
		case perr == nil:
			rate, isNum, isText = f, true, false
		default:
			isText = false
		}
	}
	switch {
	case isNum:
		if !(rate > 0) || math.IsInf(rate, 0) {
			return "", 0, 0, fmt.Errorf("request_rate %v: not a positive rate", r["request_rate"])
		}
		return contract.ModeOpen, 0, rate, nil
	case isText:
		switch {
		case hasMC && prompts > mc:
			return contract.ModeSustained, int(mc), 0, nil
		case hasMC:
			return contract.ModeClosed, int(mc), 0, nil
		default:
			return contract.ModeClosed, int(prompts), 0, nil
		}
	}
	return "", 0, 0, fmt.Errorf("request_rate %v: neither a number nor \"inf\"", r["request_rate"])
}

// spread is the number at key k as a one-repeat spread (empty without it).
func (r vllmResult) spread(k string) contract.Spread {
	if v, ok := r.num(k); ok {
		return contract.SpreadOf([]float64{v})
	}
	return contract.SpreadOf(nil)
}

// seconds is the milliseconds at key k in seconds; nil without them.
func (r vllmResult) seconds(k string) *float64 {
	if v, ok := r.num(k); ok {
		s := v / 1000
		return &s
	}
	return nil
}

// percentiles are the percentiles of metric m (ttft, tpot, itl, e2el) the
// result has, over its completed requests.
func (r vllmResult) percentiles(m string, completed float64) contract.Percentiles {
	p := contract.Percentiles{P50: r.seconds("median_" + m + "_ms"), P90: r.seconds("p90_" + m + "_ms"), P95: r.seconds("p95_" + m + "_ms"), P99: r.seconds("p99_" + m + "_ms")}
	if p.P50 == nil {
		p.P50 = r.seconds("p50_" + m + "_ms")
	}
	if p.P50 != nil || p.P90 != nil || p.P95 != nil || p.P99 != nil {
		p.N = int(completed)
	}
	return p
}

// meanLength is the mean length per completed request of the token total
// at key k; empty without it or without a completed request.
func (r vllmResult) meanLength(k string, completed float64) contract.Lengths {
	if completed <= 0 {
		return contract.Lengths{}
	}
	v, ok := r.num(k)
	if !ok {
		return contract.Lengths{}
	}
	m := v / completed
	return contract.Lengths{N: int(completed), Mean: &m}
}

// applyLoadLabel sets the load of ag from a load label as rehearse writes
// it ("8 clients", "8 clients, sustained", "2.5 req/s"); another label
// leaves ag as it is.
func applyLoadLabel(ag *contract.Aggregate, label string) {
	if r, ok := strings.CutSuffix(label, " req/s"); ok {
		if f, err := strconv.ParseFloat(r, 64); err == nil {
			ag.Mode, ag.RequestRateRPS, ag.Concurrency = contract.ModeOpen, f, 0
		}
		return
	}
	mode := contract.ModeClosed
	if s, ok := strings.CutSuffix(label, ", sustained"); ok {
		label, mode = s, contract.ModeSustained
	}
	n, _, _ := strings.Cut(label, " client")
	if c, err := strconv.Atoi(n); err == nil {
		ag.Mode, ag.Concurrency, ag.RequestRateRPS = mode, c, 0
	}
}

// alignServers gives the vLLM side v the other side's server names: a
// vLLM result names no server (its label or backend stands in), so each
// of its loads whose server the other side lacks is held against every
// server of the other side.
func alignServers(v, other *bundle.Results) {
	names := other.ServerNames()
	known := map[string]bool{}
	for _, n := range names {
		known[n] = true
	}
	var aggs []contract.Aggregate
	for _, ag := range v.Aggregates {
		if known[ag.Server] || len(names) == 0 {
			aggs = append(aggs, ag)
			continue
		}
		for _, n := range names {
			c := ag
			c.Server = n
			aggs = append(aggs, c)
		}
	}
	v.Aggregates = aggs
	v.Servers = nil
	for _, n := range names {
		v.Servers = append(v.Servers, bundle.Server{Name: n})
	}
}
