package cli

import (
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/golden"
)

// TestUsageErrorsExit2WithOneLine: every command's bad usage (an unknown
// command or flag, a missing or extra argument, a malformed or missing flag
// value) exits 2 with exactly one line on stderr that names it, and nothing
// on stdout. None of these reaches a command's work.
func TestUsageErrorsExit2WithOneLine(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		// The root.
		{[]string{"frobnicate"}, []string{`unknown command "frobnicate"`, "bench", "verify"}},
		{[]string{"verif", "x"}, []string{`unknown command "verif"`, "did you mean verify?"}},
		{[]string{"--frob"}, []string{"unknown flag: --frob"}},
		{[]string{"help", "frobnicate"}, []string{`help: unknown command "frobnicate"`}},
		// bench: its flags are declared in bench.go; the mechanism is the root's.
		{[]string{"bench", "--timeout", "5"}, []string{`bench: --timeout "5": want a duration such as 60s`}},
		{[]string{"bench", "--timeout"}, []string{"bench: --timeout needs a value"}},
		{[]string{"bench", "--request-rate", "abc"}, []string{`bench: --request-rate "abc": want numbers`}},
		{[]string{"bench", "--concurrency", "x"}, []string{`bench: --concurrency "x": want integers`}},
		{[]string{"bench", "--repeats", "three"}, []string{`bench: --repeats "three": want an integer`}},
		{[]string{"bench", "--include-usage=maybe"}, []string{`bench: --include-usage "maybe": want true or false`}},
		{[]string{"bench", "-o"}, []string{"bench: -o (--output) needs a value"}},
		{[]string{"bench", "--frob"}, []string{"bench: unknown flag: --frob"}},
		{[]string{"bench", "-x"}, []string{"bench: unknown shorthand flag: 'x' in -x"}},
		{[]string{"bench", "stray"}, []string{`bench: unknown command "stray"; the commands are serve`}},
		// Every other command.
		{[]string{"demo", "extra"}, []string{`demo: unexpected argument "extra"`}},
		{[]string{"demo", "--time-scale", "abc"}, []string{`demo: --time-scale "abc": want a number`}},
		{[]string{"run", "-f", "r.yaml", "extra"}, []string{`run: unexpected argument "extra"`}},
		{[]string{"run", "--frob"}, []string{"run: unknown flag: --frob"}},
		{[]string{"sim", "fut"}, []string{`sim: unknown command "fut"`, "fit"}},
		{[]string{"sim", "--port", "x"}, []string{`sim: --port "x": want an integer`}},
		{[]string{"sim", "--idle-timeout", "5"}, []string{`sim: --idle-timeout "5": want a duration`}},
		{[]string{"sim", "fit", "x"}, []string{`sim fit: unexpected argument "x"`}},
		{[]string{"sim", "fit", "--bogus"}, []string{"sim fit: unknown flag: --bogus"}},
		{[]string{"sim", "fit", "--fit-concurrencies", "1,a"}, []string{`sim fit: --fit-concurrencies "1,a": want integers`}},
		{[]string{"report"}, []string{"report takes DIR"}},
		{[]string{"report", "a", "b"}, []string{`report takes DIR; unexpected argument "b"`}},
		{[]string{"verify"}, []string{"verify takes DIR"}},
		{[]string{"verify", "a", "b"}, []string{`verify takes DIR; unexpected argument "b"`}},
		{[]string{"verify", "--frob", "x"}, []string{"verify: unknown flag: --frob"}},
		{[]string{"compare", "a"}, []string{"compare takes two bundle directories"}},
		{[]string{"compare", "a", "b", "--fail-if", "x"}, []string{`compare: --fail-if "x": gate "x" doesn't match`}},
		{[]string{"merge"}, []string{"merge takes one or more bundle DIRs"}},
		{[]string{"merge", "-o"}, []string{"merge: -o (--output) needs a value"}},
		{[]string{"annotate"}, []string{"annotate takes DIR"}},
		{[]string{"annotate", "d", "--frob"}, []string{"annotate: unknown flag: --frob"}},
		{[]string{"tokens", "extra"}, []string{`tokens: unexpected argument "extra"`}},
		{[]string{"tokens", "--frob"}, []string{"tokens: unknown flag: --frob"}},
		{[]string{"completion", "tcsh"}, []string{`completion: unknown command "tcsh"`}},
	} {
		code, stdout, stderr := run(t, c.args...)
		if code != 2 {
			t.Errorf("%q: exit %d, want 2; stderr %q", c.args, code, stderr)
		}
		if n := strings.Count(stderr, "\n"); n != 1 || !strings.HasSuffix(stderr, "\n") {
			t.Errorf("%q: stderr holds %d lines, want exactly one: %q", c.args, n, stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%q: stderr %q lacks %q", c.args, stderr, w)
			}
		}
		if stdout != "" {
			t.Errorf("%q: stdout %q, want nothing", c.args, stdout)
		}
	}
}

// TestHelpIsNotAnError: rehearse alone, --help and help COMMAND print the
// usage on stdout and exit 0.
func TestHelpIsNotAnError(t *testing.T) {
	for _, args := range [][]string{nil, {"--help"}, {"help"}, {"help", "sim", "fit"}, {"bench", "--help"}, {"sim", "fit", "-h"}} {
		code, stdout, stderr := run(t, args...)
		if code != 0 || !strings.Contains(stdout, "Usage:") || stderr != "" {
			t.Errorf("%q: exit %d, stdout %.80q, stderr %q; want 0 and the usage on stdout", args, code, stdout, stderr)
		}
	}
}

// TestHelpGolden: rehearse --help and every COMMAND --help, as a user reads
// them (go test -update rewrites testdata/help/ for review).
func TestHelpGolden(t *testing.T) {
	for _, path := range [][]string{nil, {"demo"}, {"run"}, {"bench"}, {"sim"}, {"sim", "fit"},
		{"bench", "serve"}, {"capacity"}, {"report"}, {"verify"}, {"compare"}, {"export"}, {"merge"}, {"coordinate"}, {"k8s"}, {"annotate"}, {"tokens"}, {"model", "write"}} {
		name := "rehearse"
		if len(path) > 0 {
			name = strings.Join(path, "-")
		}
		code, stdout, stderr := run(t, append(path, "--help")...)
		if code != 0 || stderr != "" {
			t.Errorf("%q --help: exit %d, stderr %q", path, code, stderr)
		}
		golden.Check(t, "help/"+name+".golden", []byte(stdout))
	}
}
