package rehearsal_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/rehearsal"
)

// replicatedSim is a server entry of n simulated replicas (batching).
func replicatedSim(name string, n int, extra string) string {
	return simServerAt(name, "batching", "20") + "    replicas: " + string(rune('0'+n)) + "\n" + extra
}

// replicaPorts are the ports of the replicas launched so far, read from
// the progress lines that launched them.
func (r *run) replicaPorts() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, ev := range r.events {
		if !strings.HasPrefix(ev.Text, "launching replica ") {
			continue
		}
		f := strings.Fields(ev.Text)
		for i, a := range f {
			if a == "--port" && i+1 < len(f) {
				out = append(out, f[i+1])
			}
		}
	}
	return out
}

// pids are every pid the rehearsal reported launching for server.
func (r *run) pids(server string) []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int
	for _, ev := range r.events {
		if ev.Server == server && ev.PID != 0 {
			out = append(out, ev.PID)
		}
	}
	return out
}

func TestTwoReplicasBalancedRoundRobin(t *testing.T) {
	r := newRun(t, model+"servers:\n"+replicatedSim("pair", 2, "")+
		"workload: {concurrencies: [4, 5], repeats: 1, max_tokens: 8, timeout: 20s}\n"+
		"mechanism_check: {concurrency: 6, period: 5ms}\n")
	out := r.do(t, context.Background())
	if out.Interrupted || len(out.Failed) > 0 {
		t.Fatalf("outcome: %+v", out)
	}
	res := out.Results
	s := res.Servers[0]
	if len(s.Replicas) != 2 || s.Balance != "round-robin" {
		t.Fatalf("server: %+v", s)
	}
	for j, rp := range s.Replicas {
		if rp.Index != j || rp.Log != "pair.replica-"+string(rune('0'+j))+".log" || !strings.HasPrefix(rp.Exit, "stopped by rehearse") {
			t.Errorf("replica %d: %+v", j, rp)
		}
		log := readFile(t, filepath.Join(r.dir, rp.Log))
		if !strings.Contains(log, "listening on 127.0.0.1:") || !strings.Contains(log, "(deliberate stop; lines below are shutdown)") {
			t.Errorf("%s lacks the server's lines or the marker:\n%s", rp.Log, log)
		}
		if strings.Contains(log, "hf_supersecretvalue") {
			t.Errorf("%s holds the secret", rp.Log)
		}
	}
	if s.Replicas[0].BaseURL == s.Replicas[1].BaseURL {
		t.Errorf("both replicas at %s", s.Replicas[0].BaseURL)
	}
	if _, err := os.Stat(filepath.Join(r.dir, "pair.log")); err == nil {
		t.Error("a pair.log beside the replicas' logs")
	}
	pids := r.pids("pair")
	if len(pids) != 2 {
		t.Fatalf("launched pids %v, want 2", pids)
	}
	for _, pid := range pids {
		assertGone(t, pid)
	}
	// Round-robin over the plan's order: the 4-client wave's client i is
	// the pair's request i, the 5-client wave's request 4 + i.
	for _, rec := range res.Records {
		if rec.Replica == nil {
			t.Fatalf("record without replica: %+v", rec)
		}
		if rec.Kind == contract.KindRecorded && *rec.Replica != rec.Client%2 {
			t.Errorf("client %d sent to replica %d", rec.Client, *rec.Replica)
		}
	}
	want := map[int][]int{4: {2, 2}, 5: {3, 2}}
	for _, a := range res.Aggregates {
		if got := a.ReplicaRequests; len(got) != 2 || got[0] != want[a.Concurrency][0] || got[1] != want[a.Concurrency][1] {
			t.Errorf("%d clients: replica_requests %v, want %v", a.Concurrency, got, want[a.Concurrency])
		}
		if a.GoodputPerGPU != nil {
			t.Errorf("goodput per GPU without gpus: %+v", a.GoodputPerGPU)
		}
	}
	m := res.MechanismCheck
	if m == nil || len(m.Replicas) != 2 {
		t.Fatalf("mechanism check: %+v", m)
	}
	for j, rs := range m.Replicas {
		if rs.Replica != j || len(rs.Series) == 0 {
			t.Errorf("replica %d series: %+v", j, rs)
		}
	}
	readme := readFile(t, filepath.Join(r.dir, "README.md"))
	for _, w := range []string{"pair.replica-0.log", "pair.replica-1.log", "requests per replica"} {
		if !strings.Contains(readme, w) {
			t.Errorf("README.md lacks %q", w)
		}
	}
}

func TestOneReplicaDyingStopsTheOthers(t *testing.T) {
	// Replica 1 exits at once; replica 0 comes up and must be stopped with
	// it, and the note must name the replica.
	r := newRun(t, model+`servers:
  - name: pair
    launch: [sh, -c, 'if [ "$1" = 1 ]; then echo dying; exit 3; fi; exec "$0" sim --engine batching --port "$2" --time-scale 20 --model "$3"', "{rehearse}", "{replica}", "{port}", "{model}"]
    replicas: 2
    gpus: [[0], [1]]
    ready: {timeout: 20s}
    stop_grace: 3s
workload: {concurrencies: [2], repeats: 1, max_tokens: 8, timeout: 20s}
mechanism_check: ~
`)
	out := r.do(t, context.Background())
	if len(out.Failed) != 1 || !strings.Contains(out.Failed[0], "replica 1") {
		t.Fatalf("failed: %q", out.Failed)
	}
	for _, pid := range r.pids("pair") {
		assertGone(t, pid)
	}
	s := out.Results.Servers[0]
	if len(s.Replicas) != 2 || s.Replicas[1].GPUs[0] != 1 {
		t.Fatalf("replicas: %+v", s.Replicas)
	}
	if !strings.Contains(s.Replicas[1].Exit, "exited with status 3") {
		t.Errorf("replica 1 exit: %q", s.Replicas[1].Exit)
	}
	if !strings.HasPrefix(s.Replicas[0].Exit, "stopped by rehearse") {
		t.Errorf("replica 0 exit: %q", s.Replicas[0].Exit)
	}
	notes := strings.Join(out.Results.Notes, "\n")
	if !strings.Contains(notes, "replica 1") || !strings.Contains(notes, "pair.replica-1.log") {
		t.Errorf("notes do not name replica 1 and its log:\n%s", notes)
	}
}

// readBodyWhole makes a test router forward the request body read whole:
// Go's server may close an inbound body once the response head is flushed,
// and a transport still waiting for the body's EOF then drops the backend
// connection mid-stream (the client sees stream_truncated; 1 wave in 10
// under -race on two loaded cores).
func readBodyWhole(pr *httputil.ProxyRequest) {
	body, err := io.ReadAll(pr.In.Body)
	if err != nil {
		return
	}
	pr.Out.Body, pr.Out.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
}

// TestRouterInFront runs two replicas behind a router rehearse does not
// launch (an httptest reverse proxy of its own, round-robin): the records
// carry no replica, since the router chose it.
func TestRouterInFront(t *testing.T) {
	var r *run
	var next atomic.Int64
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			ports := r.replicaPorts()
			u, _ := url.Parse("http://127.0.0.1:" + ports[int(next.Add(1)-1)%len(ports)])
			pr.SetURL(u)
			readBodyWhole(pr)
		},
		FlushInterval: -1,
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if len(r.replicaPorts()) < 2 {
			http.Error(w, "no replicas yet", http.StatusServiceUnavailable)
			return
		}
		proxy.ServeHTTP(w, req)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	r = newRun(t, model+"servers:\n"+replicatedSim("fronted", 2, "    router: {base_url: 'http://"+ln.Addr().String()+"'}\n")+
		"workload: {concurrencies: [2], repeats: 1, max_tokens: 8, timeout: 20s}\nmechanism_check: ~\n")
	out := r.do(t, context.Background())
	if len(out.Failed) > 0 {
		t.Fatalf("failed: %q", out.Failed)
	}
	for _, rec := range out.Results.Records {
		if rec.Replica != nil {
			t.Errorf("a record behind a router names replica %d", *rec.Replica)
		}
		if !rec.OK {
			t.Errorf("failed record: %+v", rec)
		}
	}
	if s := out.Results.Servers[0]; s.Router == nil || s.Balance != "" {
		t.Errorf("server: %+v", s)
	}
}

// TestReplicasExampleAgainstSim runs examples/replicas.yaml through the
// binary: the pair's records alternate between its replicas, each serving
// half ± 1 of every wave, and the bundle verifies.
func TestReplicasExampleAgainstSim(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three simulated servers")
	}
	res := runExample(t, "replicas.yaml")
	perWave := map[int][2]int{}
	for _, rec := range res.Records {
		if rec.Server != "pair" {
			if rec.Replica != nil {
				t.Fatalf("a record of %s names replica %d", rec.Server, *rec.Replica)
			}
			continue
		}
		if rec.Replica == nil {
			t.Fatalf("a record of the pair names no replica: %+v", rec)
		}
		c := perWave[rec.Wave]
		c[*rec.Replica]++
		perWave[rec.Wave] = c
	}
	if len(perWave) == 0 {
		t.Fatal("no waves of the pair")
	}
	for w, c := range perWave {
		if d := c[0] - c[1]; d < -1 || d > 1 {
			t.Errorf("wave %d: replicas served %d and %d", w, c[0], c[1])
		}
	}
	for _, s := range res.Servers {
		if s.Name == "pair" && (len(s.Replicas) != 2 || s.Replicas[1].Log != "pair.replica-1.log") {
			t.Errorf("pair: %+v", s.Replicas)
		}
	}
}

// TestInterruptStopsEveryReplica cancels the rehearsal (Ctrl-C) after the
// pair's first wave: both replicas are stopped deliberately, with the
// marker in each log, and no process is left.
func TestInterruptStopsEveryReplica(t *testing.T) {
	r := newRun(t, model+"servers:\n"+replicatedSim("pair", 2, "")+
		"workload: {concurrencies: [2, 4, 8], repeats: 2, max_tokens: 8, timeout: 20s}\nmechanism_check: ~\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.onWave = func(rehearsal.Event) { cancel() }
	out := r.do(t, ctx)
	if !out.Interrupted {
		t.Fatal("not marked interrupted")
	}
	pids := r.pids("pair")
	if len(pids) != 2 {
		t.Fatalf("pids %v", pids)
	}
	for _, pid := range pids {
		assertGone(t, pid)
	}
	for _, rp := range out.Results.Servers[0].Replicas {
		if !strings.HasPrefix(rp.Exit, "stopped by rehearse") {
			t.Errorf("replica %d exit: %q", rp.Index, rp.Exit)
		}
		if !strings.Contains(readFile(t, filepath.Join(r.dir, rp.Log)), "(deliberate stop; lines below are shutdown)") {
			t.Errorf("%s has no stop marker", rp.Log)
		}
	}
}

// testRouterEnv makes the test binary a round-robin reverse proxy: argv
// PORT URL,URL,...
const testRouterEnv = "REHEARSE_TEST_ROUTER"

func testRouter(args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "test router: want PORT URLS")
		return 2
	}
	var backends []*url.URL
	for _, s := range strings.Split(args[1], ",") {
		u, err := url.Parse(s)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		backends = append(backends, u)
	}
	var next atomic.Int64
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(backends[int(next.Add(1)-1)%len(backends)])
			readBodyWhole(pr)
		},
		FlushInterval: -1,
	}
	fmt.Printf("test router on port %s for %s\n", args[0], args[1])
	if err := http.ListenAndServe("127.0.0.1:"+args[0], proxy); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// TestLaunchedRouter launches a router after the replicas ({replica_urls})
// and stops it before them; its log is the server's router log.
func TestLaunchedRouter(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r := newRun(t, model+"servers:\n"+replicatedSim("fronted", 2, fmt.Sprintf(
		"    router: {launch: [%q, \"{port}\", \"{replica_urls}\"], env: {%s: \"1\"}}\n", self, testRouterEnv))+
		"workload: {concurrencies: [4], repeats: 1, max_tokens: 8, timeout: 20s}\nmechanism_check: {concurrency: 4, period: 5ms}\n")
	out := r.do(t, context.Background())
	if len(out.Failed) > 0 {
		t.Fatalf("failed: %q", out.Failed)
	}
	s := out.Results.Servers[0]
	if s.Router == nil || s.Router.Log != "fronted.router.log" || !strings.HasPrefix(s.Router.Exit, "stopped by rehearse") {
		t.Fatalf("router: %+v", s.Router)
	}
	log := readFile(t, filepath.Join(r.dir, s.Router.Log))
	if !strings.Contains(log, "test router on port") || !strings.Contains(log, s.Replicas[0].BaseURL+","+s.Replicas[1].BaseURL) {
		t.Errorf("router log:\n%s", log)
	}
	for _, rec := range out.Results.Records {
		if !rec.OK || rec.Replica != nil {
			t.Errorf("record: ok %v (%s: %s), replica %v", rec.OK, rec.ErrorKind, rec.Error, rec.Replica)
		}
	}
	// Three processes (two replicas, the router), all gone.
	pids := r.pids("fronted")
	if len(pids) != 3 {
		t.Errorf("pids %v", pids)
	}
	for _, pid := range pids {
		assertGone(t, pid)
	}
	// The router's metrics are not the engines': the replicas were polled.
	if m := out.Results.MechanismCheck; m == nil || len(m.Replicas) != 2 {
		t.Errorf("mechanism check: %+v", m)
	}
}

// TestReplicaKilledMidWave kills replica 1 during the pair's 8-client wave:
// its requests fail against it (naming it), the server is noted dead with
// the replica named, replica 0 is stopped with it, and its remaining
// waves are not run.
func TestReplicaKilledMidWave(t *testing.T) {
	// 64 tokens at ~20 tok/s of simulated time, time scale 10: each
	// request of the serial engines lasts ~0.3 s, a 8-client wave (4 per
	// replica, one at a time) ~1.3 s: the kill lands in it.
	r := newRun(t, model+"servers:\n"+simServerAt("pair", "serial", "10")+"    replicas: 2\n"+
		"workload: {concurrencies: [1, 8, 4], repeats: 1, max_tokens: 64, timeout: 20s, extra_body: {ignore_eos: true}}\nmechanism_check: ~\n")
	var once sync.Once
	r.onWave = func(ev rehearsal.Event) {
		if ev.Wave != nil && ev.Wave.Concurrency == 1 {
			once.Do(func() {
				pid := r.pids("pair")[1]
				time.AfterFunc(300*time.Millisecond, func() { syscall.Kill(pid, syscall.SIGKILL) })
			})
		}
	}
	out := r.do(t, context.Background())
	if len(out.Failed) != 1 || !strings.Contains(out.Failed[0], "pair: died: replica 1 was killed by SIGKILL") {
		t.Fatalf("failed = %q", out.Failed)
	}
	res := out.Results
	s := res.Servers[0]
	if !strings.Contains(s.Replicas[1].Exit, "recorded wave at 8 clients") || !strings.HasPrefix(s.Replicas[0].Exit, "stopped by rehearse") {
		t.Errorf("exits: %q, %q", s.Replicas[0].Exit, s.Replicas[1].Exit)
	}
	for _, rec := range res.Records {
		if rec.Concurrency == 4 {
			t.Fatal("the wave after the death was run")
		}
		if rec.Concurrency == 8 && !rec.OK && *rec.Replica != 1 {
			t.Errorf("a request to replica %d failed: %s", *rec.Replica, rec.Error)
		}
	}
	for _, pid := range r.pids("pair") {
		assertGone(t, pid)
	}
	if notes := strings.Join(res.Notes, "\n"); !strings.Contains(notes, "server pair died: its replica 1 was killed by SIGKILL") {
		t.Errorf("notes: %s", notes)
	}
}
