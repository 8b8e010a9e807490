package rehearsal_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/bundle/bundletest"
	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/rehearsal"
	"github.com/rehearse/rehearse/internal/report"
	"github.com/rehearse/rehearse/internal/secret"
	"github.com/rehearse/rehearse/internal/supervise"
	"github.com/rehearse/rehearse/internal/tokenizer"
	"github.com/rehearse/rehearse/internal/workload"
)

// rehearseExe is the rehearse binary the servers are launched from as
// {rehearse} sim: built once, without the race detector, so that the
// simulators start and run at their normal speed.
var rehearseExe string

func TestMain(m *testing.M) {
	if os.Getenv(testRouterEnv) != "" {
		// Launched as a rehearsal's router (replicas_test.go).
		os.Exit(testRouter(os.Args[1:]))
	}
	dir, err := os.MkdirTemp("", "rehearsal-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	rehearseExe = filepath.Join(dir, "rehearse")
	build := exec.Command("go", "build", "-o", rehearseExe, "github.com/rehearse/rehearse/cmd/rehearse")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "building the rehearse binary for the simulated servers: %v\n", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	// An empty Hugging Face cache of the tests' own and the Hub offline:
	// no test reads this machine's cache or reaches the network.
	for k, v := range map[string]string{"HF_HUB_CACHE": filepath.Join(dir, "hf-cache"), "HF_HUB_OFFLINE": "1", "HF_ENDPOINT": "http://127.0.0.1:9", "HF_TOKEN": "", "HUGGING_FACE_HUB_TOKEN": ""} {
		os.Setenv(k, v)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// simServer is a rehearsal-file server entry launching `rehearse sim`.
func simServer(name, engine string, extra ...string) string {
	return simServerAt(name, engine, "20", extra...)
}

// simServerAt is simServer at a time scale.
func simServerAt(name, engine, timeScale string, extra ...string) string {
	args := []string{`"{rehearse}"`, "sim", "--engine", engine, "--port", `"{port}"`, "--time-scale", timeScale, "--seed", "1", "--model", `"{model}"`}
	for _, e := range extra {
		args = append(args, fmt.Sprintf("%q", e))
	}
	return fmt.Sprintf(`  - name: %s
    launch: [%s]
    env: {HF_TOKEN: hf_supersecretvalue}
    ready: {timeout: 20s}
    stop_grace: 3s
`, name, strings.Join(args, ", "))
}

type run struct {
	cfg    *config.Rehearsal
	dir    string
	mu     sync.Mutex
	events []rehearsal.Event
	onWave func(rehearsal.Event)
}

func newRun(t *testing.T, yaml string) *run {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), "test.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &run{cfg: cfg, dir: filepath.Join(t.TempDir(), "bundle")}
}

func (r *run) do(t *testing.T, ctx context.Context) *rehearsal.Outcome {
	t.Helper()
	// No Counter: output_tokens are the simulator's usage, which equals the
	// tokenizer's count (the runs through the binary use the tokenizer);
	// loading the tokenizer under the race detector would cost seconds.
	out, err := rehearsal.Run(ctx, rehearsal.Options{
		Rehearsal: r.cfg, Dir: r.dir, RehearseExe: rehearseExe,
		Prompts: workload.Texts("Say hello.", "Explain batching in one sentence."),
		Progress: func(ev rehearsal.Event) {
			r.mu.Lock()
			r.events = append(r.events, ev)
			f := r.onWave
			r.mu.Unlock()
			if f != nil && ev.Step == "wave" {
				f(ev)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if out.Results == nil {
		t.Fatal("no results")
	}
	if err := report.Write(r.dir, out.Results); err != nil {
		t.Fatal(err)
	}
	for _, p := range bundletest.Verify(r.dir) {
		t.Errorf("verify: %s", p)
	}
	return out
}

func (r *run) pid(t *testing.T, server string) int {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ev := range r.events {
		if ev.Server == server && ev.PID != 0 {
			return ev.PID
		}
	}
	t.Fatalf("no pid for %s", server)
	return 0
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func assertGone(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("process %d is still alive after the rehearsal", pid)
	}
}

const model = "model: {id: Qwen/Qwen2.5-1.5B-Instruct}\n"

func TestRunTwoSimulatedServers(t *testing.T) {
	t.Setenv("TEST_API_KEY", "sk-supersecretkey")
	// The batching server runs at time scale 2 so that the mechanism
	// check's wave lasts long enough (about half a second) for the 5 ms
	// poller to see it even on a loaded machine.
	r := newRun(t, model+"servers:\n"+simServer("serial", "serial")+simServerAt("batching", "batching", "2")+
		"    api_key_env: TEST_API_KEY\n"+
		"workload: {concurrencies: [1, 4], repeats: 2, max_tokens: 16, timeout: 20s}\n"+
		"mechanism_check: {concurrency: 16, period: 5ms}\n")
	out := r.do(t, context.Background())
	if out.Interrupted || len(out.Failed) > 0 {
		t.Fatalf("outcome: %+v", out)
	}
	res := out.Results
	recorded := 0
	for _, rec := range res.Records {
		if rec.Kind == contract.KindRecorded {
			recorded++
			if !rec.OK {
				t.Errorf("failed record: %+v", rec)
			}
		}
	}
	if want := 2 * 2 * (1 + 4); recorded != want {
		t.Errorf("%d recorded records, want %d", recorded, want)
	}
	if len(res.Aggregates) != 4 || res.Aggregates[2].SpeedupVsBaseline == nil {
		t.Errorf("aggregates: %d, speed-up %v", len(res.Aggregates), res.Aggregates)
	}
	m := res.MechanismCheck
	if m == nil || m.Server != "batching" || m.Max == nil || *m.Max < 2 || len(m.Series) < 3 {
		t.Fatalf("mechanism check: %+v", m)
	}
	for _, s := range res.Servers {
		if !strings.HasPrefix(s.Exit, "stopped by rehearse") {
			t.Errorf("%s exit: %q", s.Name, s.Exit)
		}
		log := readFile(t, filepath.Join(r.dir, s.Log))
		if !strings.Contains(log, "listening on 127.0.0.1:") || !strings.Contains(log, "(deliberate stop; lines below are shutdown)") {
			t.Errorf("%s.log lacks the server's lines or the marker:\n%s", s.Name, log)
		}
		if s.Env["HF_TOKEN"] != secret.Redacted {
			t.Errorf("%s env not redacted: %v", s.Name, s.Env)
		}
		assertGone(t, r.pid(t, s.Name))
	}
	// No secret reaches any file of the bundle.
	files, _ := bundletest.Files(r.dir)
	for _, f := range append(files, bundle.SumsFile) {
		text := readFile(t, filepath.Join(r.dir, f))
		for _, secret := range []string{"hf_supersecretvalue", "sk-supersecretkey"} {
			if strings.Contains(text, secret) {
				t.Errorf("%s contains the secret %q", f, secret)
			}
		}
	}
}

func TestServerKilledMidWave(t *testing.T) {
	// The 8-client wave of the serial server lasts 8 × 64 tokens at ~20
	// tok/s of simulated time, 2.6 s at time scale 10: the kill lands in it.
	r := newRun(t, model+"servers:\n"+simServerAt("serial", "serial", "10")+simServer("batching", "batching")+
		"workload: {concurrencies: [1, 8], repeats: 1, max_tokens: 64, timeout: 20s, extra_body: {ignore_eos: true}}\nmechanism_check: ~\n")
	var once sync.Once
	r.onWave = func(ev rehearsal.Event) {
		if ev.Server == "serial" && ev.Wave != nil && ev.Wave.Concurrency == 1 {
			once.Do(func() {
				pid := r.pid(t, "serial")
				time.AfterFunc(300*time.Millisecond, func() { syscall.Kill(pid, syscall.SIGKILL) })
			})
		}
	}
	out := r.do(t, context.Background())
	if len(out.Failed) != 1 || !strings.Contains(out.Failed[0], "serial: died: was killed by SIGKILL") {
		t.Fatalf("failed = %q", out.Failed)
	}
	res := out.Results
	if !strings.Contains(res.Servers[0].Exit, "during the recorded wave at 8 clients") {
		t.Errorf("serial exit: %q", res.Servers[0].Exit)
	}
	failed := 0
	for _, rec := range res.Records {
		if rec.Server == "serial" && rec.Concurrency == 8 && !rec.OK {
			failed++
			if rec.ErrorKind != contract.ErrConnect && rec.ErrorKind != contract.ErrStreamTruncated {
				t.Errorf("request of the killed server failed as %s: %s", rec.ErrorKind, rec.Error)
			}
		}
	}
	if failed == 0 {
		t.Error("no request of the 8-client wave failed although its server was killed")
	}
	// The run went on with the next server.
	ok := 0
	for _, rec := range res.Records {
		if rec.Server == "batching" && rec.OK {
			ok++
		}
	}
	if ok != 9 {
		t.Errorf("batching: %d successful requests, want 9", ok)
	}
	log := readFile(t, filepath.Join(r.dir, "serial.log"))
	if !strings.Contains(log, "==> rehearse: process was killed by SIGKILL at ") {
		t.Errorf("serial.log does not say when it died:\n%s", log)
	}
	notes := strings.Join(res.Notes, "\n")
	if !strings.Contains(notes, "server serial died") {
		t.Errorf("notes: %s", notes)
	}
}

func TestServerThatExitsAtStartStopsTheRun(t *testing.T) {
	r := newRun(t, model+"servers:\n"+simServer("broken", "bogus")+simServer("batching", "batching")+
		"workload: {concurrencies: [1], repeats: 1, max_tokens: 8}\non_server_failure: stop\n")
	out := r.do(t, context.Background())
	if len(out.Failed) != 1 {
		t.Fatalf("failed = %q", out.Failed)
	}
	for _, want := range []string{"broken: not ready: the process exited with status 2", "last lines of", `--engine "bogus"`} {
		if !strings.Contains(out.Failed[0], want) {
			t.Errorf("failure lacks %q:\n%s", want, out.Failed[0])
		}
	}
	if _, err := os.Stat(filepath.Join(r.dir, "batching.log")); err == nil {
		t.Error("the second server was launched although on_server_failure is stop")
	}
	notes := strings.Join(out.Results.Notes, "\n")
	if !strings.Contains(notes, "server batching was not rehearsed: on_server_failure is stop and broken failed") {
		t.Errorf("notes: %s", notes)
	}
	// The bundle's note names the reason once and the bundle's own log,
	// not the path on the machine that ran it.
	if !strings.Contains(notes, "server broken was not ready: the process exited with status 2 during GET /health; see broken.log") ||
		strings.Contains(notes, r.dir) || strings.Contains(notes, "broken: not ready") {
		t.Errorf("notes: %s", notes)
	}
	if strings.Contains(out.Failed[0], "broken: broken:") {
		t.Errorf("the failure names its server twice: %s", out.Failed[0])
	}
	if len(out.Results.Records) != 0 {
		t.Errorf("%d records from a rehearsal whose servers never ran", len(out.Results.Records))
	}
}

func TestPortAlreadyTaken(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	r := newRun(t, model+"servers:\n"+simServer("serial", "serial")+fmt.Sprintf("    port: %d\n", port)+simServer("batching", "batching")+
		"workload: {concurrencies: [1], repeats: 1, max_tokens: 8}\nmechanism_check: ~\n")
	out := r.do(t, context.Background())
	if len(out.Failed) != 1 || !strings.Contains(out.Failed[0], fmt.Sprintf("port %d is already in use", port)) {
		t.Fatalf("failed = %q", out.Failed)
	}
	if !strings.HasPrefix(out.Results.Servers[0].Exit, "not launched: ") {
		t.Errorf("exit: %q", out.Results.Servers[0].Exit)
	}
	if len(out.Results.Records) != 1 || out.Results.Records[0].Server != "batching" || !out.Results.Records[0].OK {
		t.Errorf("records: %+v", out.Results.Records)
	}
}

func TestInterruptDuringAWave(t *testing.T) {
	r := newRun(t, model+"servers:\n"+simServerAt("serial", "serial", "10")+simServer("batching", "batching")+
		"workload: {concurrencies: [1, 8], repeats: 1, max_tokens: 64, timeout: 20s, extra_body: {ignore_eos: true}}\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.onWave = func(ev rehearsal.Event) {
		if ev.Server == "serial" && ev.Wave != nil && ev.Wave.Concurrency == 1 {
			time.AfterFunc(300*time.Millisecond, cancel)
		}
	}
	out := r.do(t, ctx)
	if !out.Interrupted {
		t.Fatal("not marked interrupted")
	}
	res := out.Results
	canceled := 0
	for _, rec := range res.Records {
		if rec.ErrorKind == contract.ErrCanceled {
			canceled++
		}
	}
	if canceled == 0 {
		t.Error("no request ended as canceled")
	}
	var stopped bool
	for _, w := range res.Waves {
		if w.Concurrency == 8 && strings.HasPrefix(w.Stopped, "canceled") {
			stopped = true
		}
	}
	if !stopped {
		t.Errorf("the interrupted wave is not marked stopped: %+v", res.Waves)
	}
	if _, err := os.Stat(filepath.Join(r.dir, "batching.log")); err == nil {
		t.Error("the next server was launched after the interrupt")
	}
	if !strings.Contains(readFile(t, filepath.Join(r.dir, "serial.log")), "(deliberate stop; lines below are shutdown)") {
		t.Error("serial.log has no stop marker")
	}
	assertGone(t, r.pid(t, "serial"))
	if !strings.Contains(strings.Join(res.Notes, "\n"), "the rehearsal was interrupted") {
		t.Errorf("notes: %q", res.Notes)
	}
}

func TestRefusesANonEmptyFolder(t *testing.T) {
	r := newRun(t, model+"servers:\n"+simServer("serial", "serial"))
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(r.dir, "results.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := rehearsal.Run(context.Background(), rehearsal.Options{Rehearsal: r.cfg, Dir: r.dir})
	if err == nil || !strings.Contains(err.Error(), "the output folder is not empty") {
		t.Fatalf("got %v", err)
	}
}

// TestSecondCtrlCKillsNow: a server whose group ignores SIGTERM, with a
// grace period of an hour; the second Ctrl-C sends SIGKILL to the group at
// once and says so.
func TestSecondCtrlCKillsNow(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "r.yaml")
	// The shell and its sleep ignore SIGTERM; the simulator stops on it.
	yaml := model + `servers:
  - name: stubborn
    launch: [sh, -c, 'trap "" TERM; "$0" sim --engine batching --port "$1" --time-scale 1 --model "$2"; sleep 3600', "{rehearse}", "{port}", "{model}"]
    ready: {timeout: 20s}
    stop_grace: 1h
workload: {concurrencies: [1], repeats: 3, max_tokens: 64, timeout: 20s, extra_body: {ignore_eos: true}}
mechanism_check: ~
`
	cmd, stderr, out := startRun(t, dir, file, yaml)
	defer cmd.Process.Kill()
	var pid int
	var lines []string
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		line := sc.Text()
		lines = append(lines, line)
		if i := strings.Index(line, "running as pid "); i >= 0 {
			fmt.Sscanf(line[i:], "running as pid %d", &pid)
		}
		if strings.Contains(line, "ready after") {
			// The second Ctrl-C goes once the first has started the stop
			// (two signals sent together may arrive as one).
			cmd.Process.Signal(os.Interrupt)
			go func() {
				for !strings.Contains(readFileIfAny(filepath.Join(out, "stubborn.log")), "(deliberate stop; lines below are shutdown)") {
					time.Sleep(20 * time.Millisecond)
				}
				cmd.Process.Signal(os.Interrupt)
			}()
		}
	}
	cmd.Wait()
	all := strings.Join(lines, "\n")
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Fatalf("exit status %d, want 130; stderr:\n%s", code, all)
	}
	if !strings.Contains(all, "interrupted again: SIGKILL to the servers' process groups now") {
		t.Errorf("stderr does not say the second interrupt kills:\n%s", all)
	}
	if !strings.Contains(readFile(t, filepath.Join(out, "stubborn.log")), "SIGKILL sent to the group") {
		t.Error("stubborn.log has no SIGKILL line")
	}
	if pid == 0 {
		t.Fatal("no pid")
	}
	if left := liveInGroup(pid); len(left) > 0 {
		t.Errorf("process group %d still has %v", pid, left)
	}
}

// liveInGroup lists the processes of group pgid that are not zombies (a
// killed orphan waits to be reaped by init, which may take its time).
func liveInGroup(pgid int) []string {
	var left []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(b), ')')
		f := strings.Fields(string(b[i+1:]))
		if len(f) >= 3 && f[0] != "Z" && f[2] == fmt.Sprint(pgid) {
			left = append(left, string(b[:i+1]))
		}
	}
	return left
}

func readFileIfAny(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// TestEmptyAPIKeyIsRefused: run reads api_key_env with the rule bench
// applies to --api-key-env (config.APIKey).
func TestEmptyAPIKeyIsRefused(t *testing.T) {
	t.Setenv("REHEARSE_EMPTY_KEY", "")
	r := newRun(t, model+"servers:\n  - name: remote\n    base_url: http://127.0.0.1:1\n    api_key_env: REHEARSE_EMPTY_KEY\n"+
		"workload: {concurrencies: [1], repeats: 1, max_tokens: 8}\nmechanism_check: ~\n")
	out := r.do(t, context.Background())
	if len(out.Failed) != 1 || !strings.Contains(out.Failed[0], "servers[0].api_key_env: $REHEARSE_EMPTY_KEY: the variable is empty") {
		t.Fatalf("failed = %q", out.Failed)
	}
}

// TestRunningServerThatIsDown: a base_url server nobody listens on is named
// in the failure (not "server").
func TestRunningServerThatIsDown(t *testing.T) {
	r := newRun(t, model+"servers:\n  - name: remote\n    base_url: http://127.0.0.1:1\n    ready: {timeout: 300ms}\n"+
		"workload: {concurrencies: [1], repeats: 1, max_tokens: 8}\nmechanism_check: ~\n")
	out := r.do(t, context.Background())
	if len(out.Failed) != 1 || !strings.HasPrefix(out.Failed[0], "remote: not ready: ") {
		t.Fatalf("failed = %q", out.Failed)
	}
}

// TestServerAlreadyRunning drives a server rehearse did not launch: no log,
// no stop, the same waves.
func TestServerAlreadyRunning(t *testing.T) {
	portFile := filepath.Join(t.TempDir(), "port")
	sim := exec.Command(rehearseExe, "sim", "--engine", "batching", "--port", "0", "--port-file", portFile, "--time-scale", "20", "--quiet")
	if err := sim.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		sim.Process.Signal(syscall.SIGTERM)
		sim.Wait()
	}()
	var port string
	for deadline := time.Now().Add(20 * time.Second); port == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(portFile)
		port = strings.TrimSpace(string(b))
	}
	if port == "" {
		t.Fatal("the simulator never wrote its port")
	}
	r := newRun(t, "model: {id: Qwen/Qwen2.5-1.5B-Instruct}\nservers:\n  - name: remote\n    base_url: http://127.0.0.1:"+port+"/\n"+
		"workload: {concurrencies: [2], repeats: 2, max_tokens: 8}\nmechanism_check: {concurrency: 4, period: 5ms}\n")
	out := r.do(t, context.Background())
	if len(out.Failed) > 0 {
		t.Fatalf("failed: %q", out.Failed)
	}
	res := out.Results
	s := res.Servers[0]
	if s.BaseURL != "http://127.0.0.1:"+port || len(s.LaunchArgv) != 0 || s.Log != "" || s.Exit != "" {
		t.Errorf("server: %+v", s)
	}
	if len(res.Records) != 2*2+4 || res.MechanismCheck == nil || len(res.MechanismCheck.Series) == 0 {
		t.Errorf("%d records, mechanism check %+v", len(res.Records), res.MechanismCheck)
	}
	if res.Baseline != nil {
		t.Errorf("one server, yet baseline %q", *res.Baseline)
	}
}

// TestWarmupAndOpenLoop runs a warm-up wave (so nothing is cold) and
// open-loop waves after the closed-loop ones.
func TestWarmupAndOpenLoop(t *testing.T) {
	r := newRun(t, model+"servers:\n"+simServer("batching", "batching")+
		"workload:\n  concurrencies: [2]\n  repeats: 2\n  max_tokens: 8\n  warmup_waves: 1\n"+
		"  open_loop: {request_rates_rps: [50], arrival: poisson, seed: 7, num_requests: 6}\nmechanism_check: ~\n")
	out := r.do(t, context.Background())
	if len(out.Failed) > 0 {
		t.Fatalf("failed: %q", out.Failed)
	}
	kinds := map[string]int{}
	for _, w := range out.Results.Waves {
		kinds[w.Kind+"/"+w.Mode]++
		if w.Cold {
			t.Errorf("wave %d is cold after a warm-up", w.ID)
		}
	}
	if kinds["warmup/closed"] != 1 || kinds["recorded/closed"] != 2 || kinds["recorded/open"] != 2 {
		t.Errorf("waves by kind: %v", kinds)
	}
	var open int
	for _, a := range out.Results.Aggregates {
		if a.Mode == contract.ModeOpen {
			open++
			if a.Failures.Total != 12 || a.Lateness == nil {
				t.Errorf("open-loop aggregate: %+v", a)
			}
		}
	}
	if open != 1 {
		t.Errorf("%d open-loop aggregates, want 1", open)
	}
}

// TestDemoBundleVerifies runs `rehearse demo` (the embedded
// examples/simulated.yaml) at time scale 200: the canonical rehearsal's
// bundle must verify.
func TestDemoBundleVerifies(t *testing.T) {
	if testing.Short() {
		t.Skip("the demo takes seconds even at time scale 200")
	}
	out := filepath.Join(t.TempDir(), "demo")
	cmd := exec.Command(rehearseExe, "demo", "-q", "-o", out, "--time-scale", "200")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("demo: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	for _, p := range bundletest.Verify(out) {
		t.Errorf("verify: %s", p)
	}
	res, err := bundle.ReadResults(out)
	if err != nil {
		t.Fatal(err)
	}
	sim := res.Provenance.Simulation
	if sim == nil || sim.TimeScale != 200 || sim.Profiles["serial"] == "" || sim.Profiles["batching"] == "" {
		t.Errorf("simulation provenance: %+v", sim)
	}
	if res.Workload.TimeoutS != 0.3 || len(res.Aggregates) != 8 || res.MechanismCheck == nil {
		t.Errorf("timeout %v s, %d aggregates, mechanism check %v", res.Workload.TimeoutS, len(res.Aggregates), res.MechanismCheck)
	}
	for _, want := range []string{"clients", "serial tok/s", "speed-up", "Verified:", "time scale 200", "rehearse verify " + out} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("demo output lacks %q:\n%s", want, stdout.String())
		}
	}
}

// bundleFilesContaining lists the files under dir (every one, not only
// those the bundle names) whose bytes contain s.
func bundleFilesContaining(t *testing.T, dir, s string) []string {
	t.Helper()
	var hits []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), s) {
			hits = append(hits, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hits
}

var markerLine = regexp.MustCompile("\n" + regexp.QuoteMeta(supervise.MarkerPrefix) + "[^\n]*\n")

// TestServerLogIsScrubbedOfSecrets: a launcher that prints its environment
// and its argv (vLLM does) must not put a known secret into the bundle: the
// values of secret-named variables (set in the file or inherited), of
// api_key_env, and of secret flags are replaced in the stored log, also
// when one arrives in two writes; everything else of the log is kept.
func TestServerLogIsScrubbedOfSecrets(t *testing.T) {
	t.Setenv("TEST_SCRUB_API_KEY", "sk-apikeysecret1")
	t.Setenv("INHERITED_TOKEN", "inherited-tokensecret1")
	launcher := `env; echo "argv: $*"; printf "split: %.6s" "$HF_TOKEN"; sleep 0.2; echo "${HF_TOKEN#??????} end"; ` +
		`exec "$0" sim --engine batching --port "$1" --time-scale 20 --model "$2"`
	r := newRun(t, model+`servers:
  - name: chatty
    launch: [sh, -c, '`+launcher+`', "{rehearse}", "{port}", "{model}", --api-key, sk-argvsecret1, --hf-token=hf_argvsecret1]
    env: {HF_TOKEN: hf_envsecret1, PLAIN_SETTING: plain-visible-value}
    api_key_env: TEST_SCRUB_API_KEY
    ready: {timeout: 20s}
    stop_grace: 3s
workload: {concurrencies: [1], repeats: 1, max_tokens: 8}
mechanism_check: ~
`)
	out := r.do(t, context.Background())
	if len(out.Failed) > 0 {
		t.Fatalf("failed: %q", out.Failed)
	}
	for _, secret := range []string{"sk-apikeysecret1", "inherited-tokensecret1", "sk-argvsecret1", "hf_argvsecret1", "hf_envsecret1", "secret1"} {
		if hits := bundleFilesContaining(t, r.dir, secret); len(hits) > 0 {
			t.Errorf("%q is in %v", secret, hits)
		}
	}
	log := readFile(t, filepath.Join(r.dir, "chatty.log"))
	// rehearse's own marker lines land where the server's output then was,
	// which may be inside the line the server wrote in two pieces; the
	// server's line is read with them taken out.
	if !strings.Contains(log, "(deliberate stop; lines below are shutdown)") {
		t.Errorf("chatty.log lacks its stop marker:\n%s", log)
	}
	log = markerLine.ReplaceAllString(log, "")
	for _, want := range []string{
		"PLAIN_SETTING=plain-visible-value", "HF_TOKEN=" + secret.Redacted, "TEST_SCRUB_API_KEY=" + secret.Redacted,
		"INHERITED_TOKEN=" + secret.Redacted, "--api-key " + secret.Redacted + " --hf-token=" + secret.Redacted,
		"split: " + secret.Redacted + " end\n", "listening on 127.0.0.1:",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("chatty.log lacks %q:\n%s", want, log)
		}
	}
}

// TestInterruptCancelsClientsBeforeTheServerStops: on an interrupt the
// clients go first and the server is stopped only once the wave's
// requests in flight have ended and their records are in the journal, so
// none of them is the server answering its own shutdown (the simulator
// aborts its streams with an in-band error on SIGTERM: server_error).
func TestInterruptCancelsClientsBeforeTheServerStops(t *testing.T) {
	r := newRun(t, model+"servers:\n"+simServerAt("serial", "serial", "10")+
		"workload: {concurrencies: [1, 8], repeats: 1, max_tokens: 64, timeout: 20s, extra_body: {ignore_eos: true}}\nmechanism_check: ~\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var waveEnded, journaled = make(chan time.Time, 1), make(chan int, 1)
	r.onWave = func(ev rehearsal.Event) {
		switch ev.Wave.Concurrency {
		case 1:
			time.AfterFunc(300*time.Millisecond, cancel)
		case 8:
			// The wave's records are all journaled by now; the server must
			// not have been told to stop yet.
			waveEnded <- time.Now()
			res, err := bundle.ReadJournal(filepath.Join(r.dir, bundle.JournalFile))
			n := -1
			if err == nil {
				n = len(res.Records)
			}
			journaled <- n
		}
	}
	out := r.do(t, ctx)
	if !out.Interrupted {
		t.Fatal("not marked interrupted")
	}
	// The stop marker's time is taken as SIGTERM goes.
	log := readFile(t, filepath.Join(r.dir, "serial.log"))
	var termAt time.Time
	for _, line := range strings.Split(log, "\n") {
		if rest, ok := strings.CutPrefix(line, supervise.MarkerPrefix+"SIGTERM sent at "); ok && strings.Contains(rest, supervise.StopMarker) {
			termAt, _ = time.Parse(time.RFC3339Nano, strings.Fields(rest)[0])
		}
	}
	if termAt.IsZero() {
		t.Fatalf("serial.log has no stop marker:\n%s", log)
	}
	if ended := <-waveEnded; termAt.Before(ended) {
		t.Errorf("SIGTERM went at %s, before the interrupted wave's records were all journaled (%s)", termAt.Format(time.RFC3339Nano), ended.UTC().Format(time.RFC3339Nano))
	}
	canceled := 0
	for _, rec := range out.Results.Records {
		if rec.Concurrency != 8 {
			continue
		}
		switch {
		case rec.ErrorKind == contract.ErrCanceled:
			canceled++
		case !rec.OK:
			t.Errorf("an in-flight request ended as %s (%s), not canceled", rec.ErrorKind, rec.Error)
		}
	}
	if canceled == 0 {
		t.Error("no request of the interrupted wave ended as canceled")
	}
	if n, want := <-journaled, len(out.Results.Records); n != want {
		t.Errorf("%d records journaled when the wave ended, %d in the bundle", n, want)
	}
	assertGone(t, r.pid(t, "serial"))
}

// runExample runs examples/<name> through the binary at time scale 200,
// one repeat at 1 and 8 clients, and returns its verified results.
func runExample(t *testing.T, name string, edits ...string) *bundle.Results {
	t.Helper()
	src, err := filepath.Abs(filepath.Join("../../examples", name))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	edits = append(edits, `"--time-scale", "10"`, `"--time-scale", "200"`, "concurrencies: [1, 8, 32, 64]", "concurrencies: [1, 8]",
		"repeats: 3", "repeats: 1", "timeout: 6s", "timeout: 2s", "concurrency: 64", "concurrency: 8")
	// Its data files are named from where it is.
	edits = append(edits, "path: data/", "path: "+filepath.Join(filepath.Dir(src), "data")+"/")
	file := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(file, []byte(strings.NewReplacer(edits...).Replace(string(data))), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "bundle")
	if b, err := exec.Command(rehearseExe, "run", "-q", "-f", file, "-o", out).CombinedOutput(); err != nil {
		t.Fatalf("run %s: %v\n%s", name, err, b)
	}
	for _, p := range bundletest.Verify(out) {
		t.Errorf("%s: verify: %s", name, p)
	}
	res, err := bundle.ReadResults(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Records) == 0 {
		t.Fatalf("%s: no records", name)
	}
	return res
}

// inputOf counts prompt i of wl as drive does: its message contents.
func inputOf(tok *tokenizer.Tokenizer, wl bundle.Workload, i int) int {
	if i < len(wl.PromptMessages) && wl.PromptMessages[i] != nil {
		n := 0
		for _, m := range wl.PromptMessages[i] {
			n += tok.Count(m.Content)
		}
		return n
	}
	return tok.Count(wl.Prompts[i])
}

// TestSourceExamplesAgainstSim runs examples/synthetic.yaml, sharegpt.yaml
// and chat.yaml against rehearse sim: every record asks for its prompt's
// max_tokens and counts its prompt's input tokens, and the bundle records
// the source and verifies.
func TestSourceExamplesAgainstSim(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two simulated servers per example")
	}
	tok, err := tokenizer.Embedded("qwen2.5")
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, res *bundle.Results) {
		wl := res.Workload
		for i, r := range res.Records {
			want := wl.MaxTokens
			if r.Prompt < len(wl.PromptMaxTokens) && wl.PromptMaxTokens[r.Prompt] > 0 {
				want = wl.PromptMaxTokens[r.Prompt]
			}
			if n := inputOf(tok, wl, r.Prompt); r.InputTokens == nil || *r.InputTokens != n || r.MaxTokens != want {
				t.Fatalf("%s record %d: input_tokens %v (prompt counts %d), max_tokens %d (want %d)", name, i, r.InputTokens, n, r.MaxTokens, want)
			}
			if u := r.UsageCompletionTokens; r.OK && (u == nil || *u > want) {
				t.Errorf("%s record %d: usage_completion_tokens %v over max_tokens %d", name, i, u, want)
			}
		}
	}

	res := runExample(t, "synthetic.yaml", "count: 256", "count: 16")
	check("synthetic", res)
	wl := res.Workload
	src := wl.PromptSource
	if src == nil || src.Name != "synthetic" || src.Count != 16 || len(src.SHA256) != 64 || src.Params["seed"] != float64(1) ||
		len(wl.Prompts) != 16 || wl.ExtraBody["ignore_eos"] != true {
		t.Fatalf("synthetic: workload %+v, source %+v", wl, src)
	}
	for i, r := range res.Records {
		if n := *r.InputTokens; n < 256 || n > 768 || r.MaxTokens != 128 {
			t.Fatalf("synthetic record %d: %d input tokens, max_tokens %d", i, n, r.MaxTokens)
		}
		// The simulator's own count: its text need not re-tokenize to it.
		if u := r.UsageCompletionTokens; r.OK && (u == nil || *u != 128) {
			t.Errorf("synthetic record %d: usage_completion_tokens %v with ignore_eos, want 128", i, u)
		}
	}

	res = runExample(t, "sharegpt.yaml")
	check("sharegpt", res)
	if src := res.Workload.PromptSource; src == nil || src.Name != "sharegpt" || src.Skipped["empty"] != 1 || src.Count != 8 || len(res.Workload.PromptMaxTokens) != 8 {
		t.Fatalf("sharegpt: source %+v", src)
	}

	res = runExample(t, "chat.yaml")
	check("chat_jsonl", res)
	if src := res.Workload.PromptSource; src == nil || src.Name != "chat_jsonl" || src.Count != 8 || len(res.Workload.PromptMessages) != 8 ||
		res.Workload.PromptMessages[0][0].Role != "system" {
		t.Fatalf("chat: source %+v, messages %v", src, res.Workload.PromptMessages)
	}
}

// startRun writes yaml to file and starts a real `rehearse run` of it into
// dir/bundle, its stderr piped to the test.
func startRun(t *testing.T, dir, file, yaml string) (*exec.Cmd, io.Reader, string) {
	t.Helper()
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "bundle")
	cmd := exec.Command(rehearseExe, "run", "-f", file, "-o", out)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, stderr, out
}
