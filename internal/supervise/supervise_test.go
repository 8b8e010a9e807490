package supervise

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"
)

// The test binary doubles as the servers' keeper and as the server under
// supervision: with SUPERVISE_CHILD set it runs one of the behaviours below
// instead of tests.
func TestMain(m *testing.M) {
	if code, ok := KeeperMain(); ok {
		// At once: os.Exit of a race-enabled binary waits a second.
		syscall.Exit(code)
	}
	if mode := os.Getenv("SUPERVISE_CHILD"); mode != "" {
		os.Exit(child(mode, os.Args[1:]))
	}
	os.Exit(m.Run())
}

func child(mode string, args []string) int {
	switch mode {
	case "slow-grandchild":
		// A worker that needs a while after SIGTERM to shut down cleanly,
		// as a serving engine's GPU worker does.
		term := make(chan os.Signal, 1)
		signal.Notify(term, syscall.SIGTERM)
		fmt.Println("grandchild ready")
		<-term
		time.Sleep(400 * time.Millisecond)
		fmt.Println("grandchild shut down cleanly")
		return 0
	case "leader-with-worker":
		// A leader that exits at once on SIGTERM, leaving its worker (in
		// the same group) to finish its own shutdown.
		term := make(chan os.Signal, 1)
		signal.Notify(term, syscall.SIGTERM)
		exe, _ := os.Executable()
		gc := exec.Command(exe)
		gc.Env = append(os.Environ(), "SUPERVISE_CHILD=slow-grandchild")
		gc.Stdout, gc.Stderr = os.Stdout, os.Stderr
		if err := gc.Start(); err != nil {
			return 9
		}
		fmt.Printf("grandchild %d\n", gc.Process.Pid)
		<-term
		// At once: os.Exit of a race-enabled binary waits a second.
		syscall.Exit(0)
		return 0
	case "sleeper", "setsid-sleeper":
		// A descendant a wrapper leaves behind; the setsid one has left the
		// server's session and group, as an engine process may.
		if mode == "setsid-sleeper" {
			if _, err := syscall.Setsid(); err != nil {
				return 9
			}
		}
		fmt.Printf("%s %d\n", mode, os.Getpid())
		time.Sleep(5 * time.Minute)
		return 0
	case "supervisor":
		// Plays rehearse: starts a server through a shell wrapper, waits
		// until it is ready, says so, and waits to be killed.
		return supervisor(args)
	case "exit3":
		fmt.Println("loading model weights")
		fmt.Fprintln(os.Stderr, "RuntimeError: CUDA out of memory")
		return 3
	case "serve", "ignore-term", "unhealthy":
		port, _ := strconv.Atoi(args[0])
		if mode == "ignore-term" {
			signal.Ignore(syscall.SIGTERM)
			// A grandchild in the same group, which must not outlive the stop.
			gc := exec.Command("sleep", "60")
			if err := gc.Start(); err != nil {
				return 9
			}
			fmt.Printf("grandchild %d\n", gc.Process.Pid)
		}
		term := make(chan os.Signal, 1)
		if mode != "ignore-term" {
			signal.Notify(term, syscall.SIGTERM)
		}
		mux := http.NewServeMux()
		mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {
			if mode == "unhealthy" {
				http.Error(w, "loading", http.StatusServiceUnavailable)
			}
		})
		mux.HandleFunc("/v1/models", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, `{"object":"list","data":[{"id":"m1"}]}`)
		})
		mux.HandleFunc("/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintln(os.Stderr, "INFO request "+r.Header.Get("Authorization"))
			fmt.Fprint(w, `{"choices":[{"message":{"content":"ok"}}]}`)
		})
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 4
		}
		fmt.Println("listening; TEST_ENV=" + os.Getenv("TEST_ENV"))
		fmt.Fprintln(os.Stderr, "WARNING: generation config differs from the model's defaults")
		go http.Serve(l, mux)
		<-term
		fmt.Fprintln(os.Stderr, "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue")
		return 0
	}
	return 2
}

// orphanLauncher is a wrapper that forks a grandchild, a great-grandchild
// in its own session (whose parent exits at once), and then becomes the
// server listening on the port.
const orphanLauncher = `SUPERVISE_CHILD=sleeper "$0" & (SUPERVISE_CHILD=setsid-sleeper "$0" &); exec "$0" "$1"`

func supervisor(args []string) int {
	exe, _ := os.Executable()
	port, _ := strconv.Atoi(args[0])
	p, err := Start(context.Background(), Spec{
		Name: "wrapped", Argv: []string{"sh", "-c", orphanLauncher, exe, args[0]},
		Env: map[string]string{"SUPERVISE_CHILD": "serve"}, Port: port, LogPath: args[1],
	})
	if err != nil {
		fmt.Println(err)
		return 1
	}
	if err := WaitReady(context.Background(), p, Probe{BaseURL: "http://127.0.0.1:" + args[0], SkipRequest: true, Timeout: time.Minute, Interval: 20 * time.Millisecond}); err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Printf("ready %d\n", p.PID())
	select {}
}

func spec(t *testing.T, mode string, port int) Spec {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Spec{
		Name:      mode,
		Argv:      []string{exe, strconv.Itoa(port)},
		Env:       map[string]string{"SUPERVISE_CHILD": mode, "TEST_ENV": "override"},
		Port:      port,
		LogPath:   filepath.Join(t.TempDir(), mode+".log"),
		StopGrace: 2 * time.Second,
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	p, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func readLog(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestReadyLogAndDeliberateStop(t *testing.T) {
	port := freePort(t)
	s := spec(t, "serve", port)
	s.ShownArgv = []string{"server", "--api-key", "[redacted]"}
	p, err := Start(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop() })
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	if err := WaitReady(context.Background(), p, Probe{BaseURL: base, Model: "m1", APIKey: "sk-test", Timeout: 10 * time.Second, Interval: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if _, exited := p.Exited(); exited {
		t.Fatal("process exited while ready")
	}
	e := p.Stop()
	if !e.Deliberate || e.Killed || e.Code != 0 {
		t.Errorf("exit = %+v, want a deliberate stop with status 0", e)
	}
	log := readLog(t, s.LogPath)
	for _, want := range []string{
		"==> rehearse: launched server --api-key [redacted] at ",
		fmt.Sprintf("==> rehearse: running as pid %d (its own process group)", p.PID()),
		"listening; TEST_ENV=override",       // stdout, with the env override
		"WARNING: generation config differs", // stderr
		"INFO request Bearer sk-test",        // the tiny request reached it
		"==> rehearse: SIGTERM sent at ",     // the marker
		StopMarker,
		"EngineDeadError", // shutdown noise after the marker
		"==> rehearse: process ended at ",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	if strings.Index(log, StopMarker) > strings.Index(log, "EngineDeadError") {
		t.Error("the shutdown error precedes the stop marker")
	}
	notes, err := ScanLog(s.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	if !notes.Stopped || notes.WarningsDuringRunCount != 1 || notes.ShutdownNoiseCount != 1 || notes.DiedEarly != "" {
		t.Errorf("notes = %+v", notes)
	}
	if !strings.Contains(notes.ShutdownNoise[0], "EngineDeadError") || !strings.Contains(notes.WarningsDuringRun[0], "generation config") {
		t.Errorf("lines split wrongly: %+v", notes)
	}
}

func TestExitAtStartShowsLastLogLines(t *testing.T) {
	port := freePort(t)
	s := spec(t, "exit3", port)
	p, err := Start(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	err = WaitReady(context.Background(), p, Probe{BaseURL: "http://127.0.0.1:" + strconv.Itoa(port), Timeout: 10 * time.Second, Interval: 20 * time.Millisecond})
	var nr *NotReadyError
	if !errors.As(err, &nr) {
		t.Fatalf("want NotReadyError, got %v", err)
	}
	for _, want := range []string{"exit3: not ready: the process exited with status 3", "CUDA out of memory", "loading model weights", "exit3.log"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	e := p.Stop()
	if e.Deliberate || e.Code != 3 {
		t.Errorf("exit = %+v", e)
	}
	if !strings.Contains(e.String(), "exited with status 3 at ") || !strings.Contains(e.String(), "before rehearse stopped it") {
		t.Errorf("exit words: %s", e)
	}
	notes, _ := ScanLog(s.LogPath)
	if notes.Stopped || !strings.Contains(notes.DiedEarly, "status 3") {
		t.Errorf("notes = %+v", notes)
	}
}

func TestPortAlreadyTaken(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	s := spec(t, "serve", port)
	_, err = Start(context.Background(), s)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("port %d is already in use", port)) {
		t.Fatalf("got %v", err)
	}
	if _, statErr := os.Stat(s.LogPath); statErr == nil {
		t.Error("a log was created for a server that never launched")
	}
}

func TestKillAfterGraceTakesTheWholeGroup(t *testing.T) {
	port := freePort(t)
	s := spec(t, "ignore-term", port)
	s.StopGrace = 300 * time.Millisecond
	p, err := Start(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if err := WaitReady(context.Background(), p, Probe{BaseURL: "http://127.0.0.1:" + strconv.Itoa(port), SkipRequest: true, Timeout: 10 * time.Second, Interval: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	e := p.Stop()
	if !e.Deliberate || !e.Killed {
		t.Errorf("exit = %+v, want killed after the grace period", e)
	}
	log := readLog(t, s.LogPath)
	var gc int
	for _, line := range strings.Split(log, "\n") {
		if v, ok := strings.CutPrefix(line, "grandchild "); ok {
			gc, _ = strconv.Atoi(v)
		}
	}
	if gc == 0 {
		t.Fatalf("no grandchild pid in log:\n%s", log)
	}
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(gc, 0) == nil {
		// A zombie still answers kill 0 until its parent reaps it; init
		// reaps it after the group is gone.
		if time.Now().After(deadline) {
			t.Fatalf("grandchild %d outlived the stop", gc)
		}
		if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", gc)); err == nil && strings.Contains(string(st), ") Z ") {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(log, "SIGKILL sent to the group") {
		t.Errorf("log lacks the SIGKILL line:\n%s", log)
	}
}

func TestDeathWhileRunningIsNoted(t *testing.T) {
	port := freePort(t)
	s := spec(t, "serve", port)
	p, err := Start(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if err := WaitReady(context.Background(), p, Probe{BaseURL: "http://127.0.0.1:" + strconv.Itoa(port), SkipRequest: true, Timeout: 10 * time.Second, Interval: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if !p.Alive() {
		t.Fatal("a ready process is not alive")
	}
	if err := syscall.Kill(p.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done not closed after the process died")
	}
	if p.Alive() {
		t.Error("a killed process is alive")
	}
	e, ok := p.Exited()
	if !ok || e.Deliberate || e.Signal != "SIGKILL" {
		t.Errorf("exit = %+v", e)
	}
	if again := p.Stop(); again != e {
		t.Errorf("Stop after death changed the exit: %+v", again)
	}
	notes, _ := ScanLog(s.LogPath)
	if !strings.Contains(notes.DiedEarly, "was killed by SIGKILL") || notes.Stopped {
		t.Errorf("notes = %+v", notes)
	}
}

// TestCancelDoesNotStop: Start's context bounds the launch only. The
// server's lifetime is the caller's to end with Stop, so an interrupt that
// cancels the clients' context does not stop the server under them.
func TestCancelDoesNotStop(t *testing.T) {
	port := freePort(t)
	s := spec(t, "serve", port)
	ctx, cancel := context.WithCancel(context.Background())
	p, err := Start(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	if err := WaitReady(ctx, p, Probe{BaseURL: "http://127.0.0.1:" + strconv.Itoa(port), SkipRequest: true, Timeout: 10 * time.Second, Interval: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	cancel()
	// Still serving after the cancel: a readiness probe on a fresh context.
	if err := WaitReady(context.Background(), p, Probe{BaseURL: "http://127.0.0.1:" + strconv.Itoa(port), SkipRequest: true, Timeout: 10 * time.Second, Interval: 20 * time.Millisecond}); err != nil {
		t.Fatalf("the server went with the launch context: %v", err)
	}
	if strings.Contains(readLog(t, s.LogPath), StopMarker) {
		t.Error("a stop marker after cancel")
	}
	if e := p.Stop(); !e.Deliberate {
		t.Errorf("exit = %+v", e)
	}
	if _, err := Start(ctx, spec(t, "serve", freePort(t))); err == nil || !strings.Contains(err.Error(), "not launched: context canceled") {
		t.Errorf("Start on a canceled context: %v", err)
	}
}

func TestNotReadyBeforeTimeout(t *testing.T) {
	port := freePort(t)
	s := spec(t, "unhealthy", port)
	p, err := Start(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	err = WaitReady(context.Background(), p, Probe{BaseURL: "http://127.0.0.1:" + strconv.Itoa(port), Timeout: 2 * time.Second, Interval: 20 * time.Millisecond})
	// Whether the final attempt was answered or still waiting at the
	// deadline depends on scheduling; either way the 503 is named.
	answered := "no answer within 2s; last attempt GET /health: HTTP 503;"
	waiting := "no answer within 2s; GET /health last answered HTTP 503, and the attempt after it was still waiting at the deadline;"
	if err == nil || !strings.Contains(err.Error(), answered) && !strings.Contains(err.Error(), waiting) {
		t.Fatalf("got %v", err)
	}
}

// An attempt cut short by the readiness deadline must not hide the server's
// last real answer: the message names HTTP 503, not "context deadline exceeded".
func TestNotReadyKeepsLastAnswer(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		<-r.Context().Done() // later attempts hang until the deadline
	}))
	defer srv.Close()
	err := WaitReady(context.Background(), nil, Probe{BaseURL: srv.URL, Timeout: 2 * time.Second, Interval: 10 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "no answer within 2s; GET /health last answered HTTP 503, and the attempt after it was still waiting at the deadline") {
		t.Fatalf("got %v", err)
	}
}

func TestModelNotServed(t *testing.T) {
	port := freePort(t)
	s := spec(t, "serve", port)
	p, err := Start(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	err = WaitReady(context.Background(), p, Probe{BaseURL: "http://127.0.0.1:" + strconv.Itoa(port), Model: "other", Timeout: 10 * time.Second, Interval: 20 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), `serve: not ready: GET /v1/models: serve: model "other" is not served: the server's GET /v1/models lists "m1"`) {
		t.Fatalf("got %v", err)
	}
}

func TestLaunchOfMissingProgram(t *testing.T) {
	_, err := Start(context.Background(), Spec{Name: "x", Argv: []string{"/no/such/server"}, LogPath: filepath.Join(t.TempDir(), "x.log")})
	if err == nil || !strings.Contains(err.Error(), `x: cannot launch "/no/such/server"`) {
		t.Fatalf("got %v", err)
	}
}

func TestTailLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.log")
	var b strings.Builder
	for i := range 100000 {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := TailLines(path, 3)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, "|") != "line 99997|line 99998|line 99999" {
		t.Errorf("got %q", got)
	}
}

func TestScanLogWhatCounts(t *testing.T) {
	long := "WARNING " + strings.Repeat("é", 400)
	log := strings.Join([]string{
		MarkerPrefix + "launched x at t",
		"INFO: started",
		`request id=1 status=client_gone output_tokens=94 error="Cannot write to closing transport"`,
		"WARNING: FlashAttention 2 is unsupported; using Triton",
		long,
		"Traceback (most recent call last):",
		"",
		MarkerPrefix + "SIGTERM sent at t " + StopMarker,
		"INFO: shutting down",
		`request id=2 status=client_gone error="x"`,
		"vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue",
		MarkerPrefix + "process ended at t (status 0)",
	}, "\n") + "\n"
	path := filepath.Join(t.TempDir(), "s.log")
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	n, err := ScanLog(path)
	if err != nil {
		t.Fatal(err)
	}
	if n.WarningsDuringRunCount != 3 || n.ShutdownNoiseCount != 1 || n.ShutdownLines != 3 || n.StopLine != 8 || n.Lines != 12 {
		t.Errorf("notes = %+v", n)
	}
	if got := n.WarningsDuringRun[1]; len(got) > MaxNoteLineBytes+len("…") || !strings.HasSuffix(got, "…") || !utf8.ValidString(got) {
		t.Errorf("long line kept as %d bytes: %q", len(got), got)
	}
}

// grandchildPID waits for the child to write its grandchild's pid into the
// log and returns it.
func grandchildPID(t *testing.T, path string, want string) int {
	t.Helper()
	for {
		log := readLog(t, path)
		if strings.Contains(log, want) {
			for _, line := range strings.Split(log, "\n") {
				if v, ok := strings.CutPrefix(line, "grandchild "); ok {
					if gc, err := strconv.Atoi(v); err == nil {
						return gc
					}
				}
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && !strings.Contains(string(st), ") Z ")
}

// TestStopGivesTheGroupItsGrace stops a leader that exits at once on
// SIGTERM while its worker takes a while to shut down: the worker keeps the
// grace period (it is not killed when the leader exits), and Stop returns
// only once it is gone.
func TestStopGivesTheGroupItsGrace(t *testing.T) {
	s := spec(t, "leader-with-worker", 0)
	s.StopGrace = time.Minute
	p, err := Start(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	gc := grandchildPID(t, s.LogPath, "grandchild ready")
	e := p.Stop()
	if alive(gc) {
		t.Errorf("Stop returned while the worker %d still ran", gc)
	}
	if !e.Deliberate || e.Killed {
		t.Errorf("exit = %+v, want a deliberate stop without SIGKILL", e)
	}
	log := readLog(t, s.LogPath)
	if !strings.Contains(log, "grandchild shut down cleanly") {
		t.Errorf("the worker's clean shutdown was cut short:\n%s", log)
	}
	if strings.Contains(log, "SIGKILL") {
		t.Errorf("SIGKILL within the grace period:\n%s", log)
	}
}

// TestKillNowCutsTheGraceShort: a stop with a long grace period, then the
// kill-now function (a second Ctrl-C) sends SIGKILL to the group at once.
func TestKillNowCutsTheGraceShort(t *testing.T) {
	port := freePort(t)
	s := spec(t, "ignore-term", port)
	s.StopGrace = time.Hour
	ctx, killNow := WithKillNow(context.Background())
	p, err := Start(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	gc := grandchildPID(t, s.LogPath, "listening")
	stopped := make(chan Exit)
	go func() { stopped <- p.Stop() }()
	for !strings.Contains(readLog(t, s.LogPath), StopMarker) {
		time.Sleep(10 * time.Millisecond)
	}
	killNow()
	e := <-stopped
	if !e.Deliberate || !e.Killed {
		t.Errorf("exit = %+v, want killed", e)
	}
	if alive(gc) {
		t.Errorf("grandchild %d outlived the stop", gc)
	}
	if log := readLog(t, s.LogPath); !strings.Contains(log, "SIGKILL sent to the group") || !strings.Contains(log, "interrupted again") {
		t.Errorf("log lacks the SIGKILL line:\n%s", log)
	}
}

// TestEarlyDeathIsWrittenAndFoundWithOnePhrase: the log's marker line, the
// Exit's words and ScanLog agree on how a process that died on its own is
// described.
func TestEarlyDeathIsWrittenAndFoundWithOnePhrase(t *testing.T) {
	s := spec(t, "exit3", 0)
	p, err := Start(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	e, _ := p.Exited()
	if e.Phrase() != "exited with status 3" || e.String() != e.Ended()+", "+EarlyDeathMarker {
		t.Errorf("phrase %q, string %q", e.Phrase(), e.String())
	}
	n, err := ScanLog(s.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	if want := "process exited with status 3 at "; !strings.HasPrefix(n.DiedEarly, want) {
		t.Errorf("DiedEarly = %q, want it to start with %q", n.DiedEarly, want)
	}
	if got := (Exit{Signal: "SIGSEGV"}).Phrase(); got != "was killed by SIGSEGV" {
		t.Errorf("signal phrase %q", got)
	}
}

// TestModelsRouteMissing: a 404 on /v1/models is final (base_url ends in
// /v1?), recognised by its status, not by the error's wording.
func TestModelsRouteMissing(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/health" {
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	err := WaitReady(context.Background(), nil, Probe{Name: "remote", BaseURL: srv.URL, Timeout: time.Hour, Interval: 10 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "remote: not ready: ") || !strings.Contains(err.Error(), "no OpenAI /v1/models route") {
		t.Fatalf("got %v", err)
	}
	var hs *HTTPStatusError
	if !errors.As(get(context.Background(), srv.Client(), srv.URL+"/v1/models", "", nil), &hs) || hs.Code != 404 {
		t.Errorf("get: not an HTTPStatusError 404")
	}
}

// descendants lists the processes below pid, from /proc.
func descendants(pid int) []int {
	children := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(b), ')')
		f := strings.Fields(string(b[i+1:]))
		child, err1 := strconv.Atoi(e.Name())
		parent, err2 := strconv.Atoi(f[1])
		if err1 == nil && err2 == nil {
			children[parent] = append(children[parent], child)
		}
	}
	var out []int
	for queue := children[pid]; len(queue) > 0; queue = queue[1:] {
		out = append(out, queue[0])
		queue = append(queue, children[queue[0]]...)
	}
	return out
}

// TestNoOrphansWhenRehearseIsKilled: rehearse (a helper process here) runs
// a server through a shell wrapper that leaves a grandchild and a setsid
// great-grandchild behind; rehearse is then SIGKILLed, which no handler can
// catch. Every descendant must go, and the port must be free again.
func TestNoOrphansWhenRehearseIsKilled(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	logPath := filepath.Join(t.TempDir(), "wrapped.log")
	helper := exec.Command(exe, strconv.Itoa(port), logPath)
	helper.Env = append(os.Environ(), "SUPERVISE_CHILD=supervisor")
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	pids := map[int]string{}
	t.Cleanup(func() {
		helper.Process.Kill()
		for pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	var server int
	if _, serr := fmt.Sscanf(line, "ready %d", &server); serr != nil {
		t.Fatalf("helper said %q (%v)", line, err)
	}
	pids[server] = "the server"
	// The descendants print their pids into the log; wait for both.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		for _, l := range strings.Split(readLog(t, logPath), "\n") {
			var pid int
			for _, mode := range []string{"sleeper", "setsid-sleeper"} {
				if _, err := fmt.Sscanf(l, mode+" %d", &pid); err == nil {
					pids[pid] = mode
				}
			}
		}
		if len(pids) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the wrapper's descendants never showed up; log:\n%s", readLog(t, logPath))
		}
	}
	for _, pid := range descendants(helper.Process.Pid) {
		if _, known := pids[pid]; !known {
			pids[pid] = "a descendant of rehearse"
		}
	}
	if err := helper.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	helper.Wait()
	// Hang guard only: the keeper acts on its own, at its own pace.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var left []string
		for pid, what := range pids {
			if alive(pid) {
				left = append(left, fmt.Sprintf("%s (pid %d)", what, pid))
			}
		}
		portErr := CheckPortFree(port)
		if len(left) == 0 && portErr == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("30 s after rehearse was killed, still there: %v; port: %v", left, portErr)
		}
	}
}

// TestKillNowBeforeStop: a second Ctrl-C that comes while the clients are
// still being canceled (before the stop) makes the stop SIGKILL at once.
func TestKillNowBeforeStop(t *testing.T) {
	port := freePort(t)
	s := spec(t, "ignore-term", port)
	s.StopGrace = time.Hour
	ctx, killNow := WithKillNow(context.Background())
	p, err := Start(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	grandchildPID(t, s.LogPath, "listening")
	killNow()
	if e := p.Stop(); !e.Deliberate || !e.Killed {
		t.Errorf("exit = %+v, want killed", e)
	}
}

// TestKeeperArgvHoldsNoSecret: the server's argv and environment reach its
// keeper through a pipe; the keeper's own command line names the server only.
func TestKeeperArgvHoldsNoSecret(t *testing.T) {
	s := spec(t, "serve", freePort(t))
	s.Argv = append(s.Argv, "--api-key", "sk-argv-secret")
	s.Env["HF_TOKEN"] = "hf_env_secret"
	p, err := Start(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	var keeper int
	for deadline := time.Now().Add(time.Minute); keeper == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for _, line := range strings.Split(readLog(t, s.LogPath), "\n") {
			if i := strings.Index(line, "kept by pid "); i >= 0 {
				keeper, _ = strconv.Atoi(line[i+len("kept by pid "):])
			}
		}
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", keeper))
	if err != nil {
		t.Fatalf("keeper %d: %v", keeper, err)
	}
	if got := strings.ReplaceAll(strings.TrimRight(string(cmdline), "\x00"), "\x00", " "); got != "rehearse-keeper serve" {
		t.Errorf("keeper's argv is %q", got)
	}
	if env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", keeper)); err == nil && strings.Contains(string(env), "hf_env_secret") {
		t.Error("the server's environment override is in the keeper's own environment")
	}
}

// The readiness modes ask for what they say, and only that: answer takes
// any HTTP answer (a 404 included) and sends no request; models asks
// /v1/models alone (no /health, which hosted APIs lack); a refused key ends
// either at once.
func TestReadyModes(t *testing.T) {
	var paths sync.Map
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths.Store(r.Method+" "+r.URL.Path, true)
		switch {
		case r.Header.Get("Authorization") == "Bearer bad":
			w.WriteHeader(http.StatusUnauthorized)
		case r.URL.Path == "/v1/models":
			w.Write([]byte(`{"data":[{"id":"m1"}]}`))
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()
	seen := func() []string {
		var out []string
		paths.Range(func(k, _ any) bool { out = append(out, k.(string)); return true })
		sort.Strings(out)
		paths.Clear()
		return out
	}
	if err := WaitReady(context.Background(), nil, Probe{BaseURL: srv.URL, Mode: ReadyModels, Model: "m1", Timeout: time.Second}); err != nil {
		t.Fatalf("models: %v", err)
	}
	if got := seen(); strings.Join(got, ",") != "GET /v1/models" {
		t.Errorf("models asked %v", got)
	}
	if err := WaitReady(context.Background(), nil, Probe{BaseURL: srv.URL, Mode: ReadyAnswer, Timeout: time.Second}); err != nil {
		t.Fatalf("answer: %v", err)
	}
	if got := seen(); strings.Join(got, ",") != "GET /v1/models" {
		t.Errorf("answer asked %v", got)
	}
	notFound := httptest.NewServer(http.NotFoundHandler())
	defer notFound.Close()
	if err := WaitReady(context.Background(), nil, Probe{BaseURL: notFound.URL, Mode: ReadyAnswer, Timeout: time.Second}); err != nil {
		t.Errorf("answer: a 404 is an answer: %v", err)
	}
	for _, mode := range []string{ReadyAnswer, ReadyModels} {
		err := WaitReady(context.Background(), nil, Probe{BaseURL: srv.URL, Mode: mode, APIKey: "bad", Timeout: 10 * time.Second})
		if err == nil || !strings.Contains(err.Error(), "HTTP 401") {
			t.Errorf("%s with a refused key: %v", mode, err)
		}
	}
}
