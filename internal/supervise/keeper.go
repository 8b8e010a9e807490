package supervise

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// The keeper is rehearse itself, re-executed, holding one server. It makes
// itself a child subreaper, so every descendant of the server that loses
// its parent (a wrapper's background job, an engine process in its own
// session) becomes its child rather than init's; it starts the server in a
// process group of its own, forwards rehearse's stop (SIGTERM to the
// group, SIGKILL to the group and every descendant), reports the server's
// exit status, and when rehearse dies by any means, SIGKILL included, it
// kills the server's group and every remaining descendant and exits.
//
// rehearse and its keeper speak over two pipes. The control pipe (the
// keeper's fd 3) carries the launch as one JSON line (the server's argv and
// environment, so nothing of it is on the keeper's own command line), then
// the commands "term" and "kill"; its end of file means rehearse is gone.
// The status pipe (fd 4) carries keeperEvent lines back. The keeper's
// stdout and stderr are the server's.

// keeperEnv is set in the keeper's environment; KeeperMain looks for it.
const keeperEnv = "REHEARSE_SUPERVISE_KEEPER"

// keeperProtocol is the version of the pipes' language; keeperEnv's value
// is "keeperProtocol:PARENT_PID", so a stray variable in a user's
// environment does not make rehearse read from a descriptor it inherited.
const keeperProtocol = "1"

func keeperEnvValue(parent int) string { return keeperProtocol + ":" + strconv.Itoa(parent) }

// keeperArgv0 is what the keeper is called in ps.
const keeperArgv0 = "rehearse-keeper"

// dispatches is set once KeeperMain has run in this process and found it is
// not a keeper: the running binary can then be re-executed as one.
var dispatches atomic.Bool

// KeeperMain runs this process as a server's keeper when rehearse started
// it as one, and returns the keeper's exit status and true; otherwise it
// returns false at once. main calls it first thing, as does the TestMain of
// a test binary that launches servers: Start re-executes the running binary
// as the keeper, and refuses to when it has not called KeeperMain.
func KeeperMain() (int, bool) {
	if os.Getenv(keeperEnv) == "" {
		dispatches.Store(true)
		return 0, false
	}
	return keep(), true
}

// keeperLaunch is the first line on the control pipe.
type keeperLaunch struct {
	// Path is the server's executable, already looked up.
	Path string   `json:"path"`
	Argv []string `json:"argv"`
	// Env is the server's whole environment.
	Env []string `json:"env"`
	Dir string   `json:"dir,omitempty"`
	// Parent is rehearse's pid: the keeper acts when it is no longer its
	// parent.
	Parent int `json:"parent"`
}

// keeperEvent is one line on the status pipe; one field is set.
type keeperEvent struct {
	// PID is the server's pid (and process group), once it runs.
	PID int `json:"pid,omitempty"`
	// LaunchError says why the server could not be started.
	LaunchError string `json:"launch_error,omitempty"`
	// Exit is how the server's process ended.
	Exit *keeperExit `json:"exit,omitempty"`
	// Note is a line for the server's log.
	Note string `json:"note,omitempty"`
	// Gone says no descendant of the keeper is left: the server's group
	// and everything it started are gone (or, with Stuck, the keeper gave
	// up on some).
	Gone  bool `json:"gone,omitempty"`
	Stuck bool `json:"stuck,omitempty"`
}

type keeperExit struct {
	AtUnixNano int64 `json:"at_unix_ns"`
	// Code is the exit status; -1 when a signal ended the process.
	Code int `json:"code"`
	// Signal is the number of the signal that ended it (0: none).
	Signal int `json:"signal,omitempty"`
}

// Keeper commands, one per line on the control pipe.
const (
	cmdTerm = "term"
	cmdKill = "kill"
)

const prSetChildSubreaper = 36

// keeperKillTick is how often a keeper that is killing sweeps its
// descendants again (a process may fork while it is being killed).
const keeperKillTick = 20 * time.Millisecond

type keeper struct {
	launch   keeperLaunch
	status   *os.File
	pid      int
	reported map[int]bool
}

// reaped is what the keeper's reaper saw: the server's exit, or that no
// child is left.
type reaped struct {
	ws   syscall.WaitStatus
	gone bool
}

func keep() int {
	if v := os.Getenv(keeperEnv); v != keeperEnvValue(os.Getppid()) || !isPipe(3) || !isPipe(4) {
		fmt.Fprintf(os.Stderr, "rehearse: %s=%s is set, but rehearse did not start this process as a server's keeper; unset it\n", keeperEnv, v)
		return 2
	}
	// The pipes must not leak into the server.
	syscall.CloseOnExec(3)
	syscall.CloseOnExec(4)
	ctl := bufio.NewReader(os.NewFile(3, "keeper-control"))
	k := &keeper{status: os.NewFile(4, "keeper-status"), reported: map[int]bool{}}
	// Caught, never ignored: an ignored signal would stay ignored in the
	// server. SIGPIPE is caught so that a write to rehearse's closed pipes
	// fails instead of ending the keeper.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGPIPE)

	line, err := ctl.ReadBytes('\n')
	if err == nil {
		err = json.Unmarshal(line, &k.launch)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "rehearse: keeper: no launch came from rehearse: %v\n", err)
		return 2
	}
	if os.Getppid() != k.launch.Parent {
		return 1 // rehearse is already gone
	}
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		k.send(keeperEvent{LaunchError: "the keeper cannot adopt the server's orphans: prctl(PR_SET_CHILD_SUBREAPER): " + errno.Error()})
		return 1
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		k.send(keeperEvent{LaunchError: err.Error()})
		return 1
	}
	k.pid, err = syscall.ForkExec(k.launch.Path, k.launch.Argv, &syscall.ProcAttr{
		Dir: k.launch.Dir, Env: k.launch.Env, Files: []uintptr{devnull.Fd(), 1, 2},
		Sys: &syscall.SysProcAttr{Setpgid: true},
	})
	devnull.Close()
	if err != nil {
		k.send(keeperEvent{LaunchError: "fork/exec " + k.launch.Path + ": " + err.Error()})
		return 1
	}
	k.send(keeperEvent{PID: k.pid})

	reaps := make(chan reaped)
	go k.reap(reaps)
	cmds := make(chan string)
	go func() {
		defer close(cmds)
		for {
			line, err := ctl.ReadString('\n')
			if err != nil {
				return
			}
			cmds <- strings.TrimSpace(line)
		}
	}()
	return k.loop(cmds, reaps, sigs)
}

func isPipe(fd int) bool {
	var st syscall.Stat_t
	return syscall.Fstat(fd, &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFIFO
}

// reap waits for every child of the keeper (the server, and the orphans
// it adopts) and reports the server's exit, then that no child is left:
// with no child there is no descendant either.
func (k *keeper) reap(out chan<- reaped) {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		switch {
		case err == syscall.EINTR:
		case err != nil:
			out <- reaped{gone: true}
			return
		case pid == k.pid:
			out <- reaped{ws: ws}
		}
	}
}

func (k *keeper) loop(cmds <-chan string, reaps <-chan reaped, sigs <-chan os.Signal) int {
	termed := false
	var killStart time.Time
	var tick <-chan time.Time
	kill := func() {
		if tick == nil {
			killStart = time.Now()
			tick = time.NewTicker(keeperKillTick).C
		}
		k.killAll()
	}
	for {
		select {
		case c, ok := <-cmds:
			if !ok {
				// rehearse is gone, however it died.
				cmds = nil
				kill()
				continue
			}
			switch c {
			case cmdTerm:
				termed = true
				_ = syscall.Kill(-k.pid, syscall.SIGTERM)
			case cmdKill:
				kill()
			}
		case s := <-sigs:
			// SIGTERM is also the keeper's parent-death signal, which may
			// come when the thread that started it ends: only a new parent
			// means rehearse is gone. SIGINT and SIGHUP are rehearse's to
			// act on.
			if s == syscall.SIGTERM && os.Getppid() != k.launch.Parent {
				kill()
			}
		case r := <-reaps:
			if r.gone {
				k.send(keeperEvent{Gone: true})
				return 0
			}
			e := &keeperExit{AtUnixNano: time.Now().UnixNano(), Code: -1}
			if r.ws.Signaled() {
				e.Signal = int(r.ws.Signal())
			} else {
				e.Code = r.ws.ExitStatus()
			}
			k.send(keeperEvent{Exit: e})
			// A server that died on its own takes the rest of its group
			// and its descendants with it at once; after a deliberate
			// stop they keep the rest of the grace period.
			if !termed {
				kill()
			}
		case <-tick:
			k.killAll()
			if time.Since(killStart) > groupGoneWait {
				var pids []string
				for _, p := range k.descendants() {
					pids = append(pids, strconv.Itoa(p.pid))
				}
				k.send(keeperEvent{Note: fmt.Sprintf("processes %s were still there %s after SIGKILL", strings.Join(pids, ", "), groupGoneWait)})
				k.send(keeperEvent{Gone: true, Stuck: true})
				return 1
			}
		}
	}
}

// killAll sends SIGKILL to the server's group and to every descendant of
// the keeper, and notes those that had left the group.
func (k *keeper) killAll() {
	_ = syscall.Kill(-k.pid, syscall.SIGKILL)
	var left []string
	for _, p := range k.descendants() {
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
		if p.pgid != k.pid && p.state != "Z" && !k.reported[p.pid] {
			k.reported[p.pid] = true
			left = append(left, fmt.Sprintf("%d %s", p.pid, p.comm))
		}
	}
	if len(left) > 0 {
		k.send(keeperEvent{Note: fmt.Sprintf("SIGKILL sent to descendants outside the server's process group: %s", strings.Join(left, ", "))})
	}
}

func (k *keeper) send(ev keeperEvent) {
	b, _ := json.Marshal(ev)
	_, _ = k.status.Write(append(b, '\n'))
}

type procInfo struct {
	pid, ppid, pgid int
	state, comm     string
}

// descendants lists the processes below the keeper, read from /proc.
func (k *keeper) descendants() []procInfo {
	byParent := map[int][]procInfo{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, ok := readProc(e.Name())
		if ok {
			byParent[p.ppid] = append(byParent[p.ppid], p)
		}
	}
	var out []procInfo
	queue := byParent[os.Getpid()]
	for len(queue) > 0 {
		p := queue[0]
		queue = append(queue[1:], byParent[p.pid]...)
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].pid < out[j].pid })
	return out
}

// readProc reads /proc/NAME/stat: pid (comm) state ppid pgrp ...
func readProc(name string) (procInfo, bool) {
	pid, err := strconv.Atoi(name)
	if err != nil {
		return procInfo{}, false
	}
	b, err := os.ReadFile("/proc/" + name + "/stat")
	if err != nil {
		return procInfo{}, false
	}
	s := string(b)
	open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || close < open {
		return procInfo{}, false
	}
	f := strings.Fields(s[close+1:])
	if len(f) < 3 {
		return procInfo{}, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgid, err2 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil {
		return procInfo{}, false
	}
	return procInfo{pid: pid, ppid: ppid, pgid: pgid, state: f[0], comm: s[open+1 : close]}, true
}
