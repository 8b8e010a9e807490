package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rehearse/rehearse/internal/benchcmd"
	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/export"
)

// exportOptions is what `rehearse export` was asked to do.
type exportOptions struct {
	dir, format, out  string
	detailed          bool
	appendTo          bool   // --append-result: vllm objects appended to -o FILE
	metricPercentiles string // --metric-percentiles, vLLM's name
	percentileMetrics string // --percentile-metrics, vLLM's name
	// given are the vLLM flags given: without them, a bench serve
	// bundle's own choice stands (its file is the one it saved).
	given map[string]bool
}

func newExportCmd(st *State) *cobra.Command {
	var o exportOptions
	var formats []string
	for _, n := range export.Names() {
		f, _ := export.Lookup(n)
		formats = append(formats, n+": "+f.Summary)
	}
	cmd := &cobra.Command{
		Use:   "export DIR --format " + strings.Join(export.Names(), "|") + " [-o FILE]",
		Short: "Write a bundle out as vLLM's result JSON, an llm-d benchmark report, JSONL or CSV",
		Long: `Write a verified bundle's results.json out as what other tools read, each
a pure function of results.json (the same bundle gives the same bytes):
` + bullets(formats) + `

vllm: the keys vllm bench serve --save-result writes (vLLM's
vllm/benchmarks/serve.py), per load; closed and sustained loops are its
--request-rate inf with --max-concurrency the clients; --save-detailed adds
the per-request arrays, --metric-percentiles and --percentile-metrics (ttft,
tpot, itl, e2el; default all four) choose the p{P} keys as vLLM's do. Where
vLLM's definitions differ from rehearse's, each object's "notes" key says
which one each figure follows:
` + bullets(export.VLLMDefinitions) + `
A rehearse bench serve bundle gives exactly the file its --save-result wrote
(vLLM's keys, valued as its command line gave them). With -o, vLLM's files as
json.dump writes them: -o DIR (made when absent) one file per load under
vLLM's name; -o FILE.json one load, or, with --append-result, each load
appended to FILE, a newline before each where it has content.

llmd-br: the llm-d benchmark report v` + export.LLMDVersion + ` (run, scenario with the stack
and load, results with request performance and observability). Left empty:
` + bullets(export.LLMDLeftEmpty) + `

jsonl and csv: one row per record of every kind, every field of the record
contract in a stable order (` + strconv.Itoa(len(export.Columns())) + ` columns), absent fields null (JSONL) or
empty (CSV), chunk_times_s as a JSON array in its CSV cell.

The bundle must verify (as rehearse verify checks it): one that does not is
refused. Without -o (or with -o -) the export goes to standard output; -o
FILE writes it through a temporary file renamed over FILE, where there is
nothing or a regular file (never inside the bundle, whose SHA256SUMS would
not list it); a device, named pipe, socket, folder or symbolic link at FILE
is refused before anything is written.

Exit status: 0 when written, 1 when the bundle does not verify or FILE
cannot be written, 2 for bad usage (a refused FILE among it) or a bundle
that cannot be read.`,
		Example: `  rehearse export out --format vllm -o results/
  rehearse export out --format csv > requests.csv
  rehearse export out --format llmd-br -o report.json`,
		Args: exactArgs(1, "DIR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.dir = args[0]
			o.given = map[string]bool{}
			cmd.Flags().Visit(func(f *pflag.Flag) { o.given[f.Name] = true })
			return interruption(cmd.Context(), "export "+o.dir, runExport(cmd.Context(), st, o))
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.format, "format", "", "what to write: "+strings.Join(export.Names(), ", ")+" (required)")
	f.StringVarP(&o.out, "output", "o", "", "file to write (default, or -: standard output)")
	f.BoolVar(&o.appendTo, "append-result", false, "vllm with -o FILE.json: append each load's object to FILE (a newline before each where it has content), as vLLM's --append-result does")
	f.BoolVar(&o.detailed, "save-detailed", false, "vllm: add the per-request arrays (input_lens, output_lens, ttfts, itls, start_times, generated_texts, errors)")
	f.StringVar(&o.metricPercentiles, "metric-percentiles", "99", "vllm: comma-separated percentiles of each metric, e.g. 50,90,99 (default: a bench serve bundle's own)")
	f.StringVar(&o.percentileMetrics, "percentile-metrics", strings.Join(export.DefaultVLLMMetrics, ","), "vllm: comma-separated metrics given mean, median, std and percentiles: "+strings.Join(export.VLLMMetrics, ", ")+" (default: a bench serve bundle's own)")
	return cmd
}

// options turns the flags into export options, refusing bad values by name.
func (o exportOptions) options() (export.Options, error) {
	var eo export.Options
	eo.Detailed = o.detailed
	for _, s := range strings.Split(o.metricPercentiles, ",") {
		p, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || p < 0 || p > 100 {
			return eo, usageError("--metric-percentiles: %q is not a percentile between 0 and 100", s)
		}
		eo.Percentiles = append(eo.Percentiles, p)
	}
	eo.Metrics = []string{}
	for _, s := range strings.Split(o.percentileMetrics, ",") {
		if s = strings.TrimSpace(s); s != "" {
			eo.Metrics = append(eo.Metrics, s)
		}
	}
	if err := eo.Validate(); err != nil {
		return eo, usageError("--percentile-metrics: %v", err)
	}
	if !o.given["metric-percentiles"] {
		eo.Percentiles = nil // the bundle's choice, else vLLM's default
	}
	if !o.given["percentile-metrics"] {
		eo.Metrics = nil
	}
	return eo, nil
}

func runExport(ctx context.Context, st *State, o exportOptions) error {
	if o.format == "" {
		return usageError("export: --format is required (%s)", strings.Join(export.Names(), ", "))
	}
	if _, ok := export.Lookup(o.format); !ok {
		return usageError("--format: %q is not a format (%s)", o.format, strings.Join(export.Names(), ", "))
	}
	eo, err := o.options()
	if err != nil {
		return err
	}
	if o.appendTo && (o.format != "vllm" || !vllmFile(o.out)) {
		return usageError("--append-result: only with --format vllm and -o FILE.json")
	}
	if o.format == "vllm" && !toStdout(o.out) {
		return runVLLMExport(ctx, st, o, eo)
	}
	if err := checkOutput("-o", o.out); err != nil {
		return err
	}
	if !toStdout(o.out) && benchcmd.Inside(o.dir, o.out) {
		return usageError("-o %s: inside the bundle %s, where SHA256SUMS would not list it and verify would fail; write it elsewhere", o.out, o.dir)
	}
	res, err := readToExport(ctx, o.dir)
	if err != nil {
		return err
	}
	out, err := export.Export(o.format, res, eo)
	if err != nil {
		return &ExitError{Code: 2, Err: fmt.Errorf("%s: %w", o.dir, err)}
	}
	if err := writeOutput(st, "-o", o.out, out.Data); err != nil {
		return err
	}
	for _, n := range out.Notes {
		fmt.Fprintf(st.Stderr, "rehearse: %s\n", n)
	}
	if !toStdout(o.out) {
		fmt.Fprintf(st.Stderr, "rehearse: wrote %s (%s, from %s)\n", o.out, o.format, o.dir)
	}
	return nil
}

// readToExport reads the bundle in dir, verified: one that does not verify
// is refused (exit 1), one that cannot be read is unreadable's.
func readToExport(ctx context.Context, dir string) (*bundle.Results, error) {
	res, err := bundle.ReadVerified(ctx, dir)
	if ue := (*bundle.UnverifiedError)(nil); errors.As(err, &ue) {
		return nil, &ExitError{Code: 1, Err: fmt.Errorf("export refused: %w", err)}
	} else if err != nil {
		return nil, unreadable(err)
	}
	return res, nil
}

// vllmFile reports whether -o names one vLLM result file (a name ending in
// .json or .jsonl) rather than the folder of one file per load.
func vllmFile(out string) bool {
	return strings.HasSuffix(out, ".json") || strings.HasSuffix(out, ".jsonl")
}

// runVLLMExport writes a bundle's vLLM results as vLLM writes them: into
// the folder -o names (made when absent), one file per load under vLLM's
// name; or to -o FILE.json, the one load's object, or, with
// --append-result, each load's appended (one object per line).
func runVLLMExport(ctx context.Context, st *State, o exportOptions, eo export.Options) error {
	if benchcmd.Inside(o.dir, filepath.Join(o.out, "x")) || benchcmd.Inside(o.dir, o.out) {
		return usageError("-o %s: inside the bundle %s, where SHA256SUMS would not list it and verify would fail; write it elsewhere", o.out, o.dir)
	}
	file := vllmFile(o.out)
	if file {
		if err := checkOutput("-o", o.out); err != nil {
			return err
		}
	}
	res, err := readToExport(ctx, o.dir)
	if err != nil {
		return err
	}
	results := export.VLLMResults(res, eo)
	if file && len(results) > 1 && !o.appendTo {
		return usageError("-o %s: the bundle has %d loads and vLLM writes one run per file: give -o a folder (one file per load under vLLM's name), or add --append-result (one object per line)", o.out, len(results))
	}
	if !file {
		if err := os.MkdirAll(o.out, 0o755); err != nil {
			return usageError("-o %s: %v", o.out, err)
		}
	}
	for _, r := range results {
		path := o.out
		if !file {
			path = filepath.Join(o.out, r.FileName)
		}
		if err := benchcmd.WriteVLLMResult(st.env(), path, r.Object.PyJSON(), o.appendTo); err != nil {
			return err
		}
		fmt.Fprintf(st.Stderr, "rehearse: wrote %s (vllm, %s at %s, from %s)\n", path, r.Server, r.Load, o.dir)
	}
	return nil
}

// bullets writes items as a wrapped list for help text: "- " before each,
// continuation lines indented under it.
func bullets(items []string) string {
	var b strings.Builder
	for i, it := range items {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString("- " + strings.ReplaceAll(wrapHelp(it), "\n", "\n  "))
	}
	return b.String()
}
