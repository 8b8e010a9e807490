package cli

import (
	"errors"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rehearse/rehearse/internal/sim"
	"github.com/rehearse/rehearse/internal/sim/engine"
	"github.com/rehearse/rehearse/internal/sim/fit"
)

// crashExit ends the process for the crash fault; tests replace it.
var crashExit = func(code int) { os.Exit(code) }

// simOptions is what `rehearse sim` was asked to do: the server's
// settings (sim.Command), or --list-profiles.
type simOptions struct {
	sim.Command
	listProfiles bool
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
				return sim.ListProfiles(st.Stdout)
			}
			o.EngineSet = cmd.Flags().Changed("engine")
			return simExit(o.Serve(cmd.Context(), st.Stderr, func(code int) { crashExit(code) }))
		},
	}
	simFlags(cmd.Flags(), &o)
	cmd.AddCommand(newSimFitCmd(st))
	cmd.AddCommand(newSimValidateCmd(st))
	return cmd
}

// simFlags binds the flags of rehearse sim.
func simFlags(f *pflag.FlagSet, o *simOptions) {
	f.StringVar(&o.Engine, "engine", engine.Batching, "engine: serial (one lock) or batching (continuous batching); with --profile and no --engine, the profile's")
	f.StringVar(&o.Profile, "profile", "", "built-in profile name or profile JSON file (default t4-qwen2.5-1.5b-ENGINE)")
	f.BoolVar(&o.listProfiles, "list-profiles", false, "list the built-in profiles and exit")
	f.StringVar(&o.Model, "model", "", "model id to serve (default: the profile's model)")
	f.StringSliceVar(&o.LoRAModules, "lora-modules", nil, "LoRA adapters served beside --model, as vLLM's NAME or NAME=PATH, comma-separated: listed in /v1/models and answered as the model is")
	f.StringVar(&o.Host, "host", "127.0.0.1", "address to listen on")
	f.IntVar(&o.Port, "port", 8000, "port to listen on; 0 picks a free one")
	f.StringVar(&o.PortFile, "port-file", "", "write the chosen port to this file once listening")
	f.Float64Var(&o.TimeScale, "time-scale", 1, "simulated time runs K times faster than wall time")
	f.Int64Var(&o.Seed, "seed", 0, "seed for output lengths, output text and fault draws")
	f.StringArrayVar(&o.Faults, "fault", nil, "inject a fault KIND:RATE (repeatable): error_event, truncate, http500, http429, stall, malformed, crash, overrun")
	f.IntVar(&o.MaxNumSeqs, "max-num-seqs", 0, "cap on running sequences (default: the profile's; serial is always 1)")
	f.IntVar(&o.KVTokenBudget, "kv-token-budget", 0, "KV-cache budget in tokens, which also bounds the prefix cache (default: the profile's)")
	f.StringVar(&o.PrefixCaching, "prefix-caching", "", "reuse the KV blocks of recently seen prompt prefixes: on or off (default: the profile's prefix_caching, off in the built-in ones)")
	f.StringVar(&o.Tokenizer, "tokenizer", "", "tokenizer.json, or a folder holding one, to count tokens with (default: the pinned Qwen tokenizer)")
	f.BoolVar(&o.Quiet, "quiet", false, "no per-request log lines")
	f.DurationVar(&o.IdleTimeout, "idle-timeout", 0, "close a connection idle this long, new or kept alive, as uvicorn does after 5s (0: only a new one silent for 10s)")
	f.IntVar(&o.Reasoning, "reasoning-tokens", 0, "stream this many reasoning tokens before each response's content (0: none)")
	f.StringVar(&o.ReasoningField, "reasoning-field", sim.ReasoningFieldReasoning, "the delta field reasoning streams in: reasoning (vLLM since v0.11.1) or reasoning_content (older vLLM, DeepSeek)")
	f.BoolVar(&o.StampSends, "stamp-sends", false, "stamp every chunk with its send time (rehearse_sent_ns, Unix nanoseconds) so a client on this host can measure its own added latency")
	f.BoolVar(&o.ToolCalls, "tool-calls", false, "answer every request with a tool call: the content streams as delta.tool_calls arguments")
}

// simExit is the error of rehearse sim and its subcommands: a setting or
// input the work refuses exits 2 with its line.
func simExit(err error) error {
	_, refused := errors.AsType[*sim.UsageError](err)
	_, bad := errors.AsType[*fit.UsageError](err)
	if refused || bad {
		return usageError("%v", err)
	}
	return err
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
			return simExit(o.command(st).Run())
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

// command is the fit rehearse sim fit runs: its profile goes to -o
// through writeOutput.
func (o simFitOptions) command(st *State) fit.Command {
	return fit.Command{
		Bundle: o.bundleDir,
		Options: fit.Options{Server: o.server, Engine: o.engine, FitConcurrencies: o.fitConcurrencies,
			Name: o.name, Description: o.description, MaxModelLen: o.maxModelLen},
		Output: o.output, Markdown: o.markdown,
		Write:  func(data []byte) error { return writeOutput(st, "sim fit: -o", o.output, data) },
		Stdout: st.Stdout, Stderr: st.Stderr,
	}
}
