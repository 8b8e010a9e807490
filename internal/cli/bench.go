package cli

import (
	"github.com/spf13/cobra"

	"github.com/rehearse/rehearse/internal/benchcmd"
)

func newBenchCmd(st *State) *cobra.Command {
	cmd := benchCommand(st, false)
	cmd.AddCommand(benchCommand(st, true))
	return cmd
}

// benchCommand is rehearse bench, or, serve, rehearse bench serve: the same
// flags with the same meanings, bench serve taking vLLM's defaults for
// those not given (package benchcmd does the work).
func benchCommand(st *State, serve bool) *cobra.Command {
	o := benchcmd.New(st.env(), serve)
	cmd := &cobra.Command{
		Use:     "bench --base-url URL [flags]",
		Short:   "Drive an endpoint that is already running and write a bundle",
		Long:    benchLong,
		Example: benchExample,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.FromFlags(cmd.Flags(), benchcmd.WorkerArgs(cmd.CommandPath(), cmd.Flags())); err != nil {
				return err
			}
			return o.Run(cmd.Context(), benchcmd.CommandLine(cmd.CommandPath(), cmd.Flags()))
		},
	}
	o.Flags(cmd.Flags())
	if serve {
		serveHelp(cmd)
	}
	return cmd
}

// env is what package benchcmd's commands touch of the process: st's
// streams and the writing of output files.
func (st *State) env() benchcmd.Env {
	return benchcmd.Env{
		Stdout: st.Stdout, Stderr: st.Stderr,
		WriteOutput: func(flag, path string, data []byte) error { return writeOutput(st, flag, path, data) },
		CheckOutput: checkOutput,
	}
}

const benchLong = `Drive one OpenAI-compatible endpoint that is already running and write a
results bundle (results.json, journal.jsonl, README.md, plots, SHA256SUMS).

Closed loop (the default): for each --concurrency N, --repeats waves of N
clients released together, one streaming request each, prompts assigned
round-robin. Without --warmup-waves the first recorded wave is flagged cold.

Open loop: --request-rate R sends requests on a --arrival schedule (fixed,
poisson, or gamma with --burstiness K), reproducible with --seed, bounded by
--num-requests and/or --duration; --max-concurrency caps requests in flight
and counts those that had to wait. With --request-rate and no --concurrency,
only the open-loop waves run. --ramp-up-strategy linear|exponential, instead
of --request-rate, moves each wave's rate from --ramp-up-start-rps to
--ramp-up-end-rps over --duration (or over the time --num-requests are
expected to take), on the same --arrival schedule.

Trace replay: --dataset-name mooncake (JSONL of timestamp, input_length,
output_length, hash_ids) or azure_trace (CSV of TIMESTAMP, ContextTokens,
GeneratedTokens) with --dataset-path sends request i at the trace's i-th
time less the first (times --trace-time-scale), with a prompt of exactly its
traced input tokens and its output length as max_tokens; prompts that share
Mooncake hash_ids share the same prefix text, in blocks of
--trace-block-size tokens. --num-prompts keeps the first lines (0: all);
--num-requests and --duration bound each replay.

Sustained closed loop (vllm bench serve's --request-rate inf with
--max-concurrency C): --request-rate inf --max-concurrency C runs, per
repeat, C clients each sending its next request as soon as its last one
ended, bounded by --num-requests and/or --duration, after --warmup-requests
W requests that are sent but kept out of the figures; goodput is over the
measured window.

rehearse bench serve takes the same flags with vLLM's defaults: a vllm bench
serve command line with vllm replaced by rehearse sends what vLLM sends
(rehearse bench serve --help). Here, rehearse's defaults stand.

vllm bench serve's flags mean what they mean there (the README's table
lists every one; those with no equivalent are refused by name): given no
--num-requests or --duration, --num-prompts (1000) bounds an open-loop or
sustained run in one repeat (unless --repeats); --max-concurrency C alone is
the sustained loop (vLLM's rate is inf by default), and --request-rate inf
alone one closed wave of --num-prompts clients; --burstiness K means gamma
arrivals; --backend openai (or vllm) sends the completions API (prompt,
choices[0].text; --endpoint /v1/completions), openai-chat chat completions;
--host/--port stand for --base-url; --goodput ttft:500 tpot:50 is --slo
'ttft<=500ms,tpot<=50ms'; --percentile-metrics and --metric-percentiles
add vLLM's latency block to the summary.

Prompts: eight built-in ones, --prompts FILE, or --dataset-name with vLLM's
names: random (--num-prompts prompts of --random-input-len tokens exactly, as
--tokenizer counts them, each asking for --random-output-len; both uniform over
±--random-range-ratio, seeded with --seed; --random-prefix-len puts one common
prefix of that many tokens before each), prefix_repetition (for prefix caching:
--prefix-repetition-num-prefixes prefixes of --prefix-repetition-prefix-len
tokens, each followed by --num-prompts / num-prefixes suffixes of
--prefix-repetition-suffix-len tokens, all exact, shuffled with --seed, each
asking for --prefix-repetition-output-len), sharegpt (--dataset-path, the
first human turn, the reply's length as max_tokens), custom (a "prompt" per
line) or chat (JSONL with "messages"). --ignore-eos sends ignore_eos: true.
With --max-model-len (without it and without --model, the max_model_len that
vLLM reports on /v1/models), a prompt whose input tokens + max_tokens exceed
it is refused before any request is sent (sharegpt and chat skip it and count
it).

Multi-turn sessions (rehearse's own flags): --multi-turn makes each client go
through conversations of --dataset-name sharegpt (every human turn), chat
(every user message) or random (--max-turns turns of --random-input-len
tokens each): turn t+1 is sent after turn t's reply ended and --think-time,
carrying the history with the server's actual replies; each turn is a
request. A closed-loop client runs one session, a sustained one sessions back
to back, an open-loop arrival starts one. --max-turns caps a conversation.

Output tokens are the returned text re-tokenized with --tokenizer: a
tokenizer.json path or a model's folder, a model id whose own tokenizer.json
is wanted (ORG/NAME[@REVISION]), an embedded variant (qwen3, qwen2.5), or
"usage" for the server's own completion_tokens. By default it is the --model's
own tokenizer.json: from the Hugging Face cache, the embedded file for a
Qwen2/2.5/3 model, else downloaded from the Hub into the cache (HF_ENDPOINT,
HF_TOKEN; never when HF_HUB_OFFLINE is set). Where none of these has it, bench
stops before any request and says what to pass; a tokenizer.json it cannot
count exactly is refused by name.

A 3xx answer is the request's outcome (http_status, naming the Location), so
a redirect to another host is never credited to this one; --follow-redirects
follows it.

bench is a rehearsal of one server already running, through the same runner
as "rehearse run": the endpoint must answer GET /v1/models (or /health) within
--ready-timeout (--ready models asks for /v1/models alone, for hosted APIs
with no /health; --ready full adds /health and one tiny request), the bundle
goes to an empty or new folder, and it is verified once written. When
/v1/models answers with a model list, a --model (--served-model-name) it does
not list stops bench before any request, exit 2, naming the models it serves
(NAME:latest, as ollama lists NAME, is taken for NAME; the requests send the
name given).

Load from several workers (SPEC §10): --segment i/N runs worker i's share of
every wave (client j of a closed or sustained wave, request k of an open-loop
schedule or session k, for j or k mod N = i, each with the prompt and the
intended time it has in the whole plan) and writes its own bundle, with
provenance.worker; --coordinator URL (rehearse coordinate) releases each wave
on every worker at one instant and measures this worker's clock offset;
--start-at releases the first wave at an RFC 3339 instant (without a
coordinator, only a plan of one wave can be split); --segment auto/N takes i
from $REHEARSE_SEGMENT_INDEX. rehearse merge joins the segments exactly.
--workers N runs the N segments here, as processes of this binary with a
coordinator of their own, merges them into -o DIR (the segments stay in
DIR.workers) and verifies the merge; Ctrl-C stops every worker and merges
what they recorded.

The API key is read from the environment variable named by --api-key-env and
is never written anywhere. Ctrl-C stops cleanly: requests in flight end as
canceled, and the bundle of what finished is written.`

const benchExample = `  rehearse bench --base-url http://127.0.0.1:8000 --model Qwen/Qwen2.5-1.5B-Instruct
  rehearse bench --base-url http://127.0.0.1:8000 --concurrency 1,8 --repeats 2 -o out
  rehearse bench --base-url http://127.0.0.1:8000 --request-rate 4 --arrival gamma --burstiness 0.5 --duration 60s
  rehearse bench --base-url http://127.0.0.1:8000 --ramp-up-strategy linear --ramp-up-start-rps 1 --ramp-up-end-rps 20 --duration 60s
  rehearse bench --base-url http://127.0.0.1:8000 --dataset-name mooncake --dataset-path mooncake_trace.jsonl --num-prompts 0 --trace-time-scale 0.5
  rehearse bench --base-url http://127.0.0.1:8000 --request-rate inf --max-concurrency 64 --num-requests 2000 --warmup-requests 64
  rehearse bench --base-url http://127.0.0.1:8000 --request-rate inf --max-concurrency 16 --slo 'ttft<=500ms,tpot<=50ms' --attainment 0.9
  rehearse bench --base-url https://api.example.com --api-key-env API_KEY --extra-body '{"ignore_eos":true}'`

// endpointFlags are the flags of bench and capacity alike: the endpoint,

func serveHelp(cmd *cobra.Command) {
	cmd.Use = "serve [flags]"
	cmd.Short = "vllm bench serve's command line, with vLLM's defaults, through rehearse"
	cmd.Long = `A vllm bench serve command line with vllm replaced by rehearse: the same
requests as vLLM main sends them (count, API, body, arrivals), vLLM's result
file (--save-result) and its "Serving Benchmark Result" block on stdout, and a
verified bundle beside them. Every flag has vLLM's meaning and vLLM's default
(rehearse bench keeps rehearse's own); a flag rehearse cannot honour is refused
by name, with what to use, before any request (the README's table lists each).

vLLM's defaults: --backend openai (the completions API, /v1/completions),
--dataset-name random (1024 tokens in, 128 out, ignore_eos on), --num-prompts
1000, --request-rate inf (every request at time 0; with --max-concurrency C at
most C in flight), --burstiness 1 (a finite rate draws Poisson arrivals,
rescaled so the last request goes at num-prompts/rate, as vLLM does), no
temperature unless --temperature, sampling fields only when given, one run,
an x-request-id of --request-id-prefix (bench-<random>-) and the prompt's
index on each request, OPENAI_API_KEY as the bearer token when it is set, a
request timeout of 6 hours.

The bundle goes to -o DIR (default rehearse-bench-<UTC time>); --save-result
writes vLLM's file in the working folder (or --result-dir) under vLLM's name.
The defaults below are vLLM's where vLLM has the flag.`
	benchcmd.ShowServeDefaults(cmd.Flags())
	cmd.Example = `  rehearse bench serve --backend vllm --model NousResearch/Hermes-3-Llama-3.1-8B --endpoint /v1/completions \
      --dataset-name sharegpt --dataset-path ShareGPT_V3_unfiltered_cleaned_split.json --num-prompts 10
  rehearse bench serve --model Qwen/Qwen2.5-1.5B-Instruct --random-input-len 512 --random-output-len 128 \
      --request-rate 5 --max-concurrency 16 --num-prompts 200 --save-result --label mylabel --metadata gpu=h100 tp=1`
}
