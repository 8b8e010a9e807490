package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/rehearsal"
)

// verifyOptions is what `rehearse verify` was asked to do.
type verifyOptions struct {
	tokenizerPath string // --tokenizer
}

func newVerifyCmd(st *State) *cobra.Command {
	var o verifyOptions
	cmd := &cobra.Command{
		Use:   "verify DIR",
		Short: "Check a bundle's digests and schema, and recompute every aggregate from its raw records",
		Long: `Check a bundle: every SHA-256 in SHA256SUMS, that every file is listed, the
schema of results.json and every wave and record against the raw-record
contract (failure kinds, times in order, counts, prompt indexes), each wave's
wall time, every aggregate recomputed from the raw records by the metric
contract, every output_tokens re-counted from its text with the tokenizer the
provenance names by SHA-256 (the embedded Qwen file, --tokenizer, the file
the rehearsal read, or the model's tokenizer.json in the Hugging Face cache or
on the Hub at the recorded revision; where none has that digest verify says
so and goes on), and that journal.jsonl, where the bundle keeps
it, holds the records and waves results.json does.
Prints one line per problem, naming file, server, load and field, and
exits 1 when there is any; exits 2 when DIR is no directory it can read.`,
		Args: exactArgs(1, "DIR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return interruption(cmd.Context(), "verify "+args[0], runVerify(cmd.Context(), st, args[0], o))
		},
	}
	cmd.Flags().StringVar(&o.tokenizerPath, "tokenizer", "", "tokenizer.json to re-count output_tokens with when the bundle's is neither embedded nor in the Hugging Face cache (its SHA-256 must be the one provenance names)")
	return cmd
}

func runVerify(ctx context.Context, st *State, dir string, o verifyOptions) error {
	counter := func(p bundle.Provenance) (bundle.Counter, error) { return o.counter(ctx, p) }
	rep, err := bundle.VerifyWith(ctx, dir, bundle.Options{Tokenizer: counter})
	if err != nil {
		return unreadable(err)
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(st.Stderr, "rehearse: %s: %s\n", dir, n)
	}
	if len(rep.Problems) == 0 {
		fmt.Fprintf(st.Stdout, "%s: ok: %d files match SHA256SUMS; %d records, %d waves, %d aggregates recomputed and equal\n",
			dir, countFiles(dir), rep.Records, rep.Waves, rep.Aggregates)
		return nil
	}
	for _, p := range rep.Problems {
		fmt.Fprintf(st.Stdout, "%s\n", p)
	}
	return &ExitError{Code: 1, Err: fmt.Errorf("%s: %d problem(s)", dir, len(rep.Problems))}
}

// counter finds the tokenizer a bundle's provenance names, through the one
// resolver.
func (o verifyOptions) counter(ctx context.Context, p bundle.Provenance) (bundle.Counter, error) {
	tok, err := rehearsal.RecountTokenizer(ctx, p, o.tokenizerPath)
	if err != nil {
		return nil, fmt.Errorf("%w; pass --tokenizer PATH", err)
	}
	return tok, nil
}

func countFiles(dir string) int {
	ds, err := bundle.ReadSums(dir)
	if err != nil {
		return 0
	}
	return len(ds)
}
