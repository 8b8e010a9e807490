package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/report"
)

func newMergeCmd(st *State) *cobra.Command {
	var out, baseline, mechanism string
	var maxUnc time.Duration
	cmd := &cobra.Command{
		Use:   "merge -o DIR PART...",
		Short: "Merge the bundles of one rehearsal's parts into one bundle",
		Long: `Merge bundles that are parts of one rehearsal (for example one server per
GPU session, or one server split by concurrency) into one bundle: the parts
must share the workload (prompts, max_tokens, temperature, timeout,
endpoint, repeats) and the tokenizer; wave ids are renumbered, servers are
joined by name, server logs are concatenated part by part with a marker line,
and every aggregate is recomputed from the raw records. Every part must
verify (one that does not is refused with its problems listed, exit 1); a
part without results.json is read from its journal.jsonl (a part that
crashed). The same part given twice, or two parts holding the same
rehearsal (the same records), are refused: their records would count twice.
--baseline names the speed-up denominator of the merged bundle when the parts
name different ones (a part that holds one server names that server).
--mechanism-check names the server whose mechanism check the merged bundle
reports when several parts hold one; the others are kept as waves and noted.

Segments of a split plan (bundles written by rehearse run or bench with
--segment i/N, each carrying provenance.worker) are joined instead into the
bundle of the whole plan: each wave is rejoined from every worker's share of
it (records keep their global client and request indices), its per-worker
releases and their spread are kept beside the largest clock-offset
uncertainty, and every aggregate is recomputed from the raw records. Merge
refuses, naming the bundle and field, segments of different plans
(plan_digest) or counts, the same segment twice, missing segments, and a
worker whose offset uncertainty exceeds --max-offset-uncertainty.`,
		Args: minArgs(1, "one or more bundle DIRs"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return usageError("merge needs -o DIR for the merged bundle")
			}
			if maxUnc < 0 {
				return usageError("--max-offset-uncertainty %v: want 0 (no bound) or more", maxUnc)
			}
			o := bundle.MergeOptions{MechanismServer: mechanism, MaxOffsetUncertaintyS: maxUnc.Seconds()}
			return interruption(cmd.Context(), "merge into "+out, runMerge(cmd.Context(), st, out, baseline, o, args))
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "directory of the merged bundle (created; must not exist or be empty)")
	cmd.Flags().StringVar(&mechanism, "mechanism-check", "", "server whose mechanism check to report when several parts hold one")
	cmd.Flags().StringVar(&baseline, "baseline", "", "baseline server of the merged bundle (default: the parts' own, which must then agree)")
	cmd.Flags().DurationVar(&maxUnc, "max-offset-uncertainty", time.Duration(config.DefaultMaxOffsetUncertainty*float64(time.Second)), "segments only: refuse a worker whose clock-offset uncertainty exceeds this (0: no bound)")
	return cmd
}

func runMerge(ctx context.Context, st *State, out, baseline string, o bundle.MergeOptions, parts []string) error {
	// Each part is verified as its records stream past, and the merged
	// results.json is written streaming them again: no part's records
	// are held (bundle.PartSet.Merge says which merges still hold them).
	set, err := bundle.ReadPartSet(ctx, parts)
	if err != nil {
		if uerr := unverifiedInput(st, err); uerr != nil {
			return uerr
		}
		return unreadable(err)
	}
	if baseline != "" {
		for _, res := range set.Results {
			res.Baseline = &baseline
		}
	}
	merged, err := set.Merge(ctx, parts, o)
	if err != nil {
		if bundle.IsInterrupted(ctx, err) {
			return err
		}
		return &ExitError{Code: 2, Err: err}
	}
	if err := bundle.MakeEmptyDir(out); err != nil {
		return &ExitError{Code: 2, Err: err}
	}
	if err := bundle.AppendPartLogs(ctx, out, parts, set.Results); err != nil {
		if bundle.IsInterrupted(ctx, err) {
			return &ExitError{Code: exitInterrupted, Err: fmt.Errorf("merge into %s: interrupted (%v); %s holds a partial merge (logs, no results.json): remove it", out, context.Cause(ctx), out)}
		}
		var fe *bundle.FileError
		if errors.As(err, &fe) {
			return &ExitError{Code: 2, Err: err} // a part's log cannot be read
		}
		return err
	}
	// Once results.json is written the merge completes: an interruption
	// from here on would leave a bundle without its report and manifest.
	wctx := context.WithoutCancel(ctx)
	if err := merged.Write(wctx, out); err != nil {
		return err
	}
	res, known := merged.Results, []bundle.Digest(nil)
	if !merged.Held {
		// The report reads the records just written, as rehearse report
		// does: streamed once, kept lean.
		in, err := bundle.ReadReport(wctx, out)
		if err != nil {
			return err
		}
		res, known = in.Results, in.Known
	}
	if err := report.WriteKnown(wctx, out, res, known); err != nil {
		return err
	}
	fmt.Fprintf(st.Stdout, "merged %d parts into %s: %d servers, %d waves, %d records\n", len(parts), out, len(res.Servers), len(res.Waves), merged.Records)
	return nil
}
