// Command rehearse rehearses LLM serving under load. See internal/cli/doc.go
// for the usage text.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/rehearse/rehearse/internal/cli"
	"github.com/rehearse/rehearse/internal/supervise"
)

// stopSignals stop a rehearsal cleanly: SIGHUP too, so that a dropped ssh
// session still stops the servers' process groups and writes the bundle.
// SIGQUIT keeps Go's meaning (a goroutine dump), the way to see where a
// rehearsal hangs.
var stopSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}

func main() {
	// A server's keeper is this binary re-executed: it must not become a
	// second rehearse.
	if code, ok := supervise.KeeperMain(); ok {
		os.Exit(code)
	}
	again := make(chan os.Signal, 2)
	signal.Notify(again, stopSignals...)
	ctx, stop := signal.NotifyContext(context.Background(), stopSignals...)
	ctx, killNow := supervise.WithKillNow(ctx)
	go func() {
		<-again
		<-again
		fmt.Fprintln(os.Stderr, "rehearse: interrupted again: SIGKILL to the servers' process groups now, without waiting for their grace period")
		killNow()
	}()
	code := cli.Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
