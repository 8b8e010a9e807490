package drive

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/plan"
)

func TestConnectionsNeeded(t *testing.T) {
	for _, tc := range []struct {
		name   string
		wl     plan.Workload
		warmup int
		want   int
		has    string
	}{
		{"closed: the largest concurrency", plan.Workload{Concurrencies: []int{1, 5000, 64}, Load: plan.Load{Timeout: time.Minute}}, 0, 5000, "concurrency 5000"},
		{"warm-up wider than the waves", plan.Workload{Concurrencies: []int{8}, WarmupWaves: 1}, 100, 100, "warm-up concurrency 100"},
		{"warm-up concurrency without warm-up waves", plan.Workload{Concurrencies: []int{8}}, 100, 8, "concurrency 8"},
		{"mechanism check", plan.Workload{Concurrencies: []int{8}, MechanismCheck: &plan.MechanismCheck{Concurrency: 64}}, 0, 64, "mechanism-check concurrency 64"},
		{"open, capped", plan.Workload{Load: plan.Load{Timeout: 60 * time.Second}, Open: &plan.OpenLoop{RequestRatesRPS: []float64{1000}, NumRequests: 100000, MaxConcurrency: 300}}, 0, 300, "max concurrency 300"},
		{"open: rate × timeout + warm", plan.Workload{Load: plan.Load{Timeout: 60 * time.Second}, Open: &plan.OpenLoop{RequestRatesRPS: []float64{2, 200}, NumRequests: 100000}}, 0, 200*60 + 32, "200 req/s with a 60 s timeout"},
		{"open: fewer requests than that", plan.Workload{Load: plan.Load{Timeout: 60 * time.Second}, Open: &plan.OpenLoop{RequestRatesRPS: []float64{200}, NumRequests: 75}}, 0, 75, "75 requests"},
		{"open: duration only", plan.Workload{Load: plan.Load{Timeout: 10 * time.Second}, Open: &plan.OpenLoop{RequestRatesRPS: []float64{3.5}, Duration: 600 * time.Second}}, 0, 35 + 32, "3.5 req/s with a 10 s timeout"},
		{"open: no timeout", plan.Workload{Open: &plan.OpenLoop{RequestRatesRPS: []float64{3}, NumRequests: 90}}, 0, 90, "no timeout"},
	} {
		wl := tc.wl
		wl.WarmupConcurrency = tc.warmup
		got := ConnectionsNeeded(wl)
		if got.Connections != tc.want || !strings.Contains(got.Because, tc.has) {
			t.Errorf("%s: %+v, want %d because of %q", tc.name, got, tc.want, tc.has)
		}
	}
}

func TestCheckDescriptors(t *testing.T) {
	err := checkDescriptors(Need{Connections: 5000, Because: "concurrency 5000"}, 1024)
	var de *DescriptorError
	if !errors.As(err, &de) {
		t.Fatalf("%v: want a DescriptorError", err)
	}
	want := "the plan keeps up to 5000 connections open (concurrency 5000) and needs 5064 open files with the 64 reserved, but the open-file limit is 1024; raise it with ulimit -n"
	if err.Error() != want {
		t.Fatalf("got  %s\nwant %s", err, want)
	}
	if err := checkDescriptors(Need{Connections: 960}, 1024); err != nil {
		t.Fatalf("960 + 64 within 1024: %v", err)
	}
	limit, ok := openFileLimit()
	if !ok {
		t.Skip("no open-file limit on this platform")
	}
	if err := CheckDescriptors(Need{Connections: int(limit)}); err == nil {
		t.Fatalf("a plan of %d connections passed a limit of %d", limit, limit)
	}
}

const nofileEnv = "REHEARSE_DRIVE_NOFILE"

// CheckDescriptors relies on Go raising the soft open-file limit at start:
// a process started with a soft limit of 256 runs with one near its hard
// limit. The test binary lowers its own soft limit (which Go then leaves
// to its children) and starts itself again to look.
func TestGoRaisesTheOpenFileLimitAtStart(t *testing.T) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skip(err)
	}
	switch os.Getenv(nofileEnv) {
	case "lower":
		lim.Cur = 256
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			t.Fatal(err)
		}
		out, err := selfTest(t, "look").CombinedOutput()
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		os.Stdout.Write(out)
		return
	case "look":
		t.Logf("soft %d hard %d", lim.Cur, lim.Max)
		return
	}
	if lim.Max <= 257 {
		t.Skipf("hard open-file limit %d: nothing to raise", lim.Max)
	}
	out, err := selfTest(t, "lower").CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	_, after, ok := strings.Cut(string(out), "soft ")
	soft, _, _ := strings.Cut(after, " ")
	n, err := strconv.ParseUint(soft, 10, 64)
	if !ok || err != nil {
		t.Fatalf("no limit reported: %s", out)
	}
	if n < lim.Max-1 {
		t.Fatalf("started with a soft limit of 256, ran with %d: Go did not raise it toward the hard limit %d", n, lim.Max)
	}
}

func selfTest(t *testing.T, mode string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^TestGoRaisesTheOpenFileLimitAtStart$", "-test.v")
	cmd.Env = append(os.Environ(), nofileEnv+"="+mode)
	return cmd
}
