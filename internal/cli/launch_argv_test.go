package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
)

// TestLaunchArgvNamesRehearse: a server launched as {rehearse} runs the
// real executable (here the test binary, which runs no test and exits, so
// the server is not ready; its timeout flag carries the {port} a launch
// needs), but the bundle records it, and its log's launch
// line shows it, as "rehearse": under go run, and so in the demo, the
// executable is a temporary file that is gone once rehearse exits.
func TestLaunchArgvNamesRehearse(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "r.yaml")
	cfg := `model: {id: Qwen/Qwen2.5-1.5B-Instruct}
servers:
  - name: self
    launch: ["{rehearse}", "-test.run=^$", "-test.timeout={port}s"]
    ready: {timeout: 20s}
workload: {concurrencies: [1], repeats: 1, max_tokens: 8}
`
	if err := os.WriteFile(file, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	if code, _, stderr := run(t, "run", "-q", "-f", file, "-o", out); code != 1 || !strings.Contains(stderr, "self: not ready") {
		t.Fatalf("exit %d, want 1 (the server exits at start); stderr:\n%s", code, stderr)
	}
	res, err := bundle.ReadResults(out)
	if err != nil {
		t.Fatal(err)
	}
	argv := res.Servers[0].LaunchArgv
	if len(argv) != 3 || argv[0] != "rehearse" || argv[1] != "-test.run=^$" || !strings.HasPrefix(argv[2], "-test.timeout=") {
		t.Errorf("launch_argv %q, want rehearse -test.run=^$ -test.timeout=PORTs", argv)
	}
	log, err := os.ReadFile(filepath.Join(out, res.Servers[0].Log))
	if err != nil {
		t.Fatal(err)
	}
	// The test binary ran: it says it had no test to run.
	if !strings.Contains(string(log), "no tests to run") {
		t.Errorf("the log does not show the real executable ran:\n%s", log)
	}
	if !strings.Contains(string(log), "launched rehearse ") {
		t.Errorf("the log's launch line does not name rehearse:\n%s", log)
	}
	for _, name := range []string{bundle.ResultsFile, res.Servers[0].Log} {
		data, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), exe) {
			t.Errorf("%s names the executable's path %s", name, exe)
		}
	}
}
