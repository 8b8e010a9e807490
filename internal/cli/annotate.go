package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/report"
)

func newAnnotateCmd(st *State) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "annotate DIR -f NOTES.md",
		Short: "Add an operator's notes (markdown) to a bundle and re-render its report",
		Long: `Store an operator's notes in a bundle: markdown about what the figures show,
what differs from another rehearsal, and the limitations, as the seed's
report has them. The notes go into results.json (operator_notes) and appear
in README.md and report.html under "Operator notes"; the report is re-rendered
and SHA256SUMS refreshed. No raw record or aggregate changes. -f - reads the
notes from standard input; an empty file removes them.`,
		Args: exactArgs(1, "DIR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if file == "" {
				return usageError("annotate needs -f NOTES.md (or -f - for standard input)")
			}
			return interruption(cmd.Context(), "annotate "+args[0], runAnnotate(cmd.Context(), st, args[0], file))
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "markdown file with the notes (- for standard input)")
	return cmd
}

func runAnnotate(ctx context.Context, st *State, dir, file string) error {
	var notes []byte
	var err error
	if file == "-" {
		notes, err = io.ReadAll(st.Stdin)
	} else {
		notes, err = bundle.ReadNotes(ctx, file)
	}
	if err != nil {
		return &ExitError{Code: 2, Err: err}
	}
	res, err := bundle.ReadResultsContext(ctx, dir)
	if err != nil {
		return unreadable(err)
	}
	probs, err := bundle.VerifyContext(ctx, dir)
	if err != nil {
		return err
	}
	if len(probs) > 0 {
		return &ExitError{Code: 1, Err: fmt.Errorf("%s does not verify (%s); annotating it would re-make its digests over the problem", dir, probs[0])}
	}
	// From here on the bundle is being rewritten: results.json, then the
	// report and manifest over it, with no look at ctx in between.
	res.OperatorNotes = strings.TrimSpace(string(notes))
	if err := bundle.WriteResults(dir, res); err != nil {
		return err
	}
	if err := report.Write(dir, res); err != nil {
		return err
	}
	fmt.Fprintf(st.Stdout, "%s: operator notes set (%d bytes); README.md, report.html and SHA256SUMS re-made\n", dir, len(res.OperatorNotes))
	return nil
}
