package cli

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"github.com/rehearse/rehearse/internal/supervise"
)

// rehearseMainEnv, set in a test's environment, makes the test binary
// rehearse itself when a launch runs it as {rehearse} (a server's child
// inherits the environment): "rehearse sim" launched by a rehearsal in a
// test is then the real command.
const rehearseMainEnv = "REHEARSE_CLI_TEST_MAIN"

// fileSizeLimitEnv, set with rehearseMainEnv, is the largest file in bytes
// that the test binary as rehearse may write (RLIMIT_FSIZE, as "ulimit -f"
// sets it): a write past it fails with EFBIG, as one on a full disk fails
// with ENOSPC.
const fileSizeLimitEnv = "REHEARSE_CLI_TEST_FSIZE"

// The test binary is the keeper of the servers that run launches in-process.
func TestMain(m *testing.M) {
	if code, ok := supervise.KeeperMain(); ok {
		// At once: os.Exit of a race-enabled binary waits a second.
		syscall.Exit(code)
	}
	if os.Getenv(rehearseMainEnv) == "1" {
		if err := limitFileSize(os.Getenv(fileSizeLimitEnv)); err != nil {
			os.Stderr.WriteString("test main: " + err.Error() + "\n")
			syscall.Exit(3)
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
		stop()
		syscall.Exit(code)
	}
	os.Exit(hermeticHub(m))
}

// hermeticHub runs the tests with an empty Hugging Face cache of their own
// and the Hub offline, so that no test reads this machine's cache or
// reaches the network; a test of the Hub points HF_ENDPOINT at a fake one
// and clears HF_HUB_OFFLINE itself.
func hermeticHub(m *testing.M) int {
	cache, err := os.MkdirTemp("", "rehearse-hf-cache")
	if err != nil {
		os.Stderr.WriteString("test main: " + err.Error() + "\n")
		return 3
	}
	defer os.RemoveAll(cache)
	for k, v := range map[string]string{"HF_HUB_CACHE": cache, "HF_HUB_OFFLINE": "1", "HF_ENDPOINT": "http://127.0.0.1:9", "HF_TOKEN": "", "HUGGING_FACE_HUB_TOKEN": ""} {
		os.Setenv(k, v)
	}
	return m.Run()
}
