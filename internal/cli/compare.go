package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rehearse/rehearse/internal/compare"
)

func newCompareCmd(st *State) *cobra.Command {
	var o compare.Options
	var gates compare.GateList
	cmd := &cobra.Command{
		Use:   "compare A B [--fail-if GATE]... [--markdown]",
		Short: "Put two bundles side by side, with gates for CI",
		Long: wrapHelp(`Compare bundle B against bundle A: for every server and load present in both, goodput medians with their [min–max] ranges, p95 TTFT and failure rates side by side, with B ÷ A ratios, and for every server whose capacity was searched in both (rehearse capacity, or capacity: in a rehearsal file), its capacity under the SLO side by side with B ÷ A. `+compare.Rule) + `

` + wrapHelp(`--fail-if GATE trips when the change from A to B of a metric lies beyond a threshold, on any server and load present in both bundles; the command then exits 1. A gate is `+compare.GateForm+`. Metrics: `+strings.Join(compare.GateMetricNames(), ", ")+`.`) + `
Examples:
  --fail-if 'goodput<-5%'          median goodput fell by more than 5%
  --fail-if 'ttft_p95>+10%'        p95 TTFT grew by more than 10%
  --fail-if 'failure_rate>+0.05'   failure rate rose by more than 5 points
  --fail-if 'vllm:e2e_p95>+500ms'  only server vllm, absolute change
  --fail-if 'attainment<-2pp'      SLO attainment fell by more than 2 points
                                   (bundles written with --slo or slo:)
  --fail-if 'capacity<-10%'        a server's capacity under the SLO (max_pass)
                                   fell by more than 10% (capacity bundles)

Both bundles must verify (digests and every aggregate, as rehearse verify
checks them): one that does not is refused with its problems listed.

Either side may be a vLLM result JSON instead of a bundle (a file, not a
folder: vllm bench serve --save-result's, several one per line, or rehearse
export --format vllm's). Its loads are keyed as rehearse's (a finite
--request-rate is the open loop at that rate; inf with --max-concurrency C
is a closed wave of C clients when it sent at most C prompts, the sustained
loop at C otherwise); it names no server, so each load stands against every
server of the other side. What it lacks (a repeat range, a percentile its
--metric-percentiles did not ask for, SLO figures) shows as —, and a gate on
it is not evaluated there.

Exit status: 0 when every gate passed, 1 when one tripped (or tested
nothing) or a bundle does not verify, 2 for bad usage or a bundle that
cannot be read.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usageError("compare takes two bundle directories, A and B (got %d arguments)", len(args))
			}
			o.A, o.B, o.Gates = args[0], args[1], gates
			return interruption(cmd.Context(), "compare", runCompare(cmd.Context(), st, o))
		},
	}
	cmd.Flags().Var(&gates, "fail-if", "a gate such as 'goodput<-5%' (repeatable); exit 1 when one trips")
	cmd.Flags().BoolVar(&o.Markdown, "markdown", false, "write the comparison as a markdown table")
	return cmd
}

func runCompare(ctx context.Context, st *State, o compare.Options) error {
	if err := o.Validate(); err != nil {
		return usageError("%v", err)
	}
	r, err := compare.Run(ctx, o, st.Stdout)
	if err != nil {
		if uerr := unverifiedInput(st, err); uerr != nil {
			return uerr
		}
		return unreadable(err)
	}
	if tripped := r.Tripped(); len(tripped) > 0 {
		return &ExitError{Code: 1, Err: fmt.Errorf("%d gate check(s) tripped:\n  %s", len(tripped), strings.Join(tripped, "\n  "))}
	}
	return nil
}

// wrapHelp breaks text into lines of at most 76 columns at spaces, for help text.
func wrapHelp(text string) string {
	var b strings.Builder
	col := 0
	for _, word := range strings.Fields(text) {
		n := len([]rune(word))
		if col > 0 && col+1+n > 76 {
			b.WriteByte('\n')
			col = 0
		} else if col > 0 {
			b.WriteByte(' ')
			col++
		}
		b.WriteString(word)
		col += n
	}
	return b.String()
}
