package cli

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/report"
)

func newReportCmd(st *State) *cobra.Command {
	return &cobra.Command{
		Use:   "report DIR",
		Short: "Re-render a bundle's README.md, figures and report.html from its results.json",
		Long: `Re-render a bundle's report from results.json alone: the aggregates are
recomputed from the raw records first (so the report can never show a figure
the records do not support), then README.md, the SVG figures and report.html
are written and SHA256SUMS is refreshed for them. Every other file keeps the
digest SHA256SUMS lists for it, so a file changed since it was listed is named
and stays flagged by verify: a re-render never re-signs a bundle. results.json
itself is never changed, except in a bundle whose rehearsal crashed before
writing it: then it is rebuilt from journal.jsonl (every request that finished
is there).`,
		Args: exactArgs(1, "DIR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return interruption(cmd.Context(), "report "+args[0], runReport(cmd.Context(), st, args[0]))
		},
	}
}

func runReport(ctx context.Context, st *State, dir string) error {
	// results.json is streamed once, its records kept lean, its
	// aggregates computed once (bundle.ReadReport); a rehearsal that
	// crashed before writing it left its journal: results.json is then
	// rebuilt from it, and the records held.
	in, err := bundle.ReadReport(ctx, dir)
	if err != nil {
		return unreadable(err)
	}
	// The digests SHA256SUMS lists are kept for every file report does
	// not write, so a re-render never re-signs a file changed since; it is
	// read before anything is written.
	listed, err := bundle.ListedDigests(ctx, dir)
	if err != nil {
		return &ExitError{Code: 2, Err: fmt.Errorf("%w (report keeps the digests SHA256SUMS lists; see rehearse verify %s)", err, dir)}
	}
	known := keptDigests(st, dir, listed, in.Known, in.FromJournal)
	res, disagree := in.Results, in.Disagree
	if in.FromJournal {
		res.Notes = append(res.Notes, "results.json was rebuilt from journal.jsonl by rehearse report (the rehearsal stopped before writing it).")
		if err := bundle.WriteResults(dir, res); err != nil {
			return err
		}
		cut := 0
		for _, w := range res.Waves {
			if bundle.IsCut(w) {
				cut++
			}
		}
		var cutNote string
		if cut > 0 {
			cutNote = fmt.Sprintf("; %d wave(s) cut by the journal's end, marked stopped", cut)
		}
		fmt.Fprintf(st.Stderr, "rehearse: %s: results.json rebuilt from %s (%d records%s)\n", dir, bundle.JournalFile, len(res.Records), cutNote)
	}
	if !in.Lean {
		disagree = len(bundle.VerifyResults(res))
	}
	if disagree > 0 {
		fmt.Fprintf(st.Stderr, "rehearse: %s: %d stored figures disagree with the raw records; the report shows the recomputed ones and `rehearse verify` will fail until results.json is rebuilt\n", dir, disagree)
	}
	if !in.Lean {
		res.Recompute() // ReadReport recomputed the streamed ones
	}
	if err := report.WriteKnown(ctx, dir, res, known); err != nil {
		return err
	}
	fmt.Fprintf(st.Stdout, "wrote %s and refreshed %s\n", filepath.Join(dir, bundle.ReadmeFile), filepath.Join(dir, bundle.SumsFile))
	return nil
}

// keptDigests is what report lists in SHA256SUMS for the files it does not
// write: the digest listed before, where there is one (the figures, README
// and page it writes are hashed anew by report.WriteKnown), else the one
// hashed as the file was read. results.json rebuilt from the journal is
// report's own. A file read with a digest other than the one listed is
// named on stderr: verify goes on saying so.
func keptDigests(st *State, dir string, listed, read []bundle.Digest, fromJournal bool) []bundle.Digest {
	was := make(map[string]string, len(listed))
	for _, d := range listed {
		was[d.File] = d.SHA256
	}
	var out []bundle.Digest
	for _, d := range read {
		if sum, ok := was[d.File]; ok && !(fromJournal && d.File == bundle.ResultsFile) {
			if sum != d.SHA256 {
				fmt.Fprintf(st.Stderr, "rehearse: %s: %s does not match SHA256SUMS (changed since it was listed); its listed digest is kept, so `rehearse verify` goes on reporting it\n", dir, d.File)
			}
			d.SHA256 = sum
		}
		out = append(out, d)
		delete(was, d.File)
	}
	if fromJournal {
		delete(was, bundle.ResultsFile)
	}
	for _, d := range listed {
		if _, ok := was[d.File]; ok {
			out = append(out, d)
		}
	}
	return out
}
