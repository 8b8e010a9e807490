package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/bundle/bundletest"
)

// The commands that read bundles stop when their context ends (Ctrl-C,
// SIGTERM): exit 130 with one line saying so, and the bundle as it was.
func TestBundleCommandsStopWhenInterrupted(t *testing.T) {
	a := seedBundle(t, bundletest.SeedLike())
	b := seedBundle(t, bundletest.SeedLike())
	notes := filepath.Join(t.TempDir(), "notes.md")
	os.WriteFile(notes, []byte("notes\n"), 0o644)
	vllmFile := filepath.Join(t.TempDir(), "vllm.json")
	os.WriteFile(vllmFile, []byte(`{"completed": 1, "duration": 1, "request_rate": "inf"}`), 0o644)
	before, _ := os.ReadFile(filepath.Join(a, bundle.SumsFile))
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("interrupt signal received"))
	for _, args := range [][]string{
		{"verify", a},
		{"report", a},
		{"compare", a, b},
		{"merge", "-o", filepath.Join(t.TempDir(), "m"), a, b},
		{"annotate", a, "-f", notes},
		{"compare", vllmFile, b},
		{"export", a, "--format", "csv"},
		{"export", a, "--format", "vllm", "-o", filepath.Join(t.TempDir(), "v.json")},
	} {
		var out, errb bytes.Buffer
		code := Main(ctx, args, strings.NewReader(""), &out, &errb)
		errs := errb.String()
		if code != 130 || !strings.Contains(errs, "interrupted (interrupt signal received)") || strings.Count(errs, "\n") != 1 {
			t.Errorf("%v with its context canceled: exit %d, stderr %q; want 130 and one line saying it was interrupted", args, code, errs)
		}
	}
	if after, _ := os.ReadFile(filepath.Join(a, bundle.SumsFile)); !bytes.Equal(before, after) {
		t.Error("an interrupted command changed the bundle")
	}
}
