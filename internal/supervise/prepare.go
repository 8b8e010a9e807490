package supervise

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"time"
)

// Command is one prepare command of a server: the argv run, and the argv
// as its log shows it (secrets redacted; nil: Argv).
type Command struct {
	Argv, Shown []string
}

// prepareGrace is how long a prepare command has after SIGTERM, when its
// readiness is cut short, before SIGKILL.
const prepareGrace = 5 * time.Second

// Prepare runs c once, as a step of the server's readiness: with the
// server's environment and folder, in its own process group, never through
// a shell; its stdout and stderr go into the server's log (secrets
// scrubbed) between two marker lines. ctx ending stops it (SIGTERM to its
// group, SIGKILL after a grace). The error says how it ended (the caller
// names the command).
func (p *Process) Prepare(ctx context.Context, c Command) error {
	shown := c.Shown
	if shown == nil {
		shown = c.Argv
	}
	if len(c.Argv) == 0 || c.Argv[0] == "" {
		return errors.New("prepare: empty argv")
	}
	path, err := exec.LookPath(c.Argv[0])
	if err != nil {
		p.mark("prepare %s: cannot run %q: %v", quoteArgv(shown), c.Argv[0], errors.Unwrap(err))
		return fmt.Errorf("cannot run %q: %v", c.Argv[0], errors.Unwrap(err))
	}
	cmd := exec.CommandContext(ctx, path, c.Argv[1:]...)
	cmd.Args[0] = c.Argv[0]
	cmd.Env = mergeEnv(cmd.Environ(), p.spec.Env)
	cmd.Dir = p.spec.Dir
	cmd.Stdout, cmd.Stderr = p.log.w, p.log.w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = prepareGrace
	start := time.Now()
	p.mark("prepare: running %s", quoteArgv(shown))
	err = cmd.Run()
	took := time.Since(start).Round(time.Millisecond)
	if cmd.Process != nil {
		// Whatever it left in its group goes with it.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if err != nil {
		how := err.Error()
		if ctx.Err() != nil {
			how = fmt.Sprintf("stopped (%v)", context.Cause(ctx))
		}
		p.mark("prepare %s failed after %s: %s", quoteArgv(shown), took, how)
		return fmt.Errorf("failed after %s: %s", took, how)
	}
	p.mark("prepare %s exited with status 0 after %s", quoteArgv(shown), took)
	return nil
}
