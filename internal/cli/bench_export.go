package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/export"
)

// saveResultOptions are vllm bench serve's --save-result flags: after the
// bundle is written and verified, its vllm export (rehearse export
// --format vllm) is written as vLLM names and places it.
type saveResultOptions struct {
	save     bool   // --save-result
	dir      string // --result-dir
	filename string // --result-filename
	detailed bool   // --save-detailed
	// metrics and percentiles are --percentile-metrics and
	// --metric-percentiles when given (nil: vLLM's defaults).
	metrics     []string
	percentiles []float64
}

func saveResultFlags(f *pflag.FlagSet, o *saveResultOptions) {
	f.BoolVar(&o.save, "save-result", false, "also write the bundle's vLLM result JSON (as rehearse export --format vllm), one file per load named as vLLM names it: {backend}-{request_rate}qps[-concurrency{C}]-{model}-{date}.json")
	f.StringVar(&o.dir, "result-dir", "", "folder of the --save-result files (default: the folder the bundle is in, beside it)")
	f.StringVar(&o.filename, "result-filename", "", "name of the --save-result file (several loads: one object per line in it, as vLLM's --append-result writes them)")
	f.BoolVar(&o.detailed, "save-detailed", false, "add the per-request arrays to the --save-result file (input_lens, output_lens, ttfts, itls, start_times, generated_texts, errors)")
}

// validate refuses the save flags without --save-result, by name, and a
// --result-filename that names what is not nothing or a regular file
// (checkOutput) for the bundle in bundleDir.
func (o saveResultOptions) validate(changed func(string) bool, bundleDir string) error {
	if o.save && o.filename != "" {
		return checkOutput("--result-filename", filepath.Join(o.resultDir(bundleDir), o.filename))
	}
	if o.save {
		return nil
	}
	for _, name := range []string{"result-dir", "result-filename", "save-detailed"} {
		if changed(name) {
			return usageError("--%s: only with --save-result", name)
		}
	}
	return nil
}

// write writes res's vllm export for the bundle in bundleDir and says
// where on stdout; nothing without --save-result.
func (o saveResultOptions) write(st *State, res *bundle.Results, bundleDir string) error {
	if !o.save || res == nil {
		return nil
	}
	dir := o.resultDir(bundleDir)
	if inside(bundleDir, filepath.Join(dir, "x")) {
		return usageError("--result-dir %s: inside the bundle %s, where SHA256SUMS would not list the file", dir, bundleDir)
	}
	results := export.VLLMResults(res, export.Options{Detailed: o.detailed, Metrics: o.metrics, Percentiles: o.percentiles})
	if len(results) == 0 {
		fmt.Fprintf(st.Stderr, "rehearse: --save-result: the bundle has no recorded load; no result file written\n")
		return nil
	}
	files := map[string]*bytes.Buffer{}
	var order []string
	for _, r := range results {
		name := r.FileName
		if o.filename != "" {
			name = o.filename
		}
		data, err := json.Marshal(r.Object)
		if err != nil {
			return err
		}
		if files[name] == nil {
			files[name] = &bytes.Buffer{}
			order = append(order, name)
		}
		files[name].Write(data)
		files[name].WriteByte('\n')
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return &ExitError{Code: 2, Err: fmt.Errorf("--result-dir: %w", err)}
	}
	var written []string
	for _, name := range order {
		path := filepath.Join(dir, name)
		if err := writeOutput(st, "--save-result", path, files[name].Bytes()); err != nil {
			return err
		}
		written = append(written, path)
	}
	fmt.Fprintf(st.Stdout, "vLLM result JSON (%d load(s)): %s\n", len(results), strings.Join(written, ", "))
	return nil
}

// resultDir is the folder of the --save-result files for the bundle in
// bundleDir: --result-dir, else the bundle's own folder's.
func (o saveResultOptions) resultDir(bundleDir string) string {
	if o.dir != "" {
		return o.dir
	}
	return filepath.Dir(filepath.Clean(bundleDir))
}
