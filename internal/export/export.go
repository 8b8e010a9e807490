// Package export writes a bundle's results.json out as what other tools
// read (SPEC §9): vLLM's `vllm bench serve --save-result` JSON (one object
// per load), the llm-d benchmark report v0.2, and one row per request as
// JSON Lines or CSV. Each format is a pure function of the results: the
// same results always give the same bytes.
package export

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
)

// Options tune a format; the zero value is every format's default.
type Options struct {
	// Detailed adds vLLM's per-request arrays (its --save-detailed):
	// input_lens, output_lens, ttfts, itls, start_times, generated_texts
	// and errors.
	Detailed bool
	// Percentiles are the vLLM percentiles written for each metric (its
	// --metric-percentiles), in percent; nil is vLLM's default, 99.
	Percentiles []float64
	// Metrics are the vLLM metrics given mean, median, std and
	// percentiles (its --percentile-metrics: ttft, tpot, itl, e2el); nil
	// is DefaultVLLMMetrics.
	Metrics []string
}

// DefaultVLLMMetrics are the metrics of the vllm format by default: vLLM's
// own default for generative models (ttft, tpot, itl) and e2el, as
// `--percentile-metrics ttft,tpot,itl,e2el` writes them.
var DefaultVLLMMetrics = []string{"ttft", "tpot", "itl", "e2el"}

// VLLMMetrics are the metric names the vllm format accepts.
var VLLMMetrics = []string{"ttft", "tpot", "itl", "e2el"}

// Output is one format's rendering of a bundle: the bytes and notes on
// what the figures follow or what was left out, for the user to read.
type Output struct {
	Data  []byte
	Notes []string
}

// Format is one registered export.
type Format struct {
	Name    string
	Summary string
	// Ext is the usual file extension, without the dot.
	Ext    string
	Export func(*bundle.Results, Options) (Output, error)
}

// formats is the registry: a format is a file here and a line in it.
var formats = map[string]Format{
	"vllm":    {Name: "vllm", Ext: "json", Summary: "vLLM's `vllm bench serve --save-result` JSON, one object per load and line (as vLLM's --append-result writes several)", Export: VLLM},
	"llmd-br": {Name: "llmd-br", Ext: "json", Summary: "the llm-d benchmark report v0.2, one report per load and line", Export: LLMD},
	"jsonl":   {Name: "jsonl", Ext: "jsonl", Summary: "one JSON object per request record, every record field", Export: JSONL},
	"csv":     {Name: "csv", Ext: "csv", Summary: "one CSV row per request record, every record field as a column (arrays as JSON)", Export: CSV},
}

// Names lists the registered formats, sorted.
func Names() []string {
	names := make([]string, 0, len(formats))
	for n := range formats {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Lookup returns the format named name.
func Lookup(name string) (Format, bool) {
	f, ok := formats[name]
	return f, ok
}

// Export renders r in the format named name.
func Export(name string, r *bundle.Results, o Options) (Output, error) {
	f, ok := formats[name]
	if !ok {
		return Output{}, fmt.Errorf("unknown format %q (formats: %s)", name, strings.Join(Names(), ", "))
	}
	if err := o.Validate(); err != nil {
		return Output{}, err
	}
	return f.Export(r, o)
}

// Validate checks the options before any work.
func (o Options) Validate() error {
	for _, p := range o.Percentiles {
		if math.IsNaN(p) || p < 0 || p > 100 {
			return fmt.Errorf("percentile %v is outside 0–100", p)
		}
	}
	for _, m := range o.Metrics {
		if !slices.Contains(VLLMMetrics, m) {
			return fmt.Errorf("metric %q is not one of %s", m, strings.Join(VLLMMetrics, ", "))
		}
	}
	return nil
}

// load is one aggregate's population: its recorded waves in repeat order
// and their records.
type load struct {
	key    contract.Key
	waves  []contract.Wave
	byWave map[int][]contract.Record
	// records are every record of the load, in results.json's order.
	records []contract.Record
	// agg is the load's aggregate, recomputed from the records.
	agg contract.Aggregate
}

// loads returns the populations of r's aggregates, in the aggregates'
// order (recomputed from the waves, so the export rests on the records).
func loads(r *bundle.Results) []load {
	var out []load
	for _, ag := range r.ComputeAggregates() {
		l := load{key: ag.Key(), byWave: map[int][]contract.Record{}, agg: ag}
		for _, w := range r.Waves {
			if w.Kind == contract.KindRecorded && contract.KeyOf(w) == l.key {
				l.waves = append(l.waves, w)
			}
		}
		sort.SliceStable(l.waves, func(i, j int) bool { return l.waves[i].Repeat < l.waves[j].Repeat })
		contract.EachPooled(r.Waves, r.Records, l.key, func(rec contract.Record) {
			l.records = append(l.records, rec)
			l.byWave[rec.Wave] = append(l.byWave[rec.Wave], rec)
		})
		out = append(out, l)
	}
	return out
}

// durationS is the load's time: the goodput windows of its waves summed,
// the time its figures are per.
func (l load) durationS() float64 {
	d := 0.0
	for _, w := range l.waves {
		d += contract.GoodputWindowS(l.key.Mode, l.byWave[w.ID])
	}
	return d
}

// field is one key of an ordered JSON object.
type field struct {
	k string
	v any
}

// object is a JSON object whose keys keep their order, as Python's
// json.dump keeps a dict's.
type object []field

func (o object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(f.k)
		b.Write(k)
		b.WriteByte(':')
		v, err := json.Marshal(f.v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.k, err)
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// lines encodes values as JSON Lines: one compact JSON value per line, as
// vLLM's --save-result writes one result (and --append-result several).
func lines[T any](vs []T) ([]byte, error) {
	var b bytes.Buffer
	for _, v := range vs {
		data, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		b.Write(data)
		b.WriteByte('\n')
	}
	return b.Bytes(), nil
}

// finite replaces a non-finite figure (which JSON cannot hold) by 0.
func finite(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return v
}
