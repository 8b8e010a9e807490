// Package benchcmd is bench's, bench serve's and capacity's command line:
// the options their flags fill, what vLLM means by each flag (vllm bench
// serve's flags mapped or refused by name, and its defaults for bench
// serve), and the rehearsal they make, run through the one runner. It also
// holds the flag options run shares with them (--slo, --segment and
// --workers, --progress and its bar). cli binds the flags (Bench.Flags)
// and calls one function; nothing here knows cobra.
package benchcmd

import (
	"io"

	"github.com/rehearse/rehearse/internal/exitcode"
)

// Env is what a command's work touches of the process: its streams, and
// cli's writing of output files.
type Env struct {
	Stdout, Stderr io.Writer
	// WriteOutput writes data to the output file flag names ("-" or ""
	// is Stdout): a refusal exits 2, a failed write 1.
	WriteOutput func(flag, path string, data []byte) error
	// CheckOutput refuses, before any work, an output file flag names
	// that is not nothing, a regular file or "-" (exit 2).
	CheckOutput func(flag, path string) error
}

// usageError marks bad flags or arguments: exit code 2.
func usageError(format string, a ...any) error {
	return exitcode.Usagef(format, a...)
}
