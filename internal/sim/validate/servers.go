package validate

import (
	"slices"
	"strings"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/sim/engine"
)

// Server is a bundle's server to validate and the simulated engine it is
// fitted for.
type Server struct{ Name, Engine string }

// Servers reads the --server NAME=ENGINE flags given, or without any
// chooses every server of the bundle with the engine its launch argv
// names (--engine, as the demo's simulated servers have). A flag that is
// not NAME=serial or NAME=batching, a server the bundle lacks or one named
// twice is a *fit.UsageError.
func Servers(res *bundle.Results, flags []string) ([]Server, error) {
	var out []Server
	if len(flags) == 0 {
		for _, s := range res.Servers {
			eng := argvValue(s.LaunchArgv, "--engine")
			if eng != engine.Serial && eng != engine.Batching {
				return nil, usage("sim validate: server %s: its launch argv names no simulated engine; pass --server %s=serial or --server %s=batching", s.Name, s.Name, s.Name)
			}
			out = append(out, Server{s.Name, eng})
		}
		return out, nil
	}
	for _, f := range flags {
		name, eng, ok := strings.Cut(f, "=")
		if !ok || name == "" || (eng != engine.Serial && eng != engine.Batching) {
			return nil, usage("sim validate: --server %q: want NAME=serial or NAME=batching", f)
		}
		if !slices.Contains(res.ServerNames(), name) {
			return nil, usage("sim validate: --server %q: the bundle has no server %s (have: %s)", f, name, strings.Join(res.ServerNames(), ", "))
		}
		if slices.ContainsFunc(out, func(s Server) bool { return s.Name == name }) {
			return nil, usage("sim validate: --server %q: server %s is named twice", f, name)
		}
		out = append(out, Server{name, eng})
	}
	return out, nil
}

// argvValue reads "--flag V" or "--flag=V" from an argv ("" when absent).
func argvValue(argv []string, flag string) string {
	for i, a := range argv {
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
		if a == flag && i+1 < len(argv) {
			return argv[i+1]
		}
	}
	return ""
}
