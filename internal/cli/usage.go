package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// checkUsage makes every usage error of root and of every command below it
// exit 2 with one line naming the command and the flag, value or argument:
// a flag error (unknown flag, missing or malformed value) through root's
// flag error function, which every command inherits unless it sets its own;
// an unknown command, or an argument a command does not take, through its
// Args validator, wrapped here once for the whole tree. A command's own
// validator keeps its message; cobra's are reworded to one line.
func checkUsage(root *cobra.Command) {
	root.SetFlagErrorFunc(flagError)
	root.SetHelpCommand(newHelpCmd())
	// The completion command is otherwise added at Execute, after the
	// walk below.
	root.InitDefaultCompletionCmd()
	// cobra checks a command with subcommands for an unknown one only when
	// it has no Args validator, and says so over several lines; and it
	// validates the arguments only of a runnable command: one that only
	// groups others prints its help once its arguments are checked.
	root.Args = subcommandArgs
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if !c.Runnable() && c.HasSubCommands() {
			c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
			if c.Args == nil {
				c.Args = subcommandArgs
			}
		}
		c.Args = usageArgs(c.Args)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// usageArgs wraps a command's Args validator so that its error, if not
// already an exit code, exits 2.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		var err error
		switch {
		case check == nil:
			return nil
		case cmd.HasAvailableSubCommands():
			// An argument a command with subcommands refuses names an
			// unknown one.
			if err = check(cmd, args); err != nil && len(args) > 0 {
				err = subcommandArgs(cmd, args)
			}
		default:
			if err = check(cmd, args); err != nil && len(args) > 0 && check(cmd, nil) == nil {
				// It takes no arguments: cobra.NoArgs would say "unknown
				// command" of a command that has none.
				err = usageError("%s: unexpected argument %q: it takes none (see %s --help)", where(cmd), args[0], cmd.CommandPath())
			}
		}
		if err == nil {
			return nil
		}
		var ee *ExitError
		if errors.As(err, &ee) {
			return err
		}
		return usageError("%s: %v (see %s --help)", where(cmd), err, cmd.CommandPath())
	}
}

// exactArgs is cobra.ExactArgs with an error that names what is expected
// and the first argument too many.
func exactArgs(n int, names string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) > n:
			return usageError("%s takes %s; unexpected argument %q (see %s --help)", where(cmd), names, args[n], cmd.CommandPath())
		case len(args) < n:
			return usageError("%s takes %s (got %d argument(s); see %s --help)", where(cmd), names, len(args), cmd.CommandPath())
		}
		return nil
	}
}

// minArgs is cobra.MinimumNArgs with an error that names what is expected.
func minArgs(n int, names string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < n {
			return usageError("%s takes %s (got %d argument(s); see %s --help)", where(cmd), names, len(args), cmd.CommandPath())
		}
		return nil
	}
}

// subcommandArgs refuses any argument of a command that holds
// subcommands: it names the unknown one and the commands there are.
func subcommandArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	var names []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
		}
	}
	msg := fmt.Sprintf("unknown command %q", args[0])
	if w := where(cmd); w != "" {
		msg = w + ": " + msg
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += fmt.Sprintf(" (did you mean %s?)", s[0])
	}
	return usageError("%s; the commands are %s (see %s --help)", msg, strings.Join(names, ", "), cmd.CommandPath())
}

// flagError rewords a flag parsing error as one line that names the
// command, the flag and the value, and what the flag wants.
func flagError(cmd *cobra.Command, err error) error {
	var (
		notExist *pflag.NotExistError
		required *pflag.ValueRequiredError
		invalid  *pflag.InvalidValueError
	)
	msg := err.Error()
	switch {
	case errors.As(err, &notExist):
		// The message keeps pflag's wording: "unknown flag: --frob".
	case errors.As(err, &required):
		msg = fmt.Sprintf("%s needs a value", flagName(required.GetFlag()))
		if short := required.GetSpecifiedShortnames(); short != "" {
			msg = fmt.Sprintf("-%s (%s) needs a value", short, flagName(required.GetFlag()))
		}
		if want := wantedForm(required.GetFlag()); want != "" {
			msg += ": " + want
		}
	case errors.As(err, &invalid):
		f := invalid.GetFlag()
		msg = fmt.Sprintf("%s %q: ", flagName(f), invalid.GetValue())
		if want := wantedForm(f); want != "" {
			msg += want
		} else {
			msg += errors.Unwrap(invalid).Error()
		}
	}
	if w := where(cmd); w != "" {
		msg = w + ": " + msg
	}
	return usageError("%s (see %s --help)", msg, cmd.CommandPath())
}

// wantedForm says what a flag of a built-in type accepts; "" for a flag
// of its own type, whose parse error says it.
func wantedForm(f *pflag.Flag) string {
	if f == nil {
		return ""
	}
	switch f.Value.Type() {
	case "duration":
		return "want a duration such as 60s, 1m30s or 500ms"
	case "int", "int8", "int16", "int32", "int64":
		return "want an integer"
	case "uint", "uint8", "uint16", "uint32", "uint64":
		return "want a non-negative integer"
	case "float32", "float64":
		return "want a number"
	case "intSlice", "int32Slice", "int64Slice":
		return "want integers separated by commas, such as 1,8,32"
	case "float32Slice", "float64Slice":
		return "want numbers separated by commas, such as 0.5,2"
	case "durationSlice":
		return "want durations separated by commas, such as 1s,500ms"
	case "bool":
		return "want true or false"
	}
	return ""
}

func flagName(f *pflag.Flag) string {
	if f == nil {
		return "a flag"
	}
	return "--" + f.Name
}

// where names a command in an error line that Main prefixes with
// "rehearse: ": its path below the root, "" for the root.
func where(cmd *cobra.Command) string {
	if !cmd.HasParent() {
		return ""
	}
	_, path, _ := strings.Cut(cmd.CommandPath(), " ")
	return path
}

// newHelpCmd is "rehearse help [COMMAND]": cobra's own prints the root's
// usage and exits 0 for a command that does not exist.
func newHelpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "help [COMMAND]",
		Short: "Help about any command",
		Args:  cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := c.Root().Find(args)
			if err != nil || len(rest) > 0 {
				return usageError("help: unknown command %q (see %s --help)", strings.Join(args, " "), c.Root().CommandPath())
			}
			cmd.InitDefaultHelpFlag()
			cmd.InitDefaultVersionFlag()
			return cmd.Help()
		},
	}
}
