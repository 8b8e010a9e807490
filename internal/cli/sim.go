package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/report"
	"github.com/rehearse/rehearse/internal/sim"
	"github.com/rehearse/rehearse/internal/sim/engine"
	"github.com/rehearse/rehearse/internal/sim/fit"
	"github.com/rehearse/rehearse/internal/tokenizer"
)

// simShutdownGrace bounds how long rehearse sim waits for connections to
// close after SIGTERM; streams in flight are aborted first.
const simShutdownGrace = 5 * time.Second

// crashExit ends the process for the crash fault; tests replace it.
var crashExit = func(code int) { os.Exit(code) }

type simOptions struct {
	engine        string
	profile       string
	listProfiles  bool
	model         string
	host          string
	port          int
	portFile      string
	timeScale     float64
	seed          int64
	faults        []string
	maxNumSeqs    int
	kvTokenBudget int
	prefixCaching string
	tokenizerPath string
	quiet         bool
	idleTimeout   time.Duration
	reasoning     int
	reasonField   string
	toolCalls     bool
	stampSends    bool
}

func newSimCmd(st *State) *cobra.Command {
	var o simOptions
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Run a simulated OpenAI-compatible LLM server (serial or continuous-batching engine)",
		Long: `Run a simulated OpenAI-compatible LLM server on a loopback port.

It serves POST /v1/chat/completions and POST /v1/completions (the prompt as
sent, choices[0].text; streaming and not), GET /v1/models, GET /health and
GET /metrics (Prometheus text, vLLM's metric names), and models
either a lock-serialized engine (serial) or an iteration-level continuous-
batching engine (batching) from a step-latency profile: prefill cost per
prompt token and decode step latency by batch size. Each request gets its own
output length: max_tokens with ignore_eos, else where the modelled model stops
on its own (a seeded function of the prompt), within min_tokens and
max_tokens. Output text re-tokenizes
with the pinned tokenizer to exactly the tokens the engine emitted, and usage
agrees with it. Simulated time runs --time-scale times faster than the wall
clock.

It logs "listening on HOST:PORT" on stderr once it accepts connections (with
--port 0 the port is chosen by the system), then one line per request. SIGTERM
or SIGINT aborts the streams in flight and stops it with exit status 0.

Faults (--fault KIND:RATE, repeatable; RATE is a probability per request, drawn
from --seed): error_event, truncate, http500, http429 (with Retry-After: 1),
stall, malformed, crash (the process exits with status 3 mid-stream), overrun
(a stream that ignores max_tokens and sends 8 times as many tokens).

--prefix-caching on reuses the KV blocks of prompt prefixes seen recently, as
vLLM's automatic prefix caching does: the leading whole 16-token blocks of a
prompt that match a cached hash chain cost no prefill; the cache holds up to
--kv-token-budget tokens of blocks, least recently used evicted first, and
/metrics counts vllm:prefix_cache_queries_total and
vllm:prefix_cache_hits_total in tokens. The default is the profile's
prefix_caching: off in every built-in profile, whose prefill costs were
calibrated with every prompt token charged.

--idle-timeout D closes a connection that carries no request for D, new or
kept alive, as uvicorn (5 s by default) and many proxies (10 s) do, so that a
client's handling of connections closed while idle can be rehearsed.

--reasoning-tokens N makes every response think first, as a reasoning model
behind vLLM's --reasoning-parser does: its first N generated tokens (fewer when
max_tokens cuts them) stream as delta.reasoning, then the content follows;
max_tokens, min_tokens and usage.completion_tokens count both, as vLLM's do.
--reasoning-field reasoning_content streams them under the older name (vLLM
before v0.11.1, DeepSeek's API). --tool-calls makes every response call a tool
instead: the tokens after any reasoning stream as the arguments of one
delta.tool_calls entry (function "lookup"), and a response that ends on its own
has finish_reason tool_calls.

--stamp-sends adds "rehearse_sent_ns" (wall-clock Unix nanoseconds of the
write) to every chunk, so that a client on the same host measures what it adds
between the server's send and its own receive stamp: rehearse records it per
request (client_added_s) and its report's load-generator section shows it.`,
		Example: `  rehearse sim --engine batching --port 8000
  rehearse sim --engine serial --port 0 --time-scale 10 --port-file /tmp/port
  rehearse sim --fault http500:0.05 --fault stall:0.01 --seed 7
  rehearse sim --idle-timeout 5s
  rehearse sim --reasoning-tokens 256
  rehearse sim --prefix-caching on --kv-token-budget 100000
  rehearse sim --list-profiles`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.listProfiles {
				return listSimProfiles(st.Stdout)
			}
			if o.profile != "" && !cmd.Flags().Changed("engine") {
				// The profile says which engine it was fitted for.
				if p, err := engine.ResolveProfile(o.profile); err == nil {
					o.engine = p.Engine
				}
			}
			opts, err := o.options()
			if err != nil {
				return err
			}
			return runSim(cmd.Context(), st, o, opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.engine, "engine", engine.Batching, "engine: serial (one lock) or batching (continuous batching); with --profile and no --engine, the profile's")
	f.StringVar(&o.profile, "profile", "", "built-in profile name or profile JSON file (default t4-qwen2.5-1.5b-ENGINE)")
	f.BoolVar(&o.listProfiles, "list-profiles", false, "list the built-in profiles and exit")
	f.StringVar(&o.model, "model", "", "model id to serve (default: the profile's model)")
	f.StringVar(&o.host, "host", "127.0.0.1", "address to listen on")
	f.IntVar(&o.port, "port", 8000, "port to listen on; 0 picks a free one")
	f.StringVar(&o.portFile, "port-file", "", "write the chosen port to this file once listening")
	f.Float64Var(&o.timeScale, "time-scale", 1, "simulated time runs K times faster than wall time")
	f.Int64Var(&o.seed, "seed", 0, "seed for output lengths, output text and fault draws")
	f.StringArrayVar(&o.faults, "fault", nil, "inject a fault KIND:RATE (repeatable): error_event, truncate, http500, http429, stall, malformed, crash, overrun")
	f.IntVar(&o.maxNumSeqs, "max-num-seqs", 0, "cap on running sequences (default: the profile's; serial is always 1)")
	f.IntVar(&o.kvTokenBudget, "kv-token-budget", 0, "KV-cache budget in tokens, which also bounds the prefix cache (default: the profile's)")
	f.StringVar(&o.prefixCaching, "prefix-caching", "", "reuse the KV blocks of recently seen prompt prefixes: on or off (default: the profile's prefix_caching, off in the built-in ones)")
	f.StringVar(&o.tokenizerPath, "tokenizer", "", "tokenizer.json, or a folder holding one, to count tokens with (default: the pinned Qwen tokenizer)")
	f.BoolVar(&o.quiet, "quiet", false, "no per-request log lines")
	f.DurationVar(&o.idleTimeout, "idle-timeout", 0, "close a connection idle this long, new or kept alive, as uvicorn does after 5s (0: only a new one silent for 10s)")
	f.IntVar(&o.reasoning, "reasoning-tokens", 0, "stream this many reasoning tokens before each response's content (0: none)")
	f.StringVar(&o.reasonField, "reasoning-field", sim.ReasoningFieldReasoning, "the delta field reasoning streams in: reasoning (vLLM since v0.11.1) or reasoning_content (older vLLM, DeepSeek)")
	f.BoolVar(&o.stampSends, "stamp-sends", false, "stamp every chunk with its send time (rehearse_sent_ns, Unix nanoseconds) so a client on this host can measure its own added latency")
	f.BoolVar(&o.toolCalls, "tool-calls", false, "answer every request with a tool call: the content streams as delta.tool_calls arguments")
	cmd.AddCommand(newSimFitCmd(st))
	cmd.AddCommand(newSimValidateCmd(st))
	return cmd
}

func listSimProfiles(w io.Writer) error {
	for _, name := range engine.ProfileNames() {
		p, err := engine.BuiltinProfile(name)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%-28s %-8s %s\n", name, p.Engine, p.Description)
	}
	return nil
}

// options validates the flags and builds the simulator's options.
func (o simOptions) options() (sim.Options, error) {
	if o.engine != engine.Serial && o.engine != engine.Batching {
		return sim.Options{}, usageError("--engine %q: want serial or batching", o.engine)
	}
	if o.port < 0 || o.port > 65535 {
		return sim.Options{}, usageError("--port %d: want 0 to 65535", o.port)
	}
	if !(o.timeScale > 0) || o.timeScale > 1e6 {
		return sim.Options{}, usageError("--time-scale %g: want a number above 0 (and at most 1e6)", o.timeScale)
	}
	if o.maxNumSeqs < 0 || o.kvTokenBudget < 0 {
		return sim.Options{}, usageError("--max-num-seqs %d and --kv-token-budget %d must not be negative", o.maxNumSeqs, o.kvTokenBudget)
	}
	if o.prefixCaching != "" && o.prefixCaching != sim.PrefixCachingOn && o.prefixCaching != sim.PrefixCachingOff {
		return sim.Options{}, usageError("--prefix-caching %q: want on or off", o.prefixCaching)
	}
	if o.idleTimeout < 0 {
		return sim.Options{}, usageError("--idle-timeout %v: want 0 (none) or a positive duration such as 5s", o.idleTimeout)
	}
	if o.reasoning < 0 {
		return sim.Options{}, usageError("--reasoning-tokens %d: want 0 (none) or more", o.reasoning)
	}
	if o.reasonField != sim.ReasoningFieldReasoning && o.reasonField != sim.ReasoningFieldContent {
		return sim.Options{}, usageError("--reasoning-field %q: want %s or %s", o.reasonField, sim.ReasoningFieldReasoning, sim.ReasoningFieldContent)
	}
	opts := sim.Options{
		ReasoningTokens: o.reasoning, ReasoningField: o.reasonField, ToolCalls: o.toolCalls,
		StampSends: o.stampSends,
		Engine:     o.engine, Model: o.model, TimeScale: o.timeScale, Seed: o.seed,
		MaxNumSeqs: o.maxNumSeqs, KVTokenBudget: o.kvTokenBudget, IdleTimeout: o.idleTimeout,
		PrefixCaching: o.prefixCaching,
	}
	name := o.profile
	if name == "" {
		name = "t4-qwen2.5-1.5b-" + o.engine
	}
	p, err := engine.ResolveProfile(name)
	if err != nil {
		return sim.Options{}, usageError("--profile: %v", err)
	}
	if p.Engine != o.engine {
		return sim.Options{}, usageError("--profile %s was fitted for the %s engine; pass --engine %s or another profile", name, p.Engine, p.Engine)
	}
	opts.Profile = p
	for _, s := range o.faults {
		f, err := sim.ParseFault(s)
		if err != nil {
			return sim.Options{}, usageError("--fault: %v", err)
		}
		opts.Faults = append(opts.Faults, f)
	}
	if o.tokenizerPath != "" {
		tk, _, err := tokenizer.Resolve(context.Background(), tokenizer.Request{Path: o.tokenizerPath})
		if err != nil {
			return sim.Options{}, usageError("--tokenizer: %v", err)
		}
		opts.Tokenizer = tk
	}
	return opts, nil
}

func runSim(ctx context.Context, st *State, o simOptions, opts sim.Options) error {
	logger := log.New(st.Stderr, "", log.LstdFlags|log.Lmicroseconds|log.LUTC)
	if !o.quiet {
		opts.Log = logger
	}
	opts.OnCrash = func() {
		logger.Print("rehearse sim: crash fault: exiting with status 3")
		crashExit(3)
	}
	srv, err := sim.New(opts)
	if err != nil {
		return usageError("%v", err)
	}
	defer srv.Close()

	addr := net.JoinHostPort(o.host, strconv.Itoa(o.port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("sim: listen on %s: %w", addr, err)
	}
	hs := srv.HTTPServer(log.New(st.Stderr, "rehearse sim: http: ", log.LstdFlags|log.Lmicroseconds|log.LUTC))
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()

	faults := "none"
	if len(opts.Faults) > 0 {
		var fs []string
		for _, f := range opts.Faults {
			fs = append(fs, f.String())
		}
		faults = strings.Join(fs, ",")
	}
	p := srv.Profile()
	caching := sim.PrefixCachingOff
	if srv.PrefixCaching() {
		caching = sim.PrefixCachingOn
	}
	reasoning := ""
	if opts.ReasoningTokens > 0 {
		reasoning = fmt.Sprintf(", reasoning %d tokens as delta.%s", opts.ReasoningTokens, opts.ReasoningField)
	}
	if opts.ToolCalls {
		reasoning += ", content as tool calls"
	}
	logger.Printf("rehearse sim: engine %s, profile %s (%s), model %s, time scale %g, seed %d, prefix caching %s, faults %s%s",
		srv.Engine(), p.Name, p.Source, srv.Model(), opts.TimeScale, opts.Seed, caching, faults, reasoning)
	bound := ln.Addr().String()
	if o.portFile != "" {
		_, port, _ := net.SplitHostPort(bound)
		if err := os.WriteFile(o.portFile, []byte(port+"\n"), 0o644); err != nil {
			hs.Close()
			return fmt.Errorf("sim: --port-file: %w", err)
		}
	}
	logger.Printf("listening on %s", bound)

	select {
	case err := <-served:
		return fmt.Errorf("sim: serving on %s: %w", bound, err)
	case <-ctx.Done():
	}
	logger.Printf("rehearse sim: stopping (%v): aborting requests in flight", context.Cause(ctx))
	srv.Close()
	sctx, cancel := context.WithTimeout(context.Background(), simShutdownGrace)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		hs.Close()
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("sim: serving on %s: %w", bound, err)
	}
	logger.Print("rehearse sim: stopped")
	return nil
}

type simFitOptions struct {
	bundleDir        string
	server           string
	engine           string
	fitConcurrencies []int
	output           string
	name             string
	description      string
	maxModelLen      int
	markdown         bool
}

func newSimFitCmd(st *State) *cobra.Command {
	var o simFitOptions
	cmd := &cobra.Command{
		Use:   "fit --bundle DIR --server NAME --engine serial|batching",
		Short: "Fit a simulator profile to a bundle's raw records and check it on the waves held out",
		Long: `Fit a step-latency profile for the simulator to one server of a results
bundle, reading only its recorded closed-loop waves at --fit-concurrencies:
decode step latency from the per-request TPOT (serial: one step cost;
batching: one point per batch size, linear in between), request overhead from
the TTFT at the lowest of them, a frontend queue from the TTFT growth between
the lowest and the highest (batching), output lengths from the workload.

Then run the bundle's whole closed-loop workload (its prompts, max_tokens,
timeout and repeats) through the fitted engine on a virtual clock, aggregate
it with the metric contract, and print for every concurrency the measured and
predicted goodput (median of the repeats) and p95 TTFT, marking the fitted
concurrencies and the held-out ones. --markdown prints the same as markdown.
-o writes the profile JSON, ready for rehearse sim --profile.`,
		Example: `  rehearse sim fit --bundle rehearsals/h200-qwen2.5-1.5b --server batching --engine batching \
    --fit-concurrencies 1,64 -o batching.json
  rehearse sim fit --bundle rehearsals/h200-qwen2.5-1.5b --server naive --engine serial --markdown`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			return runSimFit(st, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.bundleDir, "bundle", "", "results bundle directory (its results.json) to fit to")
	f.StringVar(&o.server, "server", "", "name of the bundle's server to fit")
	f.StringVar(&o.engine, "engine", "", "simulated engine: serial or batching")
	f.IntSliceVar(&o.fitConcurrencies, "fit-concurrencies", []int{1, 64}, "concurrencies whose waves the fit reads; the others are held out")
	f.StringVarP(&o.output, "output", "o", "", "write the fitted profile JSON to this file (-: standard output, the table then on stderr)")
	f.StringVar(&o.name, "name", "", "profile name (default SERVER-ENGINE-fit)")
	f.StringVar(&o.description, "description", "", "profile description (default: what it was fitted to)")
	f.IntVar(&o.maxModelLen, "max-model-len", 32768, "max_model_len of the profile (a bundle does not record it)")
	f.BoolVar(&o.markdown, "markdown", false, "print the derivation and the comparison as markdown")
	return cmd
}

func (o simFitOptions) validate() error {
	switch {
	case o.bundleDir == "":
		return usageError("--bundle is required")
	case o.server == "":
		return usageError("--server is required")
	case o.engine != engine.Serial && o.engine != engine.Batching:
		return usageError("--engine %q: want serial or batching", o.engine)
	case len(o.fitConcurrencies) == 0:
		return usageError("--fit-concurrencies is empty: name at least one concurrency, e.g. 1,64")
	case o.maxModelLen < 1:
		return usageError("--max-model-len %d: want >= 1", o.maxModelLen)
	}
	if o.output != "" {
		if err := checkOutput("sim fit: -o", o.output); err != nil {
			return err
		}
	}
	for _, c := range o.fitConcurrencies {
		if c < 1 {
			return usageError("--fit-concurrencies: %d is not a concurrency (want >= 1)", c)
		}
	}
	return nil
}

func runSimFit(st *State, o simFitOptions) error {
	res, err := bundle.ReadResults(o.bundleDir)
	if err != nil {
		return usageError("--bundle: %v", err)
	}
	fitted, err := fit.Profile(res, fit.Options{
		Server: o.server, Engine: o.engine, FitConcurrencies: o.fitConcurrencies,
		Name: o.name, Description: o.description, MaxModelLen: o.maxModelLen,
	})
	if err != nil {
		return usageError("%v", err)
	}
	cmp, err := fit.Compare(res, fitted, o.server, o.fitConcurrencies, nil)
	if err != nil {
		return err
	}
	// With -o - the profile is standard output's, the derivation stderr's.
	table := st.Stdout
	if o.output != "" {
		data, err := fitted.Profile.Encode()
		if err != nil {
			return err
		}
		if err := writeOutput(st, "sim fit: -o", o.output, data); err != nil {
			return err
		}
		if o.output == bundle.StdoutPath {
			table = st.Stderr
		}
	}
	writeSimFit(table, o, fitted, cmp)
	return nil
}

// writeSimFit prints the derivation and the measured-against-predicted
// table, as text or markdown.
func writeSimFit(w io.Writer, o simFitOptions, fitted *fit.Result, cmp *fit.Comparison) {
	p := fitted.Profile
	written := "not written (pass -o FILE)"
	if o.output != "" {
		written = "written to " + o.output
	}
	if o.markdown {
		fmt.Fprintf(w, "Profile `%s` (%s engine), fitted to server `%s` of `%s` on its waves at %s clients; %s.\n\n",
			p.Name, p.Engine, o.server, o.bundleDir, report.Ints(o.fitConcurrencies), written)
		fmt.Fprintf(w, "How each number was fitted:\n\n")
		for _, d := range fitted.Derivation {
			fmt.Fprintf(w, "- %s\n", d)
		}
		if len(fitted.Unexplained) > 0 {
			fmt.Fprintf(w, "\nWhat the fitted model does not explain:\n\n")
			for _, d := range fitted.Unexplained {
				fmt.Fprintf(w, "- %s\n", d)
			}
		}
		fmt.Fprintf(w, "\n| clients | waves | goodput tok/s, measured | predicted | error | p95 TTFT, measured | predicted | error | failures, measured | predicted |\n")
		fmt.Fprintf(w, "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		for _, r := range cmp.Rows {
			fmt.Fprintf(w, "| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Concurrency, simFitLabel(r.Fitted),
				report.Goodput(r.Measured.Goodput), report.Goodput(r.Predicted.Goodput), report.Change(fit.RelErr(r.Predicted.Goodput.Median, r.Measured.Goodput.Median)),
				report.Seconds(r.Measured.TTFT.P95), report.Seconds(r.Predicted.TTFT.P95), report.Change(fit.RelErr(r.Predicted.TTFT.P95, r.Measured.TTFT.P95)),
				report.FailureCount(r.Measured.Failures), report.FailureCount(r.Predicted.Failures))
		}
	} else {
		fmt.Fprintf(w, "profile %s (%s engine) fitted to server %s of %s on its waves at %s clients; %s\n",
			p.Name, p.Engine, o.server, o.bundleDir, report.Ints(o.fitConcurrencies), written)
		for _, d := range fitted.Derivation {
			fmt.Fprintf(w, "  %s\n", d)
		}
		for _, d := range fitted.Unexplained {
			fmt.Fprintf(w, "  not explained: %s\n", d)
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "clients\twaves\tgoodput measured\tpredicted\terror\tp95 TTFT measured\tpredicted\terror\tfailures measured\tpredicted\t\n")
		for _, r := range cmp.Rows {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Concurrency, simFitLabel(r.Fitted),
				report.Goodput(r.Measured.Goodput), report.Goodput(r.Predicted.Goodput), report.Change(fit.RelErr(r.Predicted.Goodput.Median, r.Measured.Goodput.Median)),
				report.Seconds(r.Measured.TTFT.P95), report.Seconds(r.Predicted.TTFT.P95), report.Change(fit.RelErr(r.Predicted.TTFT.P95, r.Measured.TTFT.P95)),
				report.FailureCount(r.Measured.Failures), report.FailureCount(r.Predicted.Failures))
		}
		tw.Flush()
	}
	if fitted.CountedPerGeneratedToken != 1 {
		fmt.Fprintf(w, "\nGoodput and TPOT count generated tokens on both sides (the server's usage_completion_tokens): the bundle's text re-tokenized to %.4f tokens per generated one, an artifact of its text that the engine model does not reproduce.\n", fitted.CountedPerGeneratedToken)
	}
	for _, n := range cmp.Notes {
		fmt.Fprintf(w, "Note: %s.\n", n)
	}
}

func simFitLabel(fitted bool) string {
	if fitted {
		return "fitted"
	}
	return "held out"
}
