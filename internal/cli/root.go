package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/rehearse/rehearse/internal/benchcmd"
	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/exitcode"
	"github.com/rehearse/rehearse/internal/provenance"
)

// State is the process state a command may touch: its streams. Libraries
// below cli never print; commands write through State.
type State struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
}

// ExitError carries a specific exit code out of a command; the packages
// that do the work return it too (exitcode.Error).
type ExitError = exitcode.Error

// Main runs the rehearse command line and returns the process exit code:
// 0 on success, 1 when the work failed (a check did not pass, a gate tripped),
// 2 for bad usage or bad input.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	st := &State{Stdin: stdin, Stdout: stdout, Stderr: stderr}
	root := newRootCmd(st)
	root.SetArgs(benchcmd.Args(args))
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	// An error may name a server's URL: never with its password.
	fmt.Fprintf(stderr, "rehearse: %s\n", config.RedactURL(err.Error()))
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return 1
}

func newRootCmd(st *State) *cobra.Command {
	root := &cobra.Command{
		Use:           "rehearse",
		Short:         "Rehearse LLM serving under load before production does",
		Long:          usage,
		Version:       Version(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("rehearse {{.Version}}\n")
	root.AddCommand(
		newDemoCmd(st),
		newRunCmd(st),
		newBenchCmd(st),
		newCapacityCmd(st),
		newSimCmd(st),
		newReportCmd(st),
		newVerifyCmd(st),
		newCompareCmd(st),
		newExportCmd(st),
		newMergeCmd(st),
		newCoordinateCmd(st),
		newK8sCmd(st),
		newAnnotateCmd(st),
		newTokensCmd(st),
		newModelCmd(st),
	)
	checkUsage(root)
	return root
}

// drivesServers names the commands that launch or drive servers. Their
// first Ctrl-C (or SIGTERM, SIGHUP) stops them gracefully: servers are
// stopped and the bundle of what finished is written; a second one kills
// the servers' process groups at once. Every other command stops at the
// first signal, and a second one ends it as Go does by default.
var drivesServers = map[string]bool{"run": true, "bench": true, "serve": true, "demo": true, "sim": true, "validate": true} // validate: sim validate's live run; serve: bench serve

// DrivesServers reports whether args name one of the commands that drive
// servers (see drivesServers), for main to choose its signal handling.
func DrivesServers(args []string) bool {
	cmd, _, err := newRootCmd(&State{}).Find(args)
	return err == nil && drivesServers[cmd.Name()]
}

// interruption turns the error of work stopped because ctx ended into
// exit status 130 with one line saying what was interrupted and why.
func interruption(ctx context.Context, what string, err error) error {
	if bundle.IsInterrupted(ctx, err) {
		return &ExitError{Code: exitInterrupted, Err: fmt.Errorf("%s: interrupted (%v)", what, context.Cause(ctx))}
	}
	return err
}

// unreadable is the exit of a command whose input bundle (or a file in
// it) cannot be read: status 2, the error's one line naming the path
// (bundle.FileError), for every command that reads bundles alike. An
// interruption or an *ExitError keeps its own status; nil stays nil.
func unreadable(err error) error {
	var ee *ExitError
	if err == nil || errors.As(err, &ee) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return &ExitError{Code: 2, Err: err}
}

// unverifiedInput prints every problem of an input bundle that does not
// verify, each line naming the bundle, and returns its error as exit 1;
// for any other error it returns nil.
func unverifiedInput(st *State, err error) error {
	var ue *bundle.UnverifiedError
	if !errors.As(err, &ue) {
		return nil
	}
	for _, p := range ue.Problems {
		fmt.Fprintf(st.Stderr, "%s: %s\n", ue.Dir, p)
	}
	return &ExitError{Code: 1, Err: err}
}

// Version describes this build for --version, from the tool record the
// bundles carry: module version, short commit, and the record's note
// (commit unknown, or uncommitted changes).
func Version() string {
	t := provenance.Tool()
	v := t.Version
	if v == "" {
		v = "(no build info)"
	}
	if t.Commit != "" {
		v += " (commit " + t.Commit[:min(len(t.Commit), 12)] + ")"
	}
	if t.Note != "" {
		v += "; " + t.Note
	}
	return v
}

// usageError marks bad flags or arguments: exit code 2.
func usageError(format string, a ...any) error {
	return exitcode.Usagef(format, a...)
}
