package cli

import (
	"errors"
	"fmt"

	"github.com/rehearse/rehearse/internal/bundle"
)

// toStdout says whether an output flag's path is standard output: not
// given, or "-".
func toStdout(path string) bool { return path == "" || path == bundle.StdoutPath }

// checkOutput refuses an output file flag names before any work: exit 2
// for what is not nothing, a regular file or "-" (bundle.CheckOutput).
func checkOutput(flag, path string) error {
	if toStdout(path) {
		return nil
	}
	if err := bundle.CheckOutput(path); err != nil {
		return usageError("%s: %v", flag, err)
	}
	return nil
}

// writeOutput writes data to the output file flag names
// (bundle.WriteOutput; not given or "-" is standard output): a refusal
// exits 2, a failed write 1.
func writeOutput(st *State, flag, path string, data []byte) error {
	if toStdout(path) {
		path = bundle.StdoutPath
	}
	err := bundle.WriteOutput(path, data, st.Stdout)
	var refused *bundle.OutputError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &refused):
		return usageError("%s: %v", flag, err)
	}
	return &ExitError{Code: 1, Err: fmt.Errorf("%s: %w", flag, err)}
}
