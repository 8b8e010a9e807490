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
	args := os.Args[1:]
	ctx, stop := signal.NotifyContext(context.Background(), stopSignals...)
	if cli.DrivesServers(args) {
		ctx = killOnSecondSignal(ctx)
	} else {
		// A command that reads bundles stops at the first signal; a
		// second one gets Go's default and ends the process at once.
		context.AfterFunc(ctx, stop)
	}
	code := cli.Main(ctx, args, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// killOnSecondSignal gives a command that drives servers its second
// chance: the first signal cancels ctx (servers stopped gracefully), the
// second SIGKILLs the servers' process groups without their grace period.
func killOnSecondSignal(ctx context.Context) context.Context {
	again := make(chan os.Signal, 2)
	signal.Notify(again, stopSignals...)
	ctx, killNow := supervise.WithKillNow(ctx)
	go func() {
		<-again
		<-again
		fmt.Fprintln(os.Stderr, "rehearse: interrupted again: SIGKILL to the servers' process groups now, without waiting for their grace period")
		killNow()
	}()
	return ctx
}
