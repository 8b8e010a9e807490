package export

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/endpoint"
	"github.com/rehearse/rehearse/internal/vllmcli"
)

// The vllm format follows the result dict of vLLM's
// vllm/benchmarks/serve.py (read at commit
// 009e6d4a1cd6ba3fb2a9fc00f4ec06f5297232a1): the keys main_async sets
// (date … max_concurrency), the ones benchmark() returns for a generative
// model, and the mean/median/std/p{P} keys of process_one_metric, in that
// order. Without --save-detailed vLLM drops input_lens, output_lens,
// start_times, ttfts, itls, generated_texts and errors, and keeps
// latencies and queue_times.

// VLLMResult is one load as vLLM's --save-result writes a run.
type VLLMResult struct {
	// Server and Load name the population (Load as every output names it).
	Server, Load string
	// FileName is the name vLLM gives the file by default:
	// {backend}-{request_rate}qps[-concurrency{C}]-{model}-{date}.json.
	FileName string
	// Object is the JSON object, keys in vLLM's order.
	Object VLLMObject
}

// VLLMDefinitions says which definition each figure follows, where
// vLLM's and rehearse's differ; written into every object as the
// metadata key "notes".
var VLLMDefinitions = []string{
	"date: the end of the load's last recorded wave, UTC (vLLM: local time when its run ended)",
	"backend and endpoint_type: openai-chat for a chat-completions endpoint, openai for completions",
	"label: null, as vLLM writes it without --label; server and load are metadata keys (as --metadata KEY=VALUE writes them)",
	"tokenizer_id: the tokenizer that counted output_tokens, as provenance names it",
	"num_prompts: the requests attempted at the load, over every repeat",
	"request_rate: the open-loop rate, or \"inf\" for a closed or sustained closed loop (vLLM's --request-rate inf); max_concurrency: the clients of a closed or sustained loop, the open loop's cap (null without one)",
	"burstiness: the gamma shape of gamma arrivals, 1.0 for Poisson and for closed loops (where vLLM ignores it), null for fixed arrivals (no gamma shape)",
	"duration: the repeats' goodput windows summed (wall time from release for closed and open waves, first send to last end for sustained), so every throughput is pooled over the repeats (rehearse's own goodput is the median of the repeats')",
	"completed, failed: successful and failed requests, rehearse's failure classes (timeouts, truncated streams and server errors are failures)",
	"total_input_tokens and input_lens: the server's usage.prompt_tokens where it sent one (chat template included), else input_tokens as the client counted the prompt, as vLLM's prompt_len",
	"total_output_tokens and output_lens: output_tokens, the text re-tokenized with the pinned tokenizer or the server's usage, as provenance.output_tokens_source says; vLLM: usage.completion_tokens",
	"ttft: first_content_s − start_s, to the first chunk with non-empty content (vLLM: to the first chunk with choices, often a role-only chunk; on a reasoning model the two differ by the thinking phase)",
	"itl: gaps between consecutive content chunks (vLLM: between chunks with choices, empty ones too); e2el and latencies: end_s − start_s, to the end of the stream (vLLM: to its last chunk with choices); tpot: (end_s − first_content_s) ÷ (output_tokens − 1) over requests of more than one token, vLLM's formula on these times",
	"std: the population standard deviation (NumPy's np.std); p{P}: linear interpolation (NumPy's default, rehearse's type 7); an empty population gives 0, as vLLM's",
	"request_goodput: requests meeting every objective of the bundle's SLO (ttft, tpot, itl, e2el, as rehearse judges them) per second; null without an SLO, as vLLM writes it without --goodput",
	"max_output_tokens_per_s: content chunks per one-second bucket from the first send, largest over the repeats (vLLM counts its chunks the same way); max_concurrent_requests: the largest number of successful requests in flight at once, over the repeats",
	"latencies, start_times, queue_times: e2el, start_s (seconds from the wave's release, not a perf_counter reading) and start_s − intended_start_s of every attempt, 0 for a failure's latency as vLLM leaves it",
	"rtfx: 0 (no audio)",
}

// VLLMResults renders every load of r as vLLM's --save-result object. A
// bundle of rehearse bench serve (Workload.VLLM with Serve) gives exactly
// the keys vLLM's file has, valued as its command line gave them; another
// bundle's loads are described from its waves, with the server, load and
// notes keys beside vLLM's.
func VLLMResults(r *bundle.Results, o Options) []VLLMResult {
	run := r.Workload.VLLM
	metrics, pcts := vllmChoice(o, run)
	var out []VLLMResult
	for _, l := range loads(r) {
		h := vllmSetup(r, l, run)
		obj := h.obj
		for _, f := range vllmBenchmark(r, l, o) {
			obj = obj.set(f.k, f.v)
		}
		for _, f := range vllmProbes(l.agg.SideProbes) {
			obj = obj.set(f.k, f.v)
		}
		if h.ramp != nil {
			obj = obj.set("rps_change_events", rpsChangeEvents(l, h.ramp))
		}
		for _, f := range vllmPercentiles(l, metrics, pcts, h.tokenizer) {
			obj = obj.set(f.k, f.v)
		}
		name := VLLMFileName(h.prefix, h.rate, h.maxConcurrency, h.model, h.date)
		if h.ramp != nil {
			name = VLLMRampFileName(h.prefix, *h.ramp, h.maxConcurrency, h.model, h.date)
		}
		out = append(out, VLLMResult{Server: l.key.Server, Load: l.key.LoadLabel(), Object: obj, FileName: name})
	}
	return out
}

// vllmChoice is the metrics and percentiles of the percentile keys: the
// options', else the run's (--percentile-metrics, --metric-percentiles),
// else the defaults.
func vllmChoice(o Options, run *vllmcli.Run) ([]string, []float64) {
	metrics, pcts := o.Metrics, o.Percentiles
	if metrics == nil && run != nil && run.PercentileMetrics != nil {
		metrics = run.PercentileMetrics
	}
	if metrics == nil {
		metrics = DefaultVLLMMetrics
	}
	if pcts == nil && run != nil && run.MetricPercentiles != nil {
		pcts = run.MetricPercentiles
	}
	if pcts == nil {
		pcts = []float64{99}
	}
	return metrics, pcts
}

// VLLM is the vllm format: every load's object, one per line (as vLLM's
// --append-result writes several into one file), as Python's json.dump
// writes it.
func VLLM(r *bundle.Results, o Options) (Output, error) {
	res := VLLMResults(r, o)
	var b bytes.Buffer
	for _, v := range res {
		b.Write(v.Object.PyJSON())
		b.WriteByte('\n')
	}
	notes := []string{fmt.Sprintf("vllm: %d object(s), one per load and line", len(res))}
	if r.Workload.VLLM == nil || !r.Workload.VLLM.Serve {
		notes[0] += " (server and load are metadata keys); where vLLM's definitions differ from rehearse's, its \"notes\" key says which each figure follows"
	}
	return Output{Data: b.Bytes(), Notes: notes}, nil
}

// VLLMFileName is vLLM's default result file name (compute_result_filename):
// {label or backend}-{request_rate}qps[-concurrency{C}]-{model's last path
// part}-{date}.json, the rate as Python prints a float ("inf" for inf).
func VLLMFileName(prefix string, rate any, maxConcurrency *int, model, date string) string {
	rateText := "inf"
	if f, ok := rate.(float64); ok {
		rateText = pyFloat(f)
	}
	return prefix + "-" + rateText + "qps" + concurrencySuffix(maxConcurrency) + "-" + modelBase(model) + "-" + date + ".json"
}

// VLLMRampFileName is vLLM's file name of a ramp-up run:
// {label or backend}-ramp-up-{strategy}-{start}qps-{end}qps[-concurrency{C}]-{model}-{date}.json.
func VLLMRampFileName(prefix string, ramp vllmcli.RampUp, maxConcurrency *int, model, date string) string {
	return fmt.Sprintf("%s-ramp-up-%s-%dqps-%dqps%s-%s-%s.json", prefix, ramp.Strategy, ramp.StartRPS, ramp.EndRPS,
		concurrencySuffix(maxConcurrency), modelBase(model), date)
}

func concurrencySuffix(mc *int) string {
	if mc == nil {
		return ""
	}
	return "-concurrency" + strconv.Itoa(*mc)
}

func modelBase(model string) string { return model[strings.LastIndex(model, "/")+1:] }

// pyFloat formats f as Python's str(float) does for ordinary values: 4.0,
// 2.5, 0.1.
func pyFloat(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e16 {
		return strconv.FormatFloat(f, 'f', 1, 64)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// vllmBackend is vLLM's --backend of an endpoint path: openai (completions)
// or openai-chat.
func vllmBackend(ep string) string {
	if endpoint.IsCompletions(ep) {
		return "openai"
	}
	return "openai-chat"
}

// vllmRate is the load's request_rate as vLLM writes it: the rate, or
// "inf".
func vllmRate(l load) any {
	if l.key.Mode == contract.ModeOpen && l.key.RequestRateRPS > 0 {
		return l.key.RequestRateRPS
	}
	return "inf"
}

// vllmMaxConcurrency is the load's max_concurrency: the clients of a
// closed or sustained loop, the open loop's cap, or nil.
func vllmMaxConcurrency(l load) *int {
	if l.key.Mode != contract.ModeOpen {
		c := l.key.Concurrency
		return &c
	}
	for _, w := range l.waves {
		if w.MaxConcurrency > 0 {
			c := w.MaxConcurrency
			return &c
		}
	}
	return nil
}

func vllmBurstiness(l load) any {
	if l.key.Mode != contract.ModeOpen || len(l.waves) == 0 {
		return 1.0
	}
	w := l.waves[0]
	switch {
	case w.Arrival == "fixed":
		return nil
	case w.Burstiness > 0:
		return w.Burstiness
	}
	return 1.0
}

// vllmEnd is the end of the load's last wave, in vLLM's date format.
func vllmEnd(l load) string {
	var end time.Time
	for _, w := range l.waves {
		t, err := time.Parse(time.RFC3339Nano, w.StartedAt)
		if err != nil {
			continue
		}
		if e := t.Add(time.Duration(w.WallS * float64(time.Second))); e.After(end) {
			end = e
		}
	}
	return end.UTC().Format("20060102-150405")
}

// vllmHead is the setup part of one load's object (main_async's keys
// before the benchmark's) and what names its file.
type vllmHead struct {
	obj                 object
	prefix, model, date string
	rate                any
	maxConcurrency      *int
	ramp                *vllmcli.RampUp
	tokenizer           bool // ttft, tpot and itl are written (vLLM: a tokenizer was loaded)
}

// vllmSetup is the keys main_async writes before the benchmark's: from the
// run as given where the bundle came from bench serve, else from the load.
func vllmSetup(r *bundle.Results, l load, run *vllmcli.Run) vllmHead {
	h := vllmHead{date: vllmEnd(l), model: vllmModel(r), rate: vllmRate(l), maxConcurrency: vllmMaxConcurrency(l), tokenizer: true}
	backend, label := vllmBackend(r.Workload.Endpoint), any(nil)
	var tokenizer any = r.Provenance.Tokenizer.Name
	if r.Provenance.Tokenizer.Name == "" {
		tokenizer = h.model
	}
	numPrompts, burstiness := any(len(l.records)), vllmBurstiness(l)
	if run != nil {
		if run.Backend != "" {
			backend = run.Backend
		}
		if run.ModelID != "" {
			h.model = run.ModelID
		}
		if run.Label != nil {
			label = *run.Label
		}
		tokenizer, h.tokenizer = nil, run.TokenizerID != nil
		if run.TokenizerID != nil {
			tokenizer = *run.TokenizerID
		}
	}
	serve := run != nil && run.Serve
	if serve {
		numPrompts, burstiness, h.rate, h.maxConcurrency, h.ramp = run.NumPrompts, pyInf(run.Burstiness), "inf", run.MaxConcurrency, run.RampUp
		if run.RequestRateRPS != nil {
			h.rate = *run.RequestRateRPS
		}
	}
	h.prefix = backend
	switch {
	case label != nil:
		h.prefix = label.(string)
	case len(r.Servers) > 1:
		// vLLM's name has no server: several servers' loads would share
		// names, so each server's name stands where a label would.
		h.prefix = l.key.Server
	}
	obj := object{{"date", h.date}, {"endpoint_type", backend}, {"backend", backend}, {"label", label},
		{"model_id", h.model}, {"tokenizer_id", tokenizer}, {"num_prompts", numPrompts}}
	if !serve {
		obj = append(obj, field{"server", l.key.Server}, field{"load", l.key.LoadLabel()}, field{"notes", strings.Join(VLLMDefinitions, "; ")})
	}
	if run != nil {
		for _, kv := range run.Metadata {
			obj = obj.set(kv.Key, kv.Value)
		}
	}
	var mc any
	if h.maxConcurrency != nil {
		mc = *h.maxConcurrency
	}
	obj = obj.set("request_rate", h.rate).set("burstiness", burstiness).set("max_concurrency", mc)
	if h.ramp != nil {
		obj = obj.set("ramp_up_strategy", h.ramp.Strategy).set("ramp_up_start_rps", h.ramp.StartRPS).set("ramp_up_end_rps", h.ramp.EndRPS)
	}
	h.obj = obj
	return h
}

// pyInf is a burstiness as vLLM writes it: the number, or Infinity for
// nil (--burstiness inf).
func pyInf(b *float64) float64 {
	if b == nil {
		return math.Inf(1)
	}
	return *b
}

// vllmModel is the model the bundle asked for.
func vllmModel(r *bundle.Results) string {
	if r.Provenance.Model.ID != "" {
		return r.Provenance.Model.ID
	}
	for _, s := range r.Servers {
		if s.Model != "" {
			return s.Model
		}
	}
	return ""
}

// vllmPop is a load's records as calculate_metrics reads them.
type vllmPop struct {
	completed, failed, inTok, outTok, good int
	ttfts, tpots, itls, e2els              []float64
	inputLens, outputLens                  []int
	ttftsAll, latencies, starts, queues    []float64
	itlsAll                                [][]float64
	texts, errs                            []string
}

func (p *vllmPop) add(rec contract.Record, slo *contract.SLO) {
	// vLLM's prompt_len: the server's usage.prompt_tokens where it sent
	// one (its request functions overwrite the dataset's with it), else
	// the prompt's own count.
	in := 0
	switch {
	case rec.UsagePromptTokens != nil:
		in = *rec.UsagePromptTokens
	case rec.InputTokens != nil:
		in = *rec.InputTokens
	}
	p.inputLens, p.starts = append(p.inputLens, in), append(p.starts, rec.StartS)
	p.queues, p.texts = append(p.queues, rec.StartS-rec.IntendedStartS), append(p.texts, rec.Text)
	gaps := []float64{}
	if !rec.OK {
		p.failed++
		e := rec.Error
		if e == "" {
			e = rec.ErrorKind
		}
		p.outputLens, p.ttftsAll, p.latencies = append(p.outputLens, 0), append(p.ttftsAll, 0), append(p.latencies, 0)
		p.itlsAll, p.errs = append(p.itlsAll, gaps), append(p.errs, e)
		return
	}
	p.completed++
	p.inTok += in
	p.outTok += rec.OutputTokens
	p.outputLens = append(p.outputLens, rec.OutputTokens)
	t, ok := rec.TTFT()
	if ok {
		p.ttfts = append(p.ttfts, t)
	}
	p.ttftsAll = append(p.ttftsAll, t)
	if v, ok := rec.TPOT(); ok {
		p.tpots = append(p.tpots, v)
	}
	for i := 1; i < len(rec.ChunkTimesS); i++ {
		gaps = append(gaps, rec.ChunkTimesS[i]-rec.ChunkTimesS[i-1])
	}
	p.itls, p.itlsAll = append(p.itls, gaps...), append(p.itlsAll, gaps)
	e2e := rec.EndS - rec.StartS
	p.e2els, p.latencies, p.errs = append(p.e2els, e2e), append(p.latencies, e2e), append(p.errs, "")
	if slo != nil && contract.Judge(rec, slo.Objectives).Good {
		p.good++
	}
}

// vllmBenchmark is the keys benchmark() returns, in its order, without
// the --save-detailed arrays unless asked.
func vllmBenchmark(r *bundle.Results, l load, o Options) object {
	dur := l.durationS()
	per := func(n float64) float64 {
		if dur <= 0 {
			return 0
		}
		return n / dur
	}
	var p vllmPop
	for _, rec := range l.records {
		p.add(rec, r.SLO)
	}
	var goodput any
	if r.SLO != nil {
		goodput = per(float64(p.good))
	}
	obj := object{
		{"duration", dur}, {"completed", p.completed}, {"failed", p.failed},
		{"total_input_tokens", p.inTok}, {"total_output_tokens", p.outTok},
		{"request_throughput", per(float64(p.completed))}, {"request_goodput", goodput},
		{"output_throughput", per(float64(p.outTok))}, {"total_token_throughput", per(float64(p.inTok + p.outTok))},
	}
	if o.Detailed {
		obj = append(obj, field{"input_lens", p.inputLens}, field{"output_lens", p.outputLens},
			field{"ttfts", p.ttftsAll}, field{"itls", p.itlsAll})
	}
	obj = append(obj, field{"latencies", p.latencies})
	if o.Detailed {
		obj = append(obj, field{"start_times", p.starts})
	}
	obj = append(obj, field{"queue_times", p.queues})
	if o.Detailed {
		obj = append(obj, field{"generated_texts", p.texts}, field{"errors", p.errs})
	}
	peakTok, peakConc := vllmPeaks(l)
	return append(obj, field{"max_output_tokens_per_s", peakTok}, field{"max_concurrent_requests", peakConc}, field{"rtfx", 0.0})
}

// vllmProbes are the probe keys benchmark() adds with
// --probe-request-rate, from the side probes beside the load's waves:
// their successful and failed counts and the median, p99 (type 7, NumPy's
// default) and largest E2E of the successful ones, in ms; none where no
// probe succeeded, as vLLM writes none.
func vllmProbes(sp *contract.SideProbeFigures) object {
	if sp == nil || sp.E2E.N == 0 {
		return nil
	}
	ms := func(v *float64) float64 { return *v * 1000 }
	return object{
		{"probe_completed", sp.E2E.N}, {"probe_failed", sp.Requests - sp.E2E.N},
		{"probe_median_e2el_ms", ms(sp.E2E.P50)}, {"probe_p99_e2el_ms", ms(sp.E2E.P99)}, {"probe_max_e2el_ms", ms(sp.MaxE2ES)},
	}
}

// vllmPercentiles is process_one_metric's keys of each metric chosen, in
// vLLM's order: ttft, tpot and itl only where a tokenizer counted (vLLM
// skips them without one), e2el always when chosen.
func vllmPercentiles(l load, metrics []string, pcts []float64, tokenizer bool) object {
	var p vllmPop
	for _, rec := range l.records {
		p.add(rec, nil)
	}
	pops := map[string][]float64{"ttft": p.ttfts, "tpot": p.tpots, "itl": p.itls, "e2el": p.e2els}
	var obj object
	for _, m := range VLLMMetrics {
		if !slices.Contains(metrics, m) || (!tokenizer && m != "e2el") {
			continue
		}
		xs := pops[m]
		obj = append(obj,
			field{"mean_" + m + "_ms", finite(mean(xs) * 1000)},
			field{"median_" + m + "_ms", pct(xs, 50) * 1000},
			field{"std_" + m + "_ms", finite(std(xs) * 1000)})
		for _, q := range pcts {
			obj = append(obj, field{"p" + pyPercent(q) + "_" + m + "_ms", pct(xs, q) * 1000})
		}
	}
	return obj
}

// pyPercent names a percentile as vLLM does: str(int(p)) when whole, else
// str(p).
func pyPercent(p float64) string {
	if p == math.Trunc(p) {
		return strconv.Itoa(int(p))
	}
	return strconv.FormatFloat(p, 'g', -1, 64)
}

// vllmPeaks are vLLM's max_output_tokens_per_s and max_concurrent_requests
// of the load, each the largest over its waves: chunk arrivals of the
// successful requests per one-second bucket from their first send, and
// the sweep-line peak of successful requests in flight over [start, end).
func vllmPeaks(l load) (float64, int) {
	peakTok, peakConc := 0.0, 0
	for _, w := range l.waves {
		var oks []contract.Record
		for _, rec := range l.byWave[w.ID] {
			if rec.OK {
				oks = append(oks, rec)
			}
		}
		if len(oks) == 0 {
			continue
		}
		lo, hi := oks[0].StartS, oks[0].EndS
		for _, rec := range oks {
			lo, hi = min(lo, rec.StartS), max(hi, rec.EndS)
		}
		buckets := make([]float64, int(math.Ceil(hi-lo))+1)
		type event struct {
			t float64
			d int
		}
		var events []event
		for _, rec := range oks {
			for _, t := range rec.ChunkTimesS {
				if b := int(t - lo); b >= 0 && b < len(buckets) {
					buckets[b]++
				}
			}
			events = append(events, event{rec.StartS, 1}, event{rec.EndS, -1})
		}
		for _, b := range buckets {
			peakTok = max(peakTok, b)
		}
		slices.SortStableFunc(events, func(a, b event) int {
			switch {
			case a.t < b.t:
				return -1
			case a.t > b.t:
				return 1
			}
			return a.d - b.d // an end before a start at the same instant
		})
		cur := 0
		for _, e := range events {
			cur += e.d
			peakConc = max(peakConc, cur)
		}
	}
	return peakTok, peakConc
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// std is the population standard deviation (NumPy's np.std), 0 when empty.
func std(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	m := mean(xs)
	s := 0.0
	for _, x := range xs {
		s += (x - m) * (x - m)
	}
	return math.Sqrt(s / float64(len(xs)))
}

// pct is the p-th percentile (0–100) by the contract's type 7, 0 when
// empty (NumPy's np.percentile of vLLM's `xs or 0`).
func pct(xs []float64, p float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	v := contract.Percentile(s, p/100)
	if v == nil {
		return 0
	}
	return *v
}

// rpsChangeEvents are vLLM's rps_change_events of a ramp-up load: the
// start rate at the release, then each whole rate the ramp reaches, at
// the send of the first request drawn at it (request i is drawn at the
// ramp's rate at i/(N − 1), as workload.PacingVLLM draws it). Times are
// ISO 8601 without a zone, in UTC (vLLM: local time).
func rpsChangeEvents(l load, ramp *vllmcli.RampUp) []object {
	var out []object
	for _, w := range l.waves {
		release, err := time.Parse(time.RFC3339Nano, w.StartedAt)
		if err != nil {
			continue
		}
		recs := slices.Clone(l.byWave[w.ID])
		slices.SortFunc(recs, func(a, b contract.Record) int { return a.Client - b.Client })
		last := ramp.StartRPS
		out = append(out, object{{"rps", last}, {"timestamp", isoTime(release)}})
		n := len(recs)
		for i, rec := range recs {
			p := float64(i) / float64(max(n-1, 1))
			rate := float64(ramp.StartRPS) + float64(ramp.EndRPS-ramp.StartRPS)*p
			if ramp.Strategy == contract.RampExponential {
				rate = float64(ramp.StartRPS) * math.Pow(float64(ramp.EndRPS)/float64(ramp.StartRPS), p)
			}
			at := release.Add(time.Duration(rec.IntendedStartS * float64(time.Second)))
			for rps := last + 1; rps <= int(rate); rps++ {
				out = append(out, object{{"rps", rps}, {"timestamp", isoTime(at)}})
				last = rps
			}
		}
	}
	return out
}

// isoTime is Python's datetime.isoformat of a naive time, in UTC.
func isoTime(t time.Time) string {
	t = t.UTC()
	if t.Nanosecond()/1000 == 0 {
		return t.Format("2006-01-02T15:04:05")
	}
	return t.Format("2006-01-02T15:04:05.000000")
}
