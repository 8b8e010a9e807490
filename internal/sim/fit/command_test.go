package fit

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/sim/engine"
)

// TestCommandRun: rehearse sim fit's run on the committed bundle prints
// the derivation on stdout when -o is not given, and on stderr when the
// profile goes to standard output; a bundle that cannot be read or a
// server it lacks is a *UsageError.
func TestCommandRun(t *testing.T) {
	var stdout, stderr bytes.Buffer
	c := Command{Bundle: committedBundle, Options: Options{Server: "naive", Engine: engine.Serial, FitConcurrencies: []int{1, 64}},
		Stdout: &stdout, Stderr: &stderr}
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(stdout.String(), "profile naive-serial-fit (serial engine) fitted to server naive of ") ||
		!strings.Contains(stdout.String(), "; not written (pass -o FILE)\n") || stderr.Len() != 0 {
		t.Errorf("stdout %q, stderr %q", stdout.String(), stderr.String())
	}

	stdout.Reset()
	var written []byte
	c.Output, c.Markdown = bundle.StdoutPath, true
	c.Write = func(data []byte) error { written = data; return nil }
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(written, []byte(`"engine": "serial"`)) || stdout.Len() != 0 ||
		!strings.HasPrefix(stderr.String(), "Profile `naive-serial-fit` (serial engine), fitted to server `naive` of ") {
		t.Errorf("written %.80q, stdout %q, stderr %.120q", written, stdout.String(), stderr.String())
	}

	for _, bad := range []Command{
		{Bundle: "/nonexistent", Options: c.Options},
		{Bundle: committedBundle, Options: Options{Server: "x", Engine: engine.Serial, FitConcurrencies: []int{1}}},
	} {
		if err := bad.Run(); !errors.As(err, new(*UsageError)) {
			t.Errorf("%s %s: %v, want a *UsageError", bad.Bundle, bad.Server, err)
		}
	}
}
