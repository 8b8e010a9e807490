package cli

import (
	"os"
	"syscall"
	"testing"

	"github.com/rehearse/rehearse/internal/supervise"
)

// The test binary is the keeper of the servers that run launches in-process.
func TestMain(m *testing.M) {
	if code, ok := supervise.KeeperMain(); ok {
		// At once: os.Exit of a race-enabled binary waits a second.
		syscall.Exit(code)
	}
	os.Exit(m.Run())
}
