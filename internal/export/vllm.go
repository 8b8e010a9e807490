package export

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/endpoint"
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
	Object json.Marshaler
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

// VLLMResults renders every load of r as vLLM's --save-result object.
func VLLMResults(r *bundle.Results, o Options) []VLLMResult {
	metrics := o.Metrics
	if metrics == nil {
		metrics = DefaultVLLMMetrics
	}
	pcts := o.Percentiles
	if pcts == nil {
		pcts = []float64{99}
	}
	backend := vllmBackend(r.Workload.Endpoint)
	model := r.Provenance.Model.ID
	if model == "" {
		for _, s := range r.Servers {
			if s.Model != "" {
				model = s.Model
				break
			}
		}
	}
	tokenizer := r.Provenance.Tokenizer.Name
	if tokenizer == "" {
		tokenizer = model
	}
	var out []VLLMResult
	for _, l := range loads(r) {
		obj, date := vllmObject(r, l, o, metrics, pcts, backend, model, tokenizer)
		out = append(out, VLLMResult{
			Server: l.key.Server, Load: l.key.LoadLabel(), Object: obj,
			FileName: VLLMFileName(backend, vllmRate(l), vllmMaxConcurrency(l), model, date),
		})
	}
	return out
}

// VLLM is the vllm format: every load's object, one per line.
func VLLM(r *bundle.Results, o Options) (Output, error) {
	res := VLLMResults(r, o)
	objs := make([]json.Marshaler, len(res))
	for i, v := range res {
		objs[i] = v.Object
	}
	data, err := lines(objs)
	if err != nil {
		return Output{}, err
	}
	notes := []string{fmt.Sprintf("vllm: %d object(s), one per load and line (server and load are metadata keys); where vLLM's definitions differ from rehearse's, its \"notes\" key says which each figure follows", len(res))}
	return Output{Data: data, Notes: notes}, nil
}

// VLLMFileName is vLLM's default result file name (compute_result_filename
// without --label): {backend}-{request_rate}qps[-concurrency{C}]-{model's
// last path part}-{date}.json, the rate as Python prints a float.
func VLLMFileName(backend string, rate any, maxConcurrency *int, model, date string) string {
	rateText := "inf"
	if f, ok := rate.(float64); ok {
		rateText = pyFloat(f)
	}
	mc := ""
	if maxConcurrency != nil {
		mc = "-concurrency" + strconv.Itoa(*maxConcurrency)
	}
	base := model[strings.LastIndex(model, "/")+1:]
	return backend + "-" + rateText + "qps" + mc + "-" + base + "-" + date + ".json"
}

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
	if l.key.Mode == contract.ModeOpen {
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

func vllmObject(r *bundle.Results, l load, o Options, metrics []string, pcts []float64, backend, model, tokenizer string) (object, string) {
	date := vllmEnd(l)
	dur := l.durationS()
	per := func(n float64) float64 {
		if dur <= 0 {
			return 0
		}
		return n / dur
	}
	var (
		completed, failed, inTok, outTok int
		ttfts, tpots, itls, e2els        []float64
		inputLens, outputLens            []int
		ttftsAll, latencies, starts      []float64
		queues                           []float64
		itlsAll                          [][]float64
		texts, errs                      []string
		good                             int
	)
	for _, rec := range l.records {
		// vLLM's prompt_len: the server's usage.prompt_tokens where it
		// sent one, else the prompt's own count.
		in := 0
		switch {
		case rec.UsagePromptTokens != nil:
			in = *rec.UsagePromptTokens
		case rec.InputTokens != nil:
			in = *rec.InputTokens
		}
		inputLens = append(inputLens, in)
		starts = append(starts, rec.StartS)
		queues = append(queues, rec.StartS-rec.IntendedStartS)
		texts = append(texts, rec.Text)
		gaps := []float64{}
		if !rec.OK {
			failed++
			outputLens = append(outputLens, 0)
			ttftsAll = append(ttftsAll, 0)
			latencies = append(latencies, 0)
			itlsAll = append(itlsAll, gaps)
			e := rec.Error
			if e == "" {
				e = rec.ErrorKind
			}
			errs = append(errs, e)
			continue
		}
		completed++
		inTok += in
		outTok += rec.OutputTokens
		outputLens = append(outputLens, rec.OutputTokens)
		t, ok := rec.TTFT()
		if ok {
			ttfts = append(ttfts, t)
		}
		ttftsAll = append(ttftsAll, t)
		if v, ok := rec.TPOT(); ok {
			tpots = append(tpots, v)
		}
		for i := 1; i < len(rec.ChunkTimesS); i++ {
			gaps = append(gaps, rec.ChunkTimesS[i]-rec.ChunkTimesS[i-1])
		}
		itls = append(itls, gaps...)
		itlsAll = append(itlsAll, gaps)
		e2e := rec.EndS - rec.StartS
		e2els = append(e2els, e2e)
		latencies = append(latencies, e2e)
		errs = append(errs, "")
		if r.SLO != nil && contract.Judge(rec, r.SLO.Objectives).Good {
			good++
		}
	}
	var goodput any
	if r.SLO != nil {
		goodput = per(float64(good))
	}
	var maxConc any
	if mc := vllmMaxConcurrency(l); mc != nil {
		maxConc = *mc
	}
	obj := object{
		{"date", date},
		{"endpoint_type", backend},
		{"backend", backend},
		{"label", nil},
		{"model_id", model},
		{"tokenizer_id", tokenizer},
		{"num_prompts", len(l.records)},
		{"server", l.key.Server},
		{"load", l.key.LoadLabel()},
		{"notes", strings.Join(VLLMDefinitions, "; ")},
		{"request_rate", vllmRate(l)},
		{"burstiness", vllmBurstiness(l)},
		{"max_concurrency", maxConc},
		{"duration", dur},
		{"completed", completed},
		{"failed", failed},
		{"total_input_tokens", inTok},
		{"total_output_tokens", outTok},
		{"request_throughput", per(float64(completed))},
		{"request_goodput", goodput},
		{"output_throughput", per(float64(outTok))},
		{"total_token_throughput", per(float64(inTok + outTok))},
	}
	if o.Detailed {
		obj = append(obj, field{"input_lens", inputLens}, field{"output_lens", outputLens},
			field{"ttfts", ttftsAll}, field{"itls", itlsAll})
	}
	obj = append(obj, field{"latencies", latencies})
	if o.Detailed {
		obj = append(obj, field{"start_times", starts})
	}
	obj = append(obj, field{"queue_times", queues})
	if o.Detailed {
		obj = append(obj, field{"generated_texts", texts}, field{"errors", errs})
	}
	peakTok, peakConc := vllmPeaks(l)
	obj = append(obj, field{"max_output_tokens_per_s", peakTok}, field{"max_concurrent_requests", peakConc}, field{"rtfx", 0.0})
	pops := map[string][]float64{"ttft": ttfts, "tpot": tpots, "itl": itls, "e2el": e2els}
	for _, m := range VLLMMetrics {
		if !slices.Contains(metrics, m) {
			continue
		}
		xs := pops[m]
		obj = append(obj,
			field{"mean_" + m + "_ms", finite(mean(xs) * 1000)},
			field{"median_" + m + "_ms", pct(xs, 50) * 1000},
			field{"std_" + m + "_ms", finite(std(xs) * 1000)})
		for _, p := range pcts {
			obj = append(obj, field{"p" + pyPercent(p) + "_" + m + "_ms", pct(xs, p) * 1000})
		}
	}
	return obj, date
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
