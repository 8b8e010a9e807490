package supervise

import (
	"bufio"
	"context"
	"encoding/json"
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
	// Keeper is the rehearse executable run as the server's keeper
	// (default: this program, which must call KeeperMain first thing).
	Keeper string
	// Secrets are replaced by secret.Redacted wherever the server writes
	// them into its log (values shorter than MinSecretLen are left). They
	// stay in this process's memory.
	Secrets []string
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

// Process is one launched server, held by its keeper.
type Process struct {
	spec    Spec
	keeper  *exec.Cmd
	pid     int
	log     *serverLog
	started time.Time

	// ctl is the keeper's control pipe: its commands, and by its closing
	// (rehearse's exit, however it comes) the order to kill the server.
	ctlMu  sync.Mutex
	ctl    *os.File
	events <-chan keeperEvent

	// killNow, when closed, cuts the grace period of a stop short.
	killNow <-chan struct{}
	// gone is closed once no process of the server is left.
	gone     chan struct{}
	goneOnce sync.Once
	stopOnce sync.Once

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

// keeperAnswerWait bounds how long Start waits for the keeper to say the
// server runs (a hang guard: it answers within milliseconds).
const keeperAnswerWait = 30 * time.Second

// Start launches the server described by spec under its keeper, with stdout
// and stderr going to spec.LogPath. The server runs until Stop, until it
// dies, or until rehearse exits (however it comes, through the keeper):
// ctx bounds only the launch (a canceled ctx launches nothing) and carries
// WithKillNow's function, never the server's lifetime, so that an
// interrupt can cancel the clients and let their requests end before the
// caller stops the server.
func Start(ctx context.Context, spec Spec) (*Process, error) {
	if len(spec.Argv) == 0 || spec.Argv[0] == "" {
		return nil, fmt.Errorf("%s: empty launch argv", spec.Name)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: not launched: %w", spec.Name, context.Cause(ctx))
	}
	if spec.StopGrace <= 0 {
		spec.StopGrace = 15 * time.Second
	}
	if spec.Port > 0 {
		if err := CheckPortFree(spec.Port); err != nil {
			return nil, fmt.Errorf("%s: %w", spec.Name, err)
		}
	}
	path, err := exec.LookPath(spec.Argv[0])
	if err != nil {
		return nil, fmt.Errorf("%s: cannot launch %q: %v", spec.Name, spec.Argv[0], errors.Unwrap(err))
	}
	keeperExe, err := keeperExecutable(spec.Keeper)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", spec.Name, err)
	}
	logf, err := createLog(spec.LogPath)
	if err != nil {
		return nil, fmt.Errorf("%s: log: %w", spec.Name, err)
	}
	shown := spec.ShownArgv
	if shown == nil {
		shown = spec.Argv
	}
	started := time.Now()
	fmt.Fprintf(logf, MarkerPrefix+"launched %s at %s\n", quoteArgv(shown), started.UTC().Format(time.RFC3339Nano))
	out, err := newServerLog(logf, spec.Secrets)
	if err != nil {
		logf.Close()
		return nil, fmt.Errorf("%s: log: %w", spec.Name, err)
	}
	killNow, _ := ctx.Value(killNowKey{}).(<-chan struct{})
	p := &Process{spec: spec, log: out, started: started, killNow: killNow, gone: make(chan struct{}), done: make(chan struct{})}
	if err := p.launch(keeperExe, path); err != nil {
		out.finish(groupGoneWait)
		p.mark("launch failed: %v", err)
		logf.Close()
		return nil, fmt.Errorf("%s: launch %s: %w", spec.Name, quoteArgv(shown), err)
	}
	p.mark("running as pid %d (its own process group), kept by pid %d", p.pid, p.keeper.Process.Pid)
	go p.wait()
	return p, nil
}

func createLog(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o644)
}

// keeperExecutable is the program re-executed as the keeper: exe, or this
// process's own executable, which must dispatch to KeeperMain.
func keeperExecutable(exe string) (string, error) {
	self, err := os.Executable()
	if exe == "" {
		if err != nil {
			return "", fmt.Errorf("cannot find this program to run it as the server's keeper: %w", err)
		}
		exe = self
	}
	if !dispatches.Load() && err == nil && sameFile(exe, self) {
		return "", errors.New("this program cannot keep servers: its main does not call supervise.KeeperMain first thing")
	}
	return exe, nil
}

func sameFile(a, b string) bool {
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}

// launch starts the keeper, hands it the server's launch, and waits for it
// to say the server runs.
func (p *Process) launch(keeperExe, path string) error {
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		return err
	}
	stR, stW, err := os.Pipe()
	if err != nil {
		ctlR.Close()
		ctlW.Close()
		return err
	}
	cmd := &exec.Cmd{
		Path: keeperExe, Args: []string{keeperArgv0, p.spec.Name},
		Env:    append(os.Environ(), keeperEnv+"="+keeperEnvValue(os.Getpid())),
		Stdout: p.log.w, Stderr: p.log.w,
		ExtraFiles: []*os.File{ctlR, stW},
		// Its own group, so a terminal's Ctrl-C reaches rehearse alone;
		// SIGTERM when rehearse dies is a backup for the control pipe.
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM},
	}
	err = cmd.Start()
	ctlR.Close()
	stW.Close()
	if err != nil {
		ctlW.Close()
		stR.Close()
		return fmt.Errorf("cannot start its keeper %s: %w", keeperExe, err)
	}
	p.keeper, p.ctl = cmd, ctlW
	events := make(chan keeperEvent, 16)
	p.events = events
	go readEvents(stR, events)
	line, _ := json.Marshal(keeperLaunch{
		Path: path, Argv: p.spec.Argv, Env: mergeEnv(os.Environ(), p.spec.Env), Dir: p.spec.Dir, Parent: os.Getpid(),
	})
	_, werr := ctlW.Write(append(line, '\n'))
	t := time.NewTimer(keeperAnswerWait)
	defer t.Stop()
	select {
	case ev, ok := <-events:
		switch {
		case ok && ev.PID > 0:
			p.pid = ev.PID
			return nil
		case ok && ev.LaunchError != "":
			err = errors.New(ev.LaunchError)
		default:
			err = fmt.Errorf("its keeper ended before starting it (%v)", errors.Join(werr, keeperWait(cmd)))
		}
	case <-t.C:
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		err = fmt.Errorf("its keeper %s did not answer within %s", keeperExe, keeperAnswerWait)
	}
	ctlW.Close()
	for range events {
	}
	_ = cmd.Wait()
	return err
}

// keeperWait reaps the keeper and says how it ended.
func keeperWait(cmd *exec.Cmd) error {
	if err := cmd.Wait(); err != nil {
		return err
	}
	return errors.New("exit status 0")
}

// readEvents decodes the keeper's status lines until it closes the pipe.
func readEvents(r *os.File, out chan<- keeperEvent) {
	defer close(out)
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 1<<20)
	for sc.Scan() {
		var ev keeperEvent
		if json.Unmarshal(sc.Bytes(), &ev) == nil {
			out <- ev
		}
	}
}

// send gives the keeper a command; one it cannot take any more is moot.
func (p *Process) send(cmd string) {
	p.ctlMu.Lock()
	defer p.ctlMu.Unlock()
	if p.ctl != nil {
		_, _ = p.ctl.Write([]byte(cmd + "\n"))
	}
}

// terminate starts a stop: the marker line, then SIGTERM to the group. A
// process that already exited on its own (and is not yet reported) was not
// stopped deliberately: what is left of its group still gets SIGTERM.
func (p *Process) terminate() {
	if _, exited := p.Exited(); exited {
		return
	}
	now := time.Now()
	if !pidRuns(p.pid) {
		p.mark("SIGTERM sent at %s to what is left of the group: the process had already exited", now.UTC().Format(time.RFC3339Nano))
	} else {
		p.mu.Lock()
		p.deliberate = true
		p.termAt = now
		p.mu.Unlock()
		p.mark("SIGTERM sent at %s %s", now.UTC().Format(time.RFC3339Nano), StopMarker)
		go p.killAfterGrace(now.Add(p.spec.StopGrace))
	}
	p.send(cmdTerm)
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

// killGroup has the keeper send SIGKILL to the whole group and every other
// descendant, once, with a marker line.
func (p *Process) killGroup(why string) {
	p.mu.Lock()
	if p.killed {
		p.mu.Unlock()
		return
	}
	p.killed = true
	p.mark("SIGKILL sent to the group at %s: %s", time.Now().UTC().Format(time.RFC3339Nano), why)
	p.mu.Unlock()
	p.send(cmdKill)
}

// groupGoneWait is how long the keeper keeps killing after SIGKILL before
// it gives up on what is left.
const groupGoneWait = 5 * time.Second

// pidRuns reports whether pid is a process that has not exited: not gone,
// and not a zombie waiting to be reaped. Without /proc a zombie counts as
// running.
func pidRuns(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	return !exitedUnreaped(pid)
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

// wait follows the keeper's reports until it exits: the server's exit, log
// notes, and that nothing of the server is left.
func (p *Process) wait() {
	var reported *keeperExit
	for ev := range p.events {
		switch {
		case ev.Exit != nil:
			reported = ev.Exit
		case ev.Note != "":
			p.mark("%s", ev.Note)
		case ev.Gone:
			p.goneOnce.Do(func() { close(p.gone) })
		}
	}
	kerr := p.keeper.Wait()
	p.ctlMu.Lock()
	p.ctl.Close()
	p.ctl = nil
	p.ctlMu.Unlock()
	e := Exit{At: time.Now(), Code: -1}
	switch {
	case reported != nil:
		e.At = time.Unix(0, reported.AtUnixNano)
		if reported.Signal != 0 {
			e.Signal = signalName(syscall.Signal(reported.Signal))
		} else {
			e.Code = reported.Code
		}
	default:
		// The keeper died before it could say: what it held goes now.
		_ = syscall.Kill(-p.pid, syscall.SIGKILL)
		e.Signal = fmt.Sprintf("SIGKILL, sent when its keeper ended (%v)", kerr)
		p.mark("the keeper (pid %d) ended without reporting the server's exit (%v): SIGKILL sent to group %d", p.keeper.Process.Pid, kerr, p.pid)
	}
	p.goneOnce.Do(func() { close(p.gone) })
	p.log.finish(groupGoneWait)
	p.mu.Lock()
	e.Deliberate = p.deliberate
	e.Killed = e.Deliberate && p.killed
	p.exit = &e
	p.mu.Unlock()
	switch {
	case e.Deliberate:
		p.mark("process ended at %s (%s)", e.At.UTC().Format(time.RFC3339Nano), e.Phrase())
	default:
		p.mark("process %s at %s, %s", e.Phrase(), e.At.UTC().Format(time.RFC3339Nano), EarlyDeathMarker)
	}
	p.log.f.Close()
	close(p.done)
}

// signalName names a signal as Exit does: SIGKILL and SIGTERM by their
// constants, others in the system's words.
func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return s.String()
}

// mark adds a tool line to the log.
func (p *Process) mark(format string, a ...any) {
	p.log.mark(fmt.Sprintf("\n"+MarkerPrefix+format+"\n", a...))
}

// Alive reports whether the process is still running: not exited, and not
// an exited process waiting to be reaped.
func (p *Process) Alive() bool {
	if _, exited := p.Exited(); exited {
		return false
	}
	return !exitedUnreaped(p.pid)
}

// Name is the server's name.
func (p *Process) Name() string { return p.spec.Name }

// PID is the server's process id (and process group id), not its keeper's.
func (p *Process) PID() int { return p.pid }

// Done is closed once the process has exited, nothing it started is left,
// and its log is closed.
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
// group, SIGKILL to the group and every other descendant after the grace
// period. It returns once nothing of the server is left. Stopping a process
// that already exited returns how it ended.
func (p *Process) Stop() Exit {
	p.stopOnce.Do(p.terminate)
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
