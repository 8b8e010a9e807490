package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/report"
)

func newMergeCmd(st *State) *cobra.Command {
	var out, baseline, mechanism string
	cmd := &cobra.Command{
		Use:   "merge -o DIR PART...",
		Short: "Merge the bundles of one rehearsal's parts into one bundle",
		Long: `Merge bundles that are parts of one rehearsal (for example one server per
GPU session, or one server split by concurrency) into one bundle: the parts
must share the workload (prompts, max_tokens, temperature, timeout,
endpoint, repeats) and the tokenizer; wave ids are renumbered, servers are
joined by name, server logs are concatenated part by part with a marker line,
and every aggregate is recomputed from the raw records. A part without
results.json is read from its journal.jsonl (a part that crashed).
--baseline names the speed-up denominator of the merged bundle when the parts
name different ones (a part that holds one server names that server).
--mechanism-check names the server whose mechanism check the merged bundle
reports when several parts hold one; the others are kept as waves and noted.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return usageError("merge needs -o DIR for the merged bundle")
			}
			return runMerge(st, out, baseline, mechanism, args)
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "directory of the merged bundle (created; must not exist or be empty)")
	cmd.Flags().StringVar(&mechanism, "mechanism-check", "", "server whose mechanism check to report when several parts hold one")
	cmd.Flags().StringVar(&baseline, "baseline", "", "baseline server of the merged bundle (default: the parts' own, which must then agree)")
	return cmd
}

func runMerge(st *State, out, baseline, mechanism string, parts []string) error {
	var all []*bundle.Results
	for _, dir := range parts {
		res, err := readPart(dir)
		if err != nil {
			return &ExitError{Code: 2, Err: err}
		}
		if baseline != "" {
			res.Baseline = &baseline
		}
		all = append(all, res)
	}
	merged, err := bundle.Merge(all, parts, mechanism)
	if err != nil {
		return &ExitError{Code: 2, Err: err}
	}
	if err := makeEmptyDir(out); err != nil {
		return &ExitError{Code: 2, Err: err}
	}
	for i, dir := range parts {
		for _, s := range all[i].Servers {
			if s.Log == "" {
				continue
			}
			if err := appendLog(filepath.Join(out, s.Log), filepath.Join(dir, s.Log), dir); err != nil {
				return err
			}
		}
	}
	if err := bundle.WriteResults(out, merged); err != nil {
		return err
	}
	if err := report.Write(out, merged); err != nil {
		return err
	}
	fmt.Fprintf(st.Stdout, "merged %d parts into %s: %d servers, %d waves, %d records\n", len(parts), out, len(merged.Servers), len(merged.Waves), len(merged.Records))
	return nil
}

func readPart(dir string) (*bundle.Results, error) {
	res, err := bundle.ReadResults(dir)
	if err == nil {
		return res, nil
	}
	j := filepath.Join(dir, bundle.JournalFile)
	if _, serr := os.Stat(filepath.Join(dir, bundle.ResultsFile)); errors.Is(serr, fs.ErrNotExist) {
		if _, jerr := os.Stat(j); jerr == nil {
			return bundle.ReadJournal(j)
		}
	}
	return nil, err
}

func makeEmptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return os.MkdirAll(dir, 0o755)
	case err != nil:
		return err
	case len(entries) > 0:
		return fmt.Errorf("%s: exists and is not empty", dir)
	}
	return nil
}

// appendLog appends the part's log to dst, after a marker line naming the
// part, so a server whose waves ran in several parts keeps one complete log.
func appendLog(dst, src, part string) error {
	in, err := os.Open(src)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer in.Close()
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(f, "==> rehearse merge: log of part %s follows\n", part)
	_, err = io.Copy(f, in)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
