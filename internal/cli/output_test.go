//go:build unix

package cli

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle/bundletest"
)

// outputTargets makes, in a new folder, one of each thing an output file
// must not be written over: a symbolic link to a regular file (which must
// stay as it is), one to /proc/self/fd/1, a named pipe, a socket and a
// folder. It returns the folder and the targets' paths by what they are.
func outputTargets(t *testing.T) (string, map[string]string) {
	t.Helper()
	dir := t.TempDir()
	at := func(name string) string { return filepath.Join(dir, name) }
	if err := os.WriteFile(at("kept.json"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	targets := map[string]string{
		"a symbolic link (to " + at("kept.json") + ")": at("link"),
		"a symbolic link (to /proc/self/fd/1)":         at("stdout"),
		"a named pipe":                                 at("fifo"),
		"a socket":                                     at("socket"),
		"a directory":                                  at("folder"),
	}
	os.Symlink(at("kept.json"), at("link"))
	os.Symlink("/proc/self/fd/1", at("stdout"))
	os.Mkdir(at("folder"), 0o755)
	if err := syscall.Mkfifo(at("fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A reader, so that a command that opened the pipe to write would not
	// block there but finish, and fail the test.
	reader, err := os.OpenFile(at("fifo"), os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reader.Close() })
	l, err := net.Listen("unix", at("socket"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return dir, targets
}

// Issue 28 row 3: every command that writes an output file a user names
// (export -o, k8s -o, sim fit -o, sim validate -o, bench
// --result-filename) refuses, by name, in one line with exit 2 and before
// anything is written, a target that is not nothing or a regular file; the
// target is left as it was.
func TestOutputFilesAreNeverRenamedOverWhatIsNotARegularFile(t *testing.T) {
	bdir := seedBundle(t, bundletest.SeedLike())
	h200, _ := filepath.Abs(h200Bundle)
	k8sFile := writeK8sFile(t, k8sRehearsal)
	t.Setenv("REHEARSE_K8S_KEY", "sk")
	commands := map[string]func(out string) []string{
		"export": func(out string) []string { return []string{"export", bdir, "--format", "csv", "-o", out} },
		"k8s": func(out string) []string {
			return []string{"k8s", "--workers", "2", "--image", "img", "-o", out, "run", "-qf", k8sFile}
		},
		"sim fit": func(out string) []string {
			return []string{"sim", "fit", "--bundle", h200, "--server", "batching", "--engine", "batching", "-o", out}
		},
		"sim validate": func(out string) []string {
			return []string{"sim", "validate", h200, "--server", "batching=batching", "--fit-on", "1,64", "--hold-out", "8", "--no-live", "-o", out}
		},
		"bench": func(out string) []string {
			return []string{"bench", "--base-url", "http://127.0.0.1:9", "--model", "m", "--save-result",
				"--result-dir", filepath.Dir(out), "--result-filename", filepath.Base(out), "-o", filepath.Join(t.TempDir(), "b")}
		},
	}
	for name, args := range commands {
		dir, targets := outputTargets(t)
		for what, target := range targets {
			before, _ := os.Lstat(target)
			code, stdout, stderr := run(t, args(target)...)
			if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, target+": "+what) {
				t.Errorf("%s over %s: exit %d, stdout %q, stderr %q; want exit 2 and one line naming it", name, what, code, stdout, stderr)
			}
			if after, err := os.Lstat(target); err != nil || after.Mode() != before.Mode() {
				t.Errorf("%s over %s: it was replaced", name, what)
			}
		}
		if data, _ := os.ReadFile(filepath.Join(dir, "kept.json")); string(data) != "kept" {
			t.Errorf("%s: written through the link: %q", name, data)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 1+len(targets) {
			t.Errorf("%s: something was written beside the targets: %v", name, entries)
		}
	}
}

// "-o -" is standard output: the bytes -o FILE would hold, and no file
// named "-" anywhere.
func TestOutputDashIsStandardOutput(t *testing.T) {
	bdir := seedBundle(t, bundletest.SeedLike())
	h200, _ := filepath.Abs(h200Bundle)
	t.Chdir(t.TempDir())
	for name, args := range map[string][]string{
		"export":       {"export", bdir, "--format", "jsonl"},
		"sim fit":      {"sim", "fit", "--bundle", h200, "--server", "batching", "--engine", "batching"},
		"sim validate": {"sim", "validate", h200, "--server", "batching=batching", "--fit-on", "1,64", "--hold-out", "8", "--no-live"},
	} {
		file := filepath.Join(t.TempDir(), "out")
		if code, _, stderr := run(t, append(args, "-o", file)...); code != 0 {
			t.Fatalf("%s -o FILE: exit %d: %s", name, code, stderr)
		}
		want, _ := os.ReadFile(file)
		code, stdout, stderr := run(t, append(args, "-o", "-")...)
		if code != 0 || stdout != string(want) || len(want) == 0 {
			t.Errorf("%s -o -: exit %d, %d bytes on stdout, want the %d of -o FILE; stderr %q", name, code, len(stdout), len(want), stderr)
		}
		if _, err := os.Lstat("-"); err == nil {
			t.Fatalf("%s -o -: wrote a file named -", name)
		}
	}
}
