// Package exitcode carries a process exit status out of the packages that
// do a command's work, to cli.Main: 1 the work failed, 2 bad usage or bad
// input, 130 interrupted. An error that carries none exits 1.
package exitcode

import "fmt"

// Exit statuses other than 0 and 1.
const (
	// Usage is bad usage or bad input: a flag, a file, a value.
	Usage = 2
	// Interrupted is the status after Ctrl-C (128 + SIGINT).
	Interrupted = 130
)

// Error carries a specific exit code out of a command.
type Error struct {
	Code int
	Err  error
}

// Error is the wrapped error's text.
func (e *Error) Error() string { return e.Err.Error() }

// Unwrap returns the error the exit code was given to.
func (e *Error) Unwrap() error { return e.Err }

// Usagef is bad usage or bad input (exit 2): one line naming the file,
// field, flag or value.
func Usagef(format string, a ...any) error {
	return &Error{Code: Usage, Err: fmt.Errorf(format, a...)}
}
