package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/drive"
	"github.com/rehearse/rehearse/internal/provenance"
	"github.com/rehearse/rehearse/internal/report"
	"github.com/rehearse/rehearse/internal/stream"
	"github.com/rehearse/rehearse/internal/tokenizer"
	"github.com/rehearse/rehearse/internal/workload"
)

type benchOptions struct {
	baseURL       string
	endpoint      string
	model         string
	name          string
	apiKeyEnv     string
	concurrencies []int
	repeats       int
	warmupWaves   int
	warmupClients int
	promptsPath   string
	maxTokens     int
	timeout       time.Duration
	extraBody     string
	includeUsage  bool
	followRedirs  bool
	tokenizer     string
	out           string

	requestRates   []float64
	arrival        string
	burstiness     float64
	seed           int64
	numRequests    int
	duration       time.Duration
	maxConcurrency int

	closedSet bool     // --concurrency was given
	openSet   []string // open-loop flags that were given
	progress  string
}

func newBenchCmd(st *State) *cobra.Command {
	var o benchOptions
	cmd := &cobra.Command{
		Use:   "bench --base-url URL [flags]",
		Short: "Drive an endpoint that is already running and write a bundle",
		Long: `Drive one OpenAI-compatible endpoint that is already running and write a
results bundle (results.json, journal.jsonl, README.md, plots, SHA256SUMS).

Closed loop (the default): for each --concurrency N, --repeats waves of N
clients released together, one streaming request each, prompts assigned
round-robin. Without --warmup-waves the first recorded wave is flagged cold.

Open loop: --request-rate R sends requests on a --arrival schedule (fixed,
poisson, or gamma with --burstiness K), reproducible with --seed, bounded by
--num-requests and/or --duration; --max-concurrency caps requests in flight
and counts those that had to wait. With --request-rate and no --concurrency,
only the open-loop waves run.

Output tokens are the returned text re-tokenized with --tokenizer: a
tokenizer.json path, a model id looked up in the Hugging Face cache
(ORG/NAME[@REVISION]), an embedded variant (qwen3, qwen2.5), or "usage" for
the server's own completion_tokens. By default the --model's tokenizer is
looked up in the cache, else the embedded Qwen tokenizer is used and a note
says so.

A 3xx answer is the request's outcome (http_status, naming the Location), so
a redirect to another host is never credited to this one; --follow-redirects
follows it.

The API key is read from the environment variable named by --api-key-env and
is never written anywhere. Ctrl-C stops cleanly: requests in flight end as
canceled, and the bundle of what finished is written.`,
		Example: `  rehearse bench --base-url http://127.0.0.1:8000 --model Qwen/Qwen2.5-1.5B-Instruct
  rehearse bench --base-url http://127.0.0.1:8000 --concurrency 1,8 --repeats 2 -o out
  rehearse bench --base-url http://127.0.0.1:8000 --request-rate 4 --arrival gamma --burstiness 0.5 --duration 60s
  rehearse bench --base-url https://api.example.com --api-key-env API_KEY --extra-body '{"ignore_eos":true}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.closedSet = cmd.Flags().Changed("concurrency")
			for _, name := range []string{"arrival", "burstiness", "seed", "num-requests", "duration", "max-concurrency"} {
				if cmd.Flags().Changed(name) {
					o.openSet = append(o.openSet, name)
				}
			}
			return runBench(cmd.Context(), st, &o, commandLine(cmd))
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.baseURL, "base-url", "", "base URL of the running server (required), e.g. http://127.0.0.1:8000")
	f.StringVar(&o.endpoint, "endpoint", stream.DefaultEndpoint, "chat-completions path")
	f.StringVar(&o.model, "model", "", "model name to request (default: the first model of GET /v1/models)")
	f.StringVar(&o.name, "name", "server", "server label in the bundle")
	f.StringVar(&o.apiKeyEnv, "api-key-env", "", "environment variable holding the API key (sent as a bearer token, never stored)")
	f.IntSliceVar(&o.concurrencies, "concurrency", []int{1, 8, 32, 64}, "clients per closed-loop wave, comma-separated")
	f.IntVar(&o.repeats, "repeats", 3, "recorded waves per concurrency (and per request rate)")
	f.IntVar(&o.warmupWaves, "warmup-waves", 0, "unrecorded warm-up waves before the recorded ones")
	f.IntVar(&o.warmupClients, "warmup-concurrency", 0, "clients per warm-up wave (default: the first --concurrency)")
	f.StringVar(&o.promptsPath, "prompts", "", "prompts file: .jsonl with a \"prompt\" field per line, or .txt with one prompt per line (default: eight built-in prompts)")
	f.IntVar(&o.maxTokens, "max-tokens", 128, "max_tokens of every request")
	f.DurationVar(&o.timeout, "timeout", 60*time.Second, "per-request timeout, from send to the end of the stream")
	f.StringVar(&o.extraBody, "extra-body", "", "JSON object merged into every request body, e.g. '{\"ignore_eos\":true}'")
	f.BoolVar(&o.includeUsage, "include-usage", true, "send stream_options.include_usage (--include-usage=false for servers that reject it)")
	f.BoolVar(&o.followRedirs, "follow-redirects", false, "follow a 3xx answer (default: a redirect is the request's outcome, http_status, never another host's stream)")
	f.StringVar(&o.tokenizer, "tokenizer", "", "tokenizer.json path, ORG/NAME[@REV] from the Hugging Face cache, qwen3, qwen2.5, or usage")
	f.StringVarP(&o.out, "output", "o", "", "bundle directory (default rehearse-bench-<UTC time>)")
	f.Float64SliceVar(&o.requestRates, "request-rate", nil, "open-loop request rates in requests per second, comma-separated")
	f.StringVar(&o.arrival, "arrival", workload.ArrivalPoisson, "open-loop arrival process: fixed, poisson or gamma")
	f.Float64Var(&o.burstiness, "burstiness", 0, "gamma shape: 1 is Poisson, below 1 burstier (gamma arrivals only)")
	f.Int64Var(&o.seed, "seed", 0, "seed of the arrival schedule (repeat r uses seed+r-1)")
	f.IntVar(&o.numRequests, "num-requests", 0, "requests per open-loop wave (0: bounded by --duration only)")
	f.DurationVar(&o.duration, "duration", 0, "length of an open-loop wave's schedule (0: bounded by --num-requests only)")
	f.IntVar(&o.maxConcurrency, "max-concurrency", 0, "cap on open-loop requests in flight (0: none); waits are counted")
	f.StringVar(&o.progress, "progress", "auto", "progress bar on stderr: auto (when stderr is a terminal), always, never")
	return cmd
}

// commandLine is the invocation as provenance records it: the flags that
// were set, in the order cobra lists them.
func commandLine(cmd *cobra.Command) []string {
	out := []string{"rehearse", cmd.Name()}
	cmd.Flags().Visit(func(f *pflag.Flag) {
		v := f.Value.String()
		if strings.HasSuffix(f.Value.Type(), "Slice") {
			v = strings.TrimSuffix(strings.TrimPrefix(v, "["), "]")
		}
		out = append(out, "--"+f.Name+"="+config.RedactURL(v))
	})
	return out
}

// validate checks every flag before any work; errors name the flag.
func (o *benchOptions) validate() error {
	if o.baseURL == "" {
		return usageError("--base-url is required")
	}
	u, err := url.Parse(o.baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usageError("--base-url %q: want an absolute http:// or https:// URL", o.baseURL)
	}
	if !strings.HasPrefix(o.endpoint, "/") {
		return usageError("--endpoint %q: want a path starting with /", o.endpoint)
	}
	if strings.TrimSpace(o.name) == "" {
		return usageError("--name: empty")
	}
	open := len(o.requestRates) > 0
	if !open || o.closedSet {
		if len(o.concurrencies) == 0 {
			return usageError("--concurrency: empty")
		}
		if errs := config.CheckConcurrencies(o.concurrencies); len(errs) > 0 {
			return usageError("--concurrency %s", errs[0].Msg)
		}
	}
	if o.repeats < 1 {
		return usageError("--repeats %d: want at least 1", o.repeats)
	}
	if o.warmupWaves < 0 {
		return usageError("--warmup-waves %d: want 0 or more", o.warmupWaves)
	}
	if o.warmupClients < 0 {
		return usageError("--warmup-concurrency %d: want 1 or more (0: the first --concurrency)", o.warmupClients)
	}
	if o.maxTokens < 1 {
		return usageError("--max-tokens %d: want at least 1", o.maxTokens)
	}
	if o.timeout <= 0 {
		return usageError("--timeout %v: want a positive duration such as 60s", o.timeout)
	}
	if o.apiKeyEnv != "" {
		if _, err := config.APIKey(o.apiKeyEnv); err != nil {
			return usageError("--api-key-env %s: %v", o.apiKeyEnv, err)
		}
	}
	switch o.progress {
	case "auto", "always", "never":
	default:
		return usageError("--progress %q: want auto, always or never", o.progress)
	}
	if open {
		if err := config.CheckArrival(o.arrival, o.burstiness); err != nil {
			return usageError("--arrival/--burstiness: %v", err)
		}
		for _, r := range o.requestRates {
			if _, err := workload.NewSchedule(o.arrival, r, o.burstiness, o.seed); err != nil {
				return usageError("--request-rate/--arrival/--burstiness: %v", err)
			}
		}
		if o.numRequests < 0 || o.duration < 0 {
			return usageError("--num-requests %d, --duration %v: want non-negative bounds", o.numRequests, o.duration)
		}
		if o.numRequests == 0 && o.duration == 0 {
			return usageError("--request-rate needs a bound: --num-requests, --duration, or both")
		}
		if o.maxConcurrency < 0 {
			return usageError("--max-concurrency %d: want 0 (no cap) or more", o.maxConcurrency)
		}
	} else if len(o.openSet) > 0 {
		return usageError("--%s applies to open-loop waves: add --request-rate", o.openSet[0])
	}
	return nil
}

func (o *benchOptions) parseExtraBody() (map[string]any, error) {
	if strings.TrimSpace(o.extraBody) == "" {
		return nil, nil
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(o.extraBody), &m); err != nil || m == nil {
		return nil, usageError("--extra-body %q: want a JSON object such as '{\"ignore_eos\":true}'", o.extraBody)
	}
	if errs := config.CheckExtraBody(m); len(errs) > 0 {
		return nil, usageError("--extra-body: %v", errs[0])
	}
	return m, nil
}

func runBench(ctx context.Context, st *State, o *benchOptions, argv []string) error {
	if err := o.validate(); err != nil {
		return err
	}
	extra, err := o.parseExtraBody()
	if err != nil {
		return err
	}
	prompts := workload.BuiltinPrompts()
	if o.promptsPath != "" {
		if prompts, err = workload.LoadPrompts(o.promptsPath); err != nil {
			return usageError("--prompts: %v", err)
		}
	}
	wl := bundle.Workload{
		Kind:              contract.ModeClosed,
		Concurrencies:     o.concurrencies,
		Repeats:           o.repeats,
		Prompts:           prompts,
		MaxTokens:         o.maxTokens,
		Temperature:       0,
		TimeoutS:          o.timeout.Seconds(),
		WarmupWaves:       o.warmupWaves,
		PercentileMethod:  contract.PercentileMethod,
		Endpoint:          o.endpoint,
		IncludeUsage:      o.includeUsage,
		ExtraBody:         extra,
		WarmupConcurrency: o.warmupClients,
	}
	if len(o.requestRates) > 0 {
		wl.Kind = contract.ModeClosed + "+" + contract.ModeOpen
		if !o.closedSet {
			wl.Kind, wl.Concurrencies = contract.ModeOpen, []int{}
		}
		wl.Open = &bundle.OpenLoop{
			RequestRatesRPS: o.requestRates, Arrival: o.arrival, Burstiness: o.burstiness, Seed: o.seed,
			NumRequests: o.numRequests, DurationS: o.duration.Seconds(), MaxConcurrency: o.maxConcurrency,
		}
	}
	if err := drive.CheckDescriptors(drive.ConnectionsNeeded(wl)); err != nil {
		return usageError("bench: %v", err)
	}
	apiKey := ""
	if o.apiKeyEnv != "" {
		apiKey = os.Getenv(o.apiKeyEnv)
	}
	client := stream.NewClient(nil)
	defer client.Close()
	var notes []string
	if o.model == "" {
		if o.model, err = client.ServedModel(ctx, o.baseURL, apiKey); err != nil {
			return usageError("--model not given and the server did not name one: %v", err)
		}
		notes = append(notes, fmt.Sprintf("model %q was taken from the server's /v1/models", o.model))
	}
	counter, tokProv, note, err := benchTokenizer(o.tokenizer, o.model)
	if err != nil {
		return err
	}
	if note != "" {
		notes = append(notes, note)
	}

	prov := bundle.Provenance{
		Tool:      bundle.Tool{Name: "rehearse", Version: Version(), Commit: Commit(), GoVersion: runtime.Version()},
		Command:   argv,
		Host:      provenance.Host(),
		Model:     bundle.Model{ID: o.model},
		Tokenizer: tokProv,
	}
	gpus, gerr := provenance.GPUs(ctx)
	if gerr != nil {
		notes = append(notes, "GPU query failed: "+gerr.Error())
	}
	prov.GPUs = gpus
	if len(gpus) > 0 && !isLoopback(o.baseURL) {
		notes = append(notes, "the GPUs listed are those of the machine that ran rehearse; the endpoint "+config.RedactURL(o.baseURL)+" may run elsewhere")
	}

	dir := o.out
	if dir == "" {
		dir = "rehearse-bench-" + time.Now().UTC().Format("20060102T150405Z")
	}
	showBar := o.progress == "always" || (o.progress == "auto" && isTerminal(st.Stderr))
	pb := &benchProgress{w: st.Stderr, enabled: showBar}
	b := drive.Bench{
		Dir: dir,
		Target: drive.Target{
			Name: o.name, BaseURL: o.baseURL, Endpoint: o.endpoint, Model: o.model, APIKey: apiKey,
			IncludeUsage: o.includeUsage, ExtraBody: extra, FollowRedirects: o.followRedirs,
		},
		Workload: wl, Provenance: prov, Notes: notes, Progress: pb.event, Client: client,
	}
	if counter != nil {
		b.Counter = counter
	}
	res, runErr := drive.RunBench(ctx, b)
	pb.close()
	if res == nil {
		return runErr
	}
	if err := report.Write(dir, res); err != nil {
		return errors.Join(runErr, fmt.Errorf("report: %w", err))
	}
	printBenchSummary(st.Stdout, res)
	fmt.Fprintf(st.Stdout, "\nbundle: %s (check it with: rehearse verify %s)\n", dir, dir)
	if runErr != nil {
		if ctx.Err() != nil {
			return &ExitError{Code: 130, Err: runErr}
		}
		return runErr
	}
	return nil
}

// benchTokenizer resolves --tokenizer; a nil counter means usage counts.
func benchTokenizer(spec, model string) (drive.Counter, bundle.Tokenizer, string, error) {
	var (
		tok  *tokenizer.Tokenizer
		err  error
		note string
	)
	switch {
	case spec == "usage":
		return nil, bundle.Tokenizer{Name: "usage", Source: "the server's usage.completion_tokens"}, "", nil
	case spec == tokenizer.VariantQwen3 || spec == tokenizer.VariantQwen25:
		tok, err = tokenizer.Embedded(spec)
	case spec != "" && fileExists(spec):
		tok, err = tokenizer.Load(spec)
	case spec != "" && strings.Contains(spec, "/") && !strings.HasSuffix(spec, ".json"):
		id, rev, _ := strings.Cut(spec, "@")
		var path string
		if path, err = tokenizer.FindInCache(id, rev); err == nil {
			tok, err = tokenizer.Load(path)
		}
	case spec != "":
		return nil, bundle.Tokenizer{}, "", usageError("--tokenizer %q: no such file, and not ORG/NAME[@REV], qwen3, qwen2.5 or usage", spec)
	default:
		if path, ferr := tokenizer.FindInCache(model, ""); ferr == nil {
			tok, err = tokenizer.Load(path)
			break
		}
		variant := tokenizer.VariantQwen3
		if strings.Contains(strings.ToLower(model), "qwen2") {
			variant = tokenizer.VariantQwen25
		}
		tok, err = tokenizer.Embedded(variant)
		note = fmt.Sprintf("output tokens were counted with the bundled %s tokenizer: %q's own tokenizer.json was not in the Hugging Face cache (use --tokenizer to choose)", variant, model)
	}
	if err != nil {
		return nil, bundle.Tokenizer{}, "", usageError("--tokenizer: %v", err)
	}
	info := tok.Info()
	prov := bundle.Tokenizer{Name: info.Name, Source: info.Source, SHA256: info.SHA256}
	if info.Source == "embedded" {
		prov.Variant = info.Name
	}
	return tok, prov, note, nil
}

func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir()
}

func isLoopback(base string) bool {
	u, err := url.Parse(base)
	if err != nil {
		return false
	}
	if u.Hostname() == "localhost" {
		return true
	}
	ip := net.ParseIP(u.Hostname())
	return ip != nil && ip.IsLoopback()
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// benchProgress draws one progress bar per wave on stderr.
type benchProgress struct {
	w       io.Writer
	enabled bool
	bar     *progressbar.ProgressBar
}

func (p *benchProgress) event(ev drive.Event) {
	if !p.enabled {
		return
	}
	w := ev.Wave
	label := fmt.Sprintf("%s %s c=%d r=%d", w.Server, w.Kind, w.Concurrency, w.Repeat)
	if w.Mode == contract.ModeOpen {
		label = fmt.Sprintf("%s %s %g req/s r=%d", w.Server, w.Kind, w.RequestRateRPS, w.Repeat)
	}
	switch ev.Kind {
	case drive.WaveReleased:
		p.bar = progressbar.NewOptions(ev.Total,
			progressbar.OptionSetWriter(p.w),
			progressbar.OptionSetDescription(label),
			progressbar.OptionShowCount(),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionSetPredictTime(false),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionSetWidth(30),
		)
	case drive.RequestEnded:
		if p.bar != nil {
			p.bar.Describe(fmt.Sprintf("%s failed %d", label, ev.Failed))
			p.bar.Add(1)
		}
	case drive.WaveEnded:
		if p.bar != nil {
			p.bar.Describe(fmt.Sprintf("%s failed %d", label, ev.Failed))
			p.bar.Finish()
			fmt.Fprintln(p.w)
			p.bar = nil
		}
	}
}

func (p *benchProgress) close() {
	if p.bar != nil {
		p.bar.Exit()
		fmt.Fprintln(p.w)
	}
}

// printBenchSummary prints one line per aggregate.
func printBenchSummary(w io.Writer, res *bundle.Results) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "server\tload\tgoodput tok/s\tp50 TTFT\tp95 TTFT\tp95 TPOT\tp99 lateness\tfailures\t")
	for _, a := range res.Aggregates {
		late := "–"
		if a.Mode == contract.ModeOpen && a.Lateness != nil {
			late = report.Seconds(a.Lateness.P99)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", a.Server, loadLabel(a), report.Goodput(a.Goodput),
			report.Seconds(a.TTFT.P50), report.Seconds(a.TTFT.P95), report.Seconds(a.TPOT.P95), late, failureSummary(a.Failures))
	}
	tw.Flush()
	for _, a := range res.Aggregates {
		for _, warn := range a.Warnings {
			fmt.Fprintf(w, "note: %s at %s: %s\n", a.Server, loadLabel(a), warn)
		}
	}
}

func loadLabel(a contract.Aggregate) string {
	if a.Mode == contract.ModeOpen {
		return fmt.Sprintf("%g req/s", a.RequestRateRPS)
	}
	if a.Concurrency == 1 {
		return "1 client"
	}
	return fmt.Sprintf("%d clients", a.Concurrency)
}

func failureSummary(f contract.Failures) string {
	s := report.FailureCount(f)
	if f.Count == 0 {
		return s
	}
	var parts []string
	for _, k := range contract.ErrorKinds {
		if n := f.ByKind[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, n))
		}
	}
	return s + " (" + strings.Join(parts, ", ") + ")"
}
