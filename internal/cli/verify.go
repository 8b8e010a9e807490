package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rehearse/rehearse/internal/bundle"
)

func newVerifyCmd(st *State) *cobra.Command {
	return &cobra.Command{
		Use:   "verify DIR",
		Short: "Check a bundle's digests and schema, and recompute every aggregate from its raw records",
		Long: `Check a bundle: every SHA-256 in SHA256SUMS, that every file is listed, the
schema and the fields of every record in results.json, each wave's wall time,
and every aggregate recomputed from the raw records by the metric contract.
Prints one line per problem, naming file, server, concurrency and field, and
exits 1 when there is any.`,
		Args: exactArgs(1, "DIR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return interruption(cmd.Context(), "verify "+args[0], runVerify(cmd.Context(), st, args[0]))
		},
	}
}

func runVerify(ctx context.Context, st *State, dir string) error {
	probs, err := bundle.VerifyContext(ctx, dir)
	if err != nil {
		return err
	}
	if len(probs) == 0 {
		res, err := bundle.ReadResultsContext(ctx, dir)
		if err != nil {
			return err
		}
		fmt.Fprintf(st.Stdout, "%s: ok: %d files match SHA256SUMS; %d records, %d waves, %d aggregates recomputed and equal\n",
			dir, countFiles(dir), len(res.Records), len(res.Waves), len(res.Aggregates))
		return nil
	}
	for _, p := range probs {
		fmt.Fprintf(st.Stdout, "%s\n", p)
	}
	return &ExitError{Code: 1, Err: fmt.Errorf("%s: %d problem(s)", dir, len(probs))}
}

func countFiles(dir string) int {
	ds, err := bundle.ReadSums(dir)
	if err != nil {
		return 0
	}
	return len(ds)
}
