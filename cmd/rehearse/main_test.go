package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/bundle/bundletest"
)

// The test binary is rehearse itself when asked: the subprocess tests run
// main as a user's shell would, signals and exit status included.
func TestMain(m *testing.M) {
	if os.Getenv("REHEARSE_TEST_MAIN") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// hangGuard separates "slow" from "does not stop": a verify that ignores
// SIGINT hashes the 64 GiB file for far longer.
const hangGuard = 20 * time.Second

// TestVerifyStopsOnSIGINT sends SIGINT to `rehearse verify` while it
// hashes a large file and wants exit 130 with one line.
func TestVerifyStopsOnSIGINT(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("watches /proc/PID/fd to know the file is being hashed")
	}
	dir := t.TempDir()
	res := bundletest.SeedLike()
	if err := bundle.WriteResults(dir, res); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "a-big.log")
	if err := os.WriteFile(big, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, 64<<30); err != nil {
		t.Skipf("no sparse file here: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, bundle.SumsFile), []byte(strings.Repeat("0", 64)+"  a-big.log\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "verify", dir)
	cmd.Env = append(os.Environ(), "REHEARSE_TEST_MAIN=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.After(hangGuard)
	for !hasOpen(cmd.Process.Pid, big) {
		select {
		case err := <-done:
			t.Fatalf("verify ended before it was interrupted: %v, %s", err, stderr.String())
		case <-deadline:
			t.Fatalf("verify never opened %s", big)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 130 {
			t.Errorf("verify after SIGINT: %v, want exit status 130", err)
		}
		if errs := stderr.String(); !strings.Contains(errs, "interrupted (interrupt signal received)") || strings.Count(errs, "\n") != 1 {
			t.Errorf("stderr %q: want one line saying it was interrupted", errs)
		}
	case <-time.After(hangGuard):
		t.Fatalf("verify still running %v after SIGINT", hangGuard)
	}
}

// hasOpen reports whether process pid holds path open.
func hasOpen(pid int, path string) bool {
	fds, _ := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "fd", "*"))
	for _, fd := range fds {
		if target, err := os.Readlink(fd); err == nil && target == path {
			return true
		}
	}
	return false
}
