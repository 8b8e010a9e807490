package cli

import (
	"github.com/spf13/cobra"

	"github.com/rehearse/rehearse/internal/benchcmd"
)

func newCapacityCmd(st *State) *cobra.Command {
	o := benchcmd.NewCapacity(st.env())
	cmd := &cobra.Command{
		Use:   "capacity --base-url URL --slo OBJECTIVES [flags]",
		Short: "Search how much load an endpoint carries under an SLO and write a bundle",
		Long: `Search the capacity of one OpenAI-compatible endpoint that is already
running: the largest number C of clients of the sustained closed loop (each
sending its next request as its last one ends) at which at least
--attainment of requests meet every --slo objective (SPEC §8).

Each probe at C sends --warmup-requests requests (default two rounds, 2·C,
before the first probe and one round, C, before each later one) kept out of
the figures, then measures, C requests always in flight, until the 95 %
Wilson interval of attainment over its first k requests sent lies wholly on
one side of the target (pass or fail): it looks at k =
max(min-requests, 4·C)·2^j (four rounds of the loop at least) once the
first k sent have all ended, and those k are its verdict's population,
whichever ended first; the requests still in flight land, recorded outside
it (after_verdict). --min-requests defaults to the fewest requests whose
interval can pass --attainment (73 at 0.95). At --max-requests (or
--max-duration) it is unresolved: it ends the bracket above and never
counts as a pass. The search doubles C until a probe fails, screening each
load below --max-concurrency with one round of at least 16 requests (a
screen can fail a load, never pass it), from the first load where that is
at most two rounds (8 from --start 1; --no-screen: full probes from
--start). After the first fail it probes where the line through the
margins of the bracket's ends crosses 1 (a probe's margin: the
attainment-quantile of each request's value over its limit), then bisects
until min_fail − max_pass ≤ max(1, 5 % of max_pass), probing a screened end
in full once the bracket has converged on it; then it re-runs the final
pass and fail points --repeats times and flags a non-monotonic answer. --predicted MAX_PASS,MIN_FAIL probes a
predicted bracket first; --predict-from PROFILE predicts that bracket from
a simulator profile (a built-in name, or a JSON file "rehearse sim fit"
wrote from a bundle of this server) before any request: the same search
over the profile's engine on a virtual clock, each probe's predicted
attainment taken as a point estimate.

Every probe is an ordinary sustained wave of ordinary records in the
journal, so a search stopped midway is bundled with every finished probe,
and "rehearse verify" replays the search from the records: each verdict,
interval, stop and the bracket. The command exits 1 when the server failed
during a probe or answered every request of one with an error, 130 when
interrupted. Prompts, the request and readiness take bench's
flags.`,
		Example: `  rehearse capacity --base-url http://127.0.0.1:8000 --slo 'ttft<=500ms,tpot<=50ms'
  rehearse capacity --base-url http://127.0.0.1:8000 --slo 'ttft<=2s' --attainment 0.9 --min-requests 200 --max-concurrency 256 -o cap
  rehearse capacity --base-url http://127.0.0.1:8000 --slo 'e2el<=10s' --dataset-name random --random-input-len 1024 --random-output-len 128`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.FromFlags(cmd.Flags())
			return o.Run(cmd.Context(), benchcmd.CommandLine(cmd.CommandPath(), cmd.Flags()))
		},
	}
	o.Flags(cmd.Flags())
	return cmd
}
