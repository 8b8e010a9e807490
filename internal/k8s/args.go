package k8s

import (
	"slices"
	"strings"

	"github.com/spf13/pflag"
)

// WithFlagValue returns args with the value of the flag name replaced,
// in whichever form it was given (--name V, --name=V, -n V, -nV, -n=V,
// or a shorthand at the end of a group such as -qn V); nothing after "--"
// is touched.
func WithFlagValue(fs *pflag.FlagSet, args []string, name, value string) []string {
	flag := fs.Lookup(name)
	out := slices.Clone(args)
	for i := 1; i < len(out); i++ {
		a := out[i]
		switch {
		case a == "--":
			return out
		case a == "--"+flag.Name:
			if i+1 < len(out) {
				out[i+1] = value
				i++
			}
		case strings.HasPrefix(a, "--"+flag.Name+"="):
			out[i] = "--" + flag.Name + "=" + value
		case strings.HasPrefix(a, "--"):
			if f := fs.Lookup(strings.SplitN(a[2:], "=", 2)[0]); f != nil && f.NoOptDefVal == "" && !strings.Contains(a, "=") {
				i++ // the flag's value
			}
		case strings.HasPrefix(a, "-") && len(a) > 1:
			i += shorthandGroup(fs, out, i, flag, value)
		}
	}
	return out
}

// shorthandGroup rewrites the value of flag in the shorthand group
// args[i] and returns how many of the following arguments it consumed.
func shorthandGroup(fs *pflag.FlagSet, args []string, i int, flag *pflag.Flag, value string) int {
	a := args[i]
	for j := 1; j < len(a); j++ {
		f := fs.ShorthandLookup(a[j : j+1])
		if f == nil || f.NoOptDefVal != "" {
			continue // a boolean in the group
		}
		rest := a[j+1:]
		if f == flag {
			switch {
			case rest == "":
				if i+1 < len(args) {
					args[i+1] = value
				}
			case strings.HasPrefix(rest, "="):
				args[i] = a[:j+1] + "=" + value
			default:
				args[i] = a[:j+1] + value
			}
		}
		if rest == "" {
			return 1
		}
		return 0
	}
	return 0
}
