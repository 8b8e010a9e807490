package examples_test

import (
	"context"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/cli"
)

// mainEnv, set in a test's environment, makes this test binary rehearse
// itself: the --workers children it starts (os.Executable) are then the
// real command.
const mainEnv = "REHEARSE_EXAMPLES_TEST_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(mainEnv) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := cli.Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// startSim runs `rehearse sim` in-process on a free port until the test ends.
func startSim(t *testing.T, args ...string) string {
	t.Helper()
	portFile := filepath.Join(t.TempDir(), "port")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- cli.Main(ctx, append([]string{"sim", "--port", "0", "--port-file", portFile}, args...), strings.NewReader(""), io.Discard, io.Discard)
	}()
	t.Cleanup(func() { cancel(); <-done })
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile(portFile); err == nil && strings.HasSuffix(string(b), "\n") {
			return "http://127.0.0.1:" + strings.TrimSpace(string(b))
		}
	}
	t.Fatal("rehearse sim did not write its port")
	return ""
}

// TestSegmentsExampleWithWorkers runs segments.yaml as two worker
// processes (run --workers 2) against three simulators, at the addresses
// the test gives them: the merged bundle verifies, holds the whole plan's
// records from both workers, and the balanced pair's replicas each serve
// half ± 1 of every wave.
func TestSegmentsExampleWithWorkers(t *testing.T) {
	t.Setenv(mainEnv, "1")
	data, err := os.ReadFile("segments.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	for i, args := range [][]string{{"--engine", "serial", "--seed", "1"}, {"--engine", "batching", "--seed", "1"}, {"--engine", "batching", "--seed", "2"}} {
		port := []string{"http://127.0.0.1:8301", "http://127.0.0.1:8302", "http://127.0.0.1:8303"}[i]
		if !strings.Contains(text, port) {
			t.Fatalf("segments.yaml does not name %s", port)
		}
		text = strings.ReplaceAll(text, port, startSim(t, append(args, "--time-scale", "200")...))
	}
	file := filepath.Join(t.TempDir(), "segments.yaml")
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "merged")
	var out, errs strings.Builder
	if code := cli.Main(context.Background(), []string{"run", "-f", file, "--workers", "2", "--quiet", "-o", dir}, strings.NewReader(""), &out, &errs); code != 0 {
		t.Fatalf("run --workers 2: exit %d\n%s\n%s", code, out.String(), errs.String())
	}
	res, err := bundle.ReadVerified(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(res.Provenance.Workers); n != 2 {
		t.Errorf("%d workers in provenance, want 2", n)
	}
	recorded := map[string]int{}
	perWave := map[int][2]int{}
	workers := map[int]bool{}
	for _, r := range res.Records {
		if r.Kind != "recorded" {
			continue
		}
		recorded[r.Server]++
		if r.Worker != nil {
			workers[*r.Worker] = true
		}
		if r.Server == "pair" {
			if r.Replica == nil {
				t.Fatalf("a pair record without its replica: %+v", r)
			}
			c := perWave[r.Wave]
			c[*r.Replica]++
			perWave[r.Wave] = c
		}
	}
	// Per server: 2 repeats of 1 and 8 clients, 2 of 16 open-loop requests.
	if want := 2*1 + 2*8 + 2*16; recorded["serial"] != want || recorded["pair"] != want || len(workers) != 2 {
		t.Errorf("recorded %v from workers %v, want %d per server from both", recorded, workers, want)
	}
	for w, c := range perWave {
		if d := c[0] - c[1]; d > 1 || d < -1 {
			t.Errorf("wave %d: replicas served %d and %d, want half ± 1 each", w, c[0], c[1])
		}
	}
	if s := res.Servers[1]; len(s.Replicas) != 2 || s.Balance != "round-robin" {
		t.Errorf("pair: %+v", s)
	}
	// Each worker measured its clock offset afresh at every barrier; the
	// merged waves carry the largest uncertainty of their workers'.
	w0, err := bundle.ReadResults(filepath.Join(dir+".workers", "worker-0"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range w0.Waves {
		if w.Kind == "mechanism_check" {
			continue // worker 0 runs it whole, alone, with no barrier
		}
		if w.ClockOffsetS == nil || w.OffsetUncertaintyS == nil || w.ReleaseLateS == nil {
			t.Errorf("worker 0's wave %d (%s %s %s): clock offset %v, uncertainty %v, release_late_s %v", w.ID, w.Server, w.Kind, w.Mode, w.ClockOffsetS, w.OffsetUncertaintyS, w.ReleaseLateS)
		}
	}
	for _, w := range res.Waves {
		if w.Kind == "mechanism_check" {
			continue
		}
		if w.OffsetUncertaintyS == nil || w.WorkerReleaseSpreadS == nil {
			t.Errorf("merged wave %d: offset uncertainty %v, release spread %v", w.ID, w.OffsetUncertaintyS, w.WorkerReleaseSpreadS)
		}
	}
}
