package supervise

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// MarkerPrefix starts every line the tool itself writes into a server log.
const MarkerPrefix = "==> rehearse: "

// StopMarker is the fixed part of the deliberate-stop line; what follows it
// in the log is shutdown.
const StopMarker = "(deliberate stop; lines below are shutdown)"

// Spec says how to launch one server.
type Spec struct {
	Name string
	// Argv is run directly, never through a shell.
	Argv []string
	// Env holds overrides on top of this process's environment.
	Env map[string]string
	// Dir is the working folder ("" for the current one).
	Dir string
	// Port must be free before launch (0: no check).
	Port int
	// LogPath receives the process's stdout and stderr, complete.
	LogPath string
	// StopGrace is how long SIGTERM has before SIGKILL (default 15 s).
	StopGrace time.Duration
	// ShownArgv is the argv as written into the log's launch line, with
	// secrets redacted (default Argv).
	ShownArgv []string
}

// Exit describes how a process ended.
type Exit struct {
	// At is the wall-clock time the exit was observed.
	At time.Time
	// Code is the exit status, -1 when a signal ended the process.
	Code int
	// Signal names the signal that ended it, if one did.
	Signal string
	// Deliberate is true when rehearse stopped it (or the run was
	// interrupted and rehearse stopped it then).
	Deliberate bool
	// Killed is true when SIGKILL was needed after the grace period.
	Killed bool
}

// EarlyDeathMarker ends the description of an exit rehearse did not cause,
// in Exit.String and in the log's marker line; ScanLog finds an early death
// by it.
const EarlyDeathMarker = "before rehearse stopped it"

// Phrase says how the process ended, as a predicate: "exited with status
// 3" or "was killed by SIGKILL". Every description of an exit uses it.
func (e Exit) Phrase() string {
	if e.Signal != "" {
		return "was killed by " + e.Signal
	}
	return "exited with status " + strconv.Itoa(e.Code)
}

// Ended is the phrase with the time of the exit.
func (e Exit) Ended() string {
	return e.Phrase() + " at " + e.At.UTC().Format(time.RFC3339)
}

// String says how the process ended in words.
func (e Exit) String() string {
	switch {
	case e.Deliberate && e.Killed:
		return fmt.Sprintf("stopped by rehearse: SIGKILL after the grace period at %s", e.At.UTC().Format(time.RFC3339))
	case e.Deliberate:
		return "stopped by rehearse (SIGTERM), " + e.Ended()
	}
	return e.Ended() + ", " + EarlyDeathMarker
}

// Process is one launched server.
type Process struct {
	spec    Spec
	cmd     *exec.Cmd
	log     *os.File
	started time.Time
	cancel  context.CancelFunc

	// killNow, when closed, cuts the grace period of a stop short.
	killNow <-chan struct{}
	// gone is closed once no process of the group is left.
	gone chan struct{}

	mu         sync.Mutex
	deliberate bool
	termAt     time.Time
	killed     bool
	exit       *Exit
	done       chan struct{}
}

type killNowKey struct{}

// WithKillNow returns a context for Start and a function that cuts short the
// grace period of every process started under that context: a process being
// stopped, or stopped later, gets SIGKILL to its group at once instead of at
// the end of its grace period (a second Ctrl-C).
func WithKillNow(parent context.Context) (context.Context, func()) {
	ch := make(chan struct{})
	var once sync.Once
	return context.WithValue(parent, killNowKey{}, (<-chan struct{})(ch)), func() { once.Do(func() { close(ch) }) }
}

// FreePort asks the kernel for a free loopback TCP port.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// CheckPortFree returns an error when something already listens on port (a
// leftover server would answer the readiness probe in the new one's place).
func CheckPortFree(port int) error {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if c, err := net.DialTimeout("tcp", addr, 300*time.Millisecond); err == nil {
		c.Close()
		return fmt.Errorf("port %d is already in use (a leftover server? it would fake readiness); stop it or choose another port", port)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("port %d is not free: %v", port, err)
	}
	return l.Close()
}

// Start launches the server described by spec, with stdout and stderr going
// to spec.LogPath. Canceling ctx stops the process as Stop does (SIGTERM to
// the group with the marker line, SIGKILL after the grace period).
func Start(ctx context.Context, spec Spec) (*Process, error) {
	if len(spec.Argv) == 0 || spec.Argv[0] == "" {
		return nil, fmt.Errorf("%s: empty launch argv", spec.Name)
	}
	if spec.StopGrace <= 0 {
		spec.StopGrace = 15 * time.Second
	}
	if spec.Port > 0 {
		if err := CheckPortFree(spec.Port); err != nil {
			return nil, fmt.Errorf("%s: %w", spec.Name, err)
		}
	}
	if _, err := exec.LookPath(spec.Argv[0]); err != nil {
		return nil, fmt.Errorf("%s: cannot launch %q: %v", spec.Name, spec.Argv[0], errors.Unwrap(err))
	}
	logf, err := os.OpenFile(spec.LogPath, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s: log: %w", spec.Name, err)
	}
	stopCtx, cancel := context.WithCancel(ctx)
	cmd := exec.CommandContext(stopCtx, spec.Argv[0], spec.Argv[1:]...)
	cmd.Dir = spec.Dir
	cmd.Env = mergeEnv(os.Environ(), spec.Env)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// No WaitDelay: it would SIGKILL only the leader. The grace period
	// covers the whole group and is kept by killAfterGrace.
	killNow, _ := ctx.Value(killNowKey{}).(<-chan struct{})
	p := &Process{spec: spec, cmd: cmd, log: logf, cancel: cancel, killNow: killNow,
		gone: make(chan struct{}), done: make(chan struct{})}
	cmd.Cancel = p.terminate

	shown := spec.ShownArgv
	if shown == nil {
		shown = spec.Argv
	}
	p.started = time.Now()
	fmt.Fprintf(logf, MarkerPrefix+"launched %s at %s\n", quoteArgv(shown), p.started.UTC().Format(time.RFC3339Nano))
	if err := cmd.Start(); err != nil {
		cancel()
		p.mark("launch failed: %v", err)
		logf.Close()
		return nil, fmt.Errorf("%s: launch %s: %w", spec.Name, quoteArgv(shown), err)
	}
	p.mark("running as pid %d (its own process group)", cmd.Process.Pid)
	go p.wait()
	return p, nil
}

// terminate is the Cmd's Cancel: the marker line, then SIGTERM to the group.
// A process that already exited on its own (a zombie not yet reaped) was
// not stopped deliberately: what is left of its group still gets SIGTERM.
func (p *Process) terminate() error {
	pid := p.cmd.Process.Pid
	now := time.Now()
	if exitedUnreaped(pid) {
		p.mark("SIGTERM sent at %s to what is left of the group: the process had already exited", now.UTC().Format(time.RFC3339Nano))
	} else {
		p.mu.Lock()
		p.deliberate = true
		p.termAt = now
		p.mu.Unlock()
		p.mark("SIGTERM sent at %s %s", now.UTC().Format(time.RFC3339Nano), StopMarker)
		go p.killAfterGrace(now.Add(p.spec.StopGrace))
	}
	return syscall.Kill(-pid, syscall.SIGTERM)
}

// killAfterGrace sends SIGKILL to the group at deadline (or at once when
// the kill-now function of the Start context is called), unless the whole
// group is gone before.
func (p *Process) killAfterGrace(deadline time.Time) {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-p.gone:
		return
	case <-t.C:
		p.killGroup(fmt.Sprintf("the grace period of %s was over", p.spec.StopGrace))
	case <-p.killNow:
		p.killGroup("rehearse was interrupted again; no more waiting for the grace period")
	}
}

// killGroup sends SIGKILL to the whole group, once, with a marker line.
func (p *Process) killGroup(why string) {
	p.mu.Lock()
	if p.killed {
		p.mu.Unlock()
		return
	}
	p.killed = true
	p.mark("SIGKILL sent to the group at %s: %s", time.Now().UTC().Format(time.RFC3339Nano), why)
	p.mu.Unlock()
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
}

// groupAlive reports whether any process of group pgid is left that is not
// a zombie (an exited child waits to be reaped by whoever inherited it,
// maybe never, and holds nothing). Without /proc a zombie counts as alive.
func groupAlive(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 3 || f[0] == "Z" {
			continue
		}
		if g, err := strconv.Atoi(f[2]); err == nil && g == pgid {
			return true
		}
	}
	return false
}

// groupGoneWait is how long wait polls for the group to go after SIGKILL.
const groupGoneWait = 5 * time.Second

// awaitGroup returns once no process of the group is left: the processes
// still running after the leader exited keep the rest of the grace period
// of a deliberate stop (a server's workers shutting down cleanly), and get
// SIGKILL after it; those left by a leader that died on its own get SIGKILL
// at once. It gives up groupGoneWait after SIGKILL, with a marker line.
func (p *Process) awaitGroup(deliberate bool) {
	pgid := p.cmd.Process.Pid
	if !deliberate {
		if !groupAlive(pgid) {
			return
		}
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	var killedAt time.Time
	for groupAlive(pgid) {
		p.mu.Lock()
		killed := p.killed
		p.mu.Unlock()
		if (killed || !deliberate) && killedAt.IsZero() {
			killedAt = time.Now()
		}
		if !killedAt.IsZero() && time.Since(killedAt) > groupGoneWait {
			p.mark("processes of group %d were still there %s after SIGKILL", pgid, groupGoneWait)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// exitedUnreaped reports whether pid is a zombie: exited, not yet waited
// for. Without /proc it reports false.
func exitedUnreaped(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses.
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
}

func (p *Process) wait() {
	err := p.cmd.Wait()
	at := time.Now()
	p.mu.Lock()
	deliberate := p.deliberate
	p.mu.Unlock()
	// Whatever else is left in the group goes too: no orphans, and the
	// next server does not start while this one's workers hold the GPU.
	p.awaitGroup(deliberate)
	close(p.gone)
	e := Exit{At: at, Code: -1}
	if st := p.cmd.ProcessState; st != nil {
		if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			e.Signal = ws.Signal().String()
			if ws.Signal() == syscall.SIGKILL {
				e.Signal = "SIGKILL"
			} else if ws.Signal() == syscall.SIGTERM {
				e.Signal = "SIGTERM"
			}
		} else {
			e.Code = st.ExitCode()
		}
	} else if err != nil {
		e.Signal = err.Error()
	}
	p.mu.Lock()
	e.Deliberate = p.deliberate
	e.Killed = e.Deliberate && p.killed
	p.exit = &e
	p.mu.Unlock()
	switch {
	case e.Deliberate:
		p.mark("process ended at %s (%s)", at.UTC().Format(time.RFC3339Nano), e.Phrase())
	default:
		p.mark("process %s at %s, %s", e.Phrase(), at.UTC().Format(time.RFC3339Nano), EarlyDeathMarker)
	}
	p.log.Close()
	p.cancel()
	close(p.done)
}

// mark appends a tool line to the log.
func (p *Process) mark(format string, a ...any) {
	fmt.Fprintf(p.log, "\n"+MarkerPrefix+format+"\n", a...)
}

// Alive reports whether the process is still running: not exited, and not
// an exited process waiting to be reaped.
func (p *Process) Alive() bool {
	if _, exited := p.Exited(); exited {
		return false
	}
	return !exitedUnreaped(p.cmd.Process.Pid)
}

// Name is the server's name.
func (p *Process) Name() string { return p.spec.Name }

// PID is the process id (and process group id).
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Started is when the process was launched.
func (p *Process) Started() time.Time { return p.started }

// Done is closed once the process has exited and its log is closed.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited returns how the process ended, or false while it runs.
func (p *Process) Exited() (Exit, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exit == nil {
		return Exit{}, false
	}
	return *p.exit, true
}

// Stop stops the process deliberately: the marker line and SIGTERM to the
// group, SIGKILL to the group after the grace period. It returns once the
// process is gone. Stopping a process that already exited returns how it
// ended.
func (p *Process) Stop() Exit {
	p.cancel()
	<-p.done
	e, _ := p.Exited()
	return e
}

// LogPath is the log file.
func (p *Process) LogPath() string { return p.spec.LogPath }

func mergeEnv(base []string, over map[string]string) []string {
	if len(over) == 0 {
		return base
	}
	out := make([]string, 0, len(base)+len(over))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, replaced := over[k]; !replaced {
			out = append(out, kv)
		}
	}
	keys := make([]string, 0, len(over))
	for k := range over {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, k+"="+over[k])
	}
	return out
}

func quoteArgv(argv []string) string {
	parts := make([]string, len(argv))
	for i, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`") {
			parts[i] = strconv.Quote(a)
		} else {
			parts[i] = a
		}
	}
	return strings.Join(parts, " ")
}
