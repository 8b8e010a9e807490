package cli

import (
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/sim/fit"
	"github.com/rehearse/rehearse/internal/sim/validate"
)

type simValidateOptions struct {
	bundleDir   string
	holdBundle  string
	fitOn       string
	holdOut     string
	servers     []string
	output      string
	liveBundle  string
	noLive      bool
	timeScale   float64
	maxModelLen int
	asJSON      bool
	markdown    bool
	fitJitter   bool
}

func newSimValidateCmd(st *State) *cobra.Command {
	var o simValidateOptions
	cmd := &cobra.Command{
		Use:   "validate BUNDLE --fit-on LOADS --hold-out LOADS",
		Short: "Fit a simulator profile on some loads of a bundle and tabulate its error on the others, predicted and live",
		Long: `Fit a simulator profile (as rehearse sim fit does) to each server of a
results bundle on the loads --fit-on, then predict the loads --hold-out and
tabulate, for every held-out load, the error of each metric against the
bundle's records: goodput, request throughput, E2E, TPOT, ITL p50 and p95,
TTFT p50 and p95. Error = (predicted − measured) ÷ measured.

The table has two sources: the predictor (the engine stepped on a virtual
clock) and a live run: the held-out waves of the bundle's workload sent by
the one runner (as rehearse run does) to "rehearse sim" launched with the
fitted profile. Both count output tokens as the tokens generated (the
server's usage), on the bundle's side too: random-weight text re-tokenizes
to about 6 % more tokens than were generated, an artifact of the text that
the engine model does not reproduce.

TTFT under 50 ms is judged by its absolute error (request handling and host
noise); above it, where queueing dominates, by its relative error. The goal
metrics, goodput, E2E and TPOT, are marked against ±10 %.

LOADS are comma-separated concurrencies (1,64), open-loop rates (2rps),
open-loop shapes (ramp: every ramp-up wave; trace: every trace replay) or
whole modes (closed, sustained, open: every load of the mode). The fit
reads the --fit-on loads of BUNDLE, of any mode: closed waves by their
concurrency, sustained and open-loop loads by their measured decode
occupancy, prefill and context costs where the lowest load's prompt and
output lengths vary (rehearse sim fit's derivation says what each number
came from). A held-out load is predicted as the bundle ran it: a closed
wave wave by wave, a sustained load with the bundle's warm-up and measured
requests and duration, an open-loop wave at its own rate or ramp, arrival
process and seed, or its traced arrivals (no max_concurrency); every
prompt with its own prompt tokens and max_tokens; each aggregated by the
contract as the bundle's are, goodput over each mode's window. One
rehearsal runs its concurrencies either as closed waves or as sustained
loops, so fit and hold-out may come from two bundles of the same servers:
BUNDLE is the one fitted on, --hold-out-bundle DIR the one held out (one
of each; the fit does not pool bundles). The live run sends one kind of
open-loop load (rates, a ramp, or a trace replay, which it reads again from
the bundle's trace file); mixing them needs --no-live.

--fit-jitter also fits a seeded step jitter from the lowest fitted load's
inter-token spread (default: none, every step costs exactly its model).

--server NAME=ENGINE picks a server and its simulated engine (repeatable);
by default every server of the bundle, each with the engine its launch argv
names (--engine, as the demo's simulated servers have). The table is printed
(--json: one JSON row per held-out load, metric and source; --markdown) and
written as JSON to -o (default sim-validate.json). Nothing is written into
the bundle.`,
		Example: `  rehearse sim validate rehearsals/h200-qwen2.5-1.5b --fit-on 1,64 --hold-out 8,32 \
    --server naive=serial --server batching=batching
  rehearse sim validate /tmp/demo --fit-on 1,64 --hold-out 8,32 --time-scale 10 --json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError("sim validate: want one BUNDLE folder, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.bundleDir = args[0]
			vo, err := o.options(st)
			if err != nil {
				return err
			}
			return simExit(validate.Run(cmd.Context(), vo))
		},
	}
	simValidateFlags(cmd.Flags(), &o)
	return cmd
}

// simValidateFlags binds the flags of rehearse sim validate.
func simValidateFlags(f *pflag.FlagSet, o *simValidateOptions) {
	f.StringVar(&o.fitOn, "fit-on", "", "loads the fit reads: concurrencies such as 1,64, rates such as 2rps, ramp, trace, or closed, sustained, open")
	f.StringVar(&o.holdOut, "hold-out", "", "loads predicted and judged: concurrencies such as 8,32, rates such as 2rps, ramp, trace, or closed, sustained, open")
	f.BoolVar(&o.fitJitter, "fit-jitter", false, "also fit a seeded step jitter from the inter-token spread")
	f.StringVar(&o.holdBundle, "hold-out-bundle", "", "read the held-out loads from this bundle of the same servers (default: BUNDLE)")
	f.StringArrayVar(&o.servers, "server", nil, "NAME=ENGINE (serial or batching), repeatable (default: every server, the engine from its launch argv)")
	f.StringVarP(&o.output, "output", "o", "sim-validate.json", "write the error table as JSON to this file (-: standard output, the table then on stderr)")
	f.StringVar(&o.liveBundle, "live-bundle", "", "keep the live run's bundle in this folder (default: a temporary one, removed)")
	f.BoolVar(&o.noLive, "no-live", false, "predict only: no live simulator run")
	f.Float64Var(&o.timeScale, "time-scale", 1, "the live simulator's time runs K times faster than the wall clock")
	f.IntVar(&o.maxModelLen, "max-model-len", 32768, "max_model_len of the fitted profiles")
	f.BoolVar(&o.asJSON, "json", false, "print the table as JSON rows")
	f.BoolVar(&o.markdown, "markdown", false, "print the table as markdown")
}

// validate refuses flags that do not go together or are out of range, and
// an -o that is not nothing, a regular file or "-", before any work.
func (o simValidateOptions) validate() error {
	switch {
	case o.asJSON && o.markdown:
		return usageError("sim validate: --json and --markdown: pick one")
	case !(o.timeScale > 0) || o.timeScale > 1e6:
		return usageError("sim validate: --time-scale %g: want a number above 0 (and at most 1e6)", o.timeScale)
	case o.maxModelLen < 1:
		return usageError("sim validate: --max-model-len %d: want >= 1", o.maxModelLen)
	case o.output == "":
		return usageError("sim validate: -o is empty: name the JSON file to write")
	case o.asJSON && o.output == bundle.StdoutPath:
		return usageError("sim validate: --json and -o -: both write JSON to standard output; pick one")
	}
	return checkOutput("sim validate: -o", o.output)
}

// options parses the loads and checks the flags, and builds the
// validation's options: the table goes to -o through writeOutput, the live
// run through the one runner (rehearse) as rehearse run's does.
func (o simValidateOptions) options(st *State) (validate.Options, error) {
	fitOn, err := fit.ParseLoads(o.fitOn)
	if err != nil {
		return validate.Options{}, usageError("sim validate: --fit-on %q: %v", o.fitOn, err)
	}
	holdOut, err := fit.ParseLoads(o.holdOut)
	if err != nil {
		return validate.Options{}, usageError("sim validate: --hold-out %q: %v", o.holdOut, err)
	}
	if err := o.validate(); err != nil {
		return validate.Options{}, err
	}
	return validate.Options{
		Bundle: o.bundleDir, HoldBundle: o.holdBundle, FitOn: o.fitOn, HoldOut: o.holdOut,
		FitLoads: fitOn, HoldLoads: holdOut, Servers: o.servers, Output: o.output,
		Write:      func(data []byte) error { return writeOutput(st, "sim validate: -o", o.output, data) },
		LiveBundle: o.liveBundle, NoLive: o.noLive, TimeScale: o.timeScale, MaxModelLen: o.maxModelLen,
		JSON: o.asJSON, Markdown: o.markdown, Jitter: o.fitJitter,
		Stdout: st.Stdout, Stderr: st.Stderr,
	}, nil
}
