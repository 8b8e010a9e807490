package benchcmd

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/exitcode"
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
	appendTo bool   // --append-result
	// here puts the files in the working folder without --result-dir, as
	// vLLM does (bench serve); bench puts them beside the bundle.
	here bool
	// metrics and percentiles are --percentile-metrics and
	// --metric-percentiles when given (nil: vLLM's defaults).
	metrics     []string
	percentiles []float64
}

func saveResultFlags(f *pflag.FlagSet, o *saveResultOptions) {
	f.BoolVar(&o.save, "save-result", false, "also write the bundle's vLLM result JSON (as rehearse export --format vllm), one file per load named as vLLM names it: {backend}-{request_rate}qps[-concurrency{C}]-{model}-{date}.json")
	f.StringVar(&o.dir, "result-dir", "", "folder of the --save-result files (default: bench, the folder the bundle is in; bench serve, the working folder, as vLLM)")
	f.StringVar(&o.filename, "result-filename", "", "name of the --save-result file (several loads: one object per line in it, as vLLM's --append-result writes them)")
	f.BoolVar(&o.detailed, "save-detailed", false, "add the per-request arrays to the --save-result file (input_lens, output_lens, ttfts, itls, start_times, generated_texts, errors)")
	f.BoolVar(&o.appendTo, "append-result", false, "append the result to its file (a newline, then the object, as vLLM does) instead of replacing the file; implies --save-result")
}

// validate refuses the save flags without --save-result, by name, and a
// --result-filename that names what is not nothing or a regular file
// (Env.CheckOutput) for the bundle in bundleDir.
func (o *saveResultOptions) validate(env Env, changed func(string) bool, bundleDir string) error {
	o.save = o.save || o.appendTo // vLLM saves with either
	if o.save && o.filename != "" && !filepath.IsAbs(o.filename) {
		return env.CheckOutput("--result-filename", filepath.Join(o.resultDir(bundleDir), o.filename))
	}
	if o.save && o.filename != "" {
		return env.CheckOutput("--result-filename", o.filename)
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

// write writes res's vllm export for the bundle in bundleDir, as vLLM
// writes its file (Python's json.dump, no newline after it), one file per
// load under vLLM's name, and says where on stdout; nothing without
// --save-result. --append-result appends a newline and the object to a
// file that has content; without it, several loads into one
// --result-filename are refused (vLLM writes one run per file).
func (o saveResultOptions) write(env Env, res *bundle.Results, bundleDir string) error {
	if !o.save || res == nil {
		return nil
	}
	dir := o.resultDir(bundleDir)
	if Inside(bundleDir, filepath.Join(dir, "x")) {
		return usageError("--result-dir %s: inside the bundle %s, where SHA256SUMS would not list the file", dir, bundleDir)
	}
	results := export.VLLMResults(res, export.Options{Detailed: o.detailed, Metrics: o.metrics, Percentiles: o.percentiles})
	if len(results) == 0 {
		fmt.Fprintf(env.Stderr, "rehearse: --save-result: the bundle has no recorded load; no result file written\n")
		return nil
	}
	if o.filename != "" && len(results) > 1 && !o.appendTo {
		return usageError("--result-filename %s: the bundle has %d loads and vLLM writes one run per file; add --append-result to write them one per line", o.filename, len(results))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return &exitcode.Error{Code: 2, Err: fmt.Errorf("--result-dir: %w", err)}
	}
	var written []string
	for _, r := range results {
		name := r.FileName
		if o.filename != "" {
			name = o.filename
		}
		path := name
		if !filepath.IsAbs(name) {
			path = filepath.Join(dir, name)
		}
		if err := WriteVLLMResult(env, path, r.Object.PyJSON(), o.appendTo); err != nil {
			return err
		}
		if !slices.Contains(written, path) {
			written = append(written, path)
		}
	}
	fmt.Fprintf(env.Stdout, "vLLM result JSON (%d load(s)): %s\n", len(results), strings.Join(written, ", "))
	return nil
}

// WriteVLLMResult writes one result to path, replacing the file, or, to
// append, after a newline where the file has content (vLLM's mode a+).
func WriteVLLMResult(env Env, path string, data []byte, appendTo bool) error {
	if !appendTo {
		return env.WriteOutput("--save-result", path, data)
	}
	if err := env.CheckOutput("--result-filename", path); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return &exitcode.Error{Code: 1, Err: fmt.Errorf("--append-result: %w", err)}
	}
	if fi, err := f.Stat(); err == nil && fi.Size() > 0 {
		data = append([]byte("\n"), data...)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return &exitcode.Error{Code: 1, Err: fmt.Errorf("--append-result: %w", err)}
	}
	return nil
}

// resultDir is the folder of the --save-result files for the bundle in
// bundleDir: --result-dir, else the bundle's own folder's.
func (o saveResultOptions) resultDir(bundleDir string) string {
	if o.dir != "" {
		return o.dir
	}
	if o.here {
		return "."
	}
	return filepath.Dir(filepath.Clean(bundleDir))
}

// Inside reports whether path lies in dir (after cleaning both; a dir
// that does not exist holds nothing): --result-dir's rule, and rehearse
// export's for its -o.
func Inside(dir, path string) bool {
	d, err1 := filepath.Abs(dir)
	p, err2 := filepath.Abs(path)
	if err1 != nil || err2 != nil {
		return false
	}
	if rd, err := filepath.EvalSymlinks(d); err == nil {
		d = rd
	}
	if rp, err := filepath.EvalSymlinks(filepath.Dir(p)); err == nil {
		p = filepath.Join(rp, filepath.Base(p))
	}
	rel, err := filepath.Rel(d, p)
	if _, serr := os.Stat(d); serr != nil {
		return false
	}
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
