package cli

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/coordinate"
)

// planned is what the single-process plan says of a record: the prompt it
// sends and, in the open loop, when it is meant to go.
type planned struct {
	prompt   int
	intended float64
}

// recordsByPlace keys a bundle's recorded records by where they belong in
// the plan: wave (mode, load, repeat) and client or request index.
func recordsByPlace(t *testing.T, res *bundle.Results) map[string]planned {
	t.Helper()
	waves := map[int]contract.Wave{}
	for _, w := range res.Waves {
		waves[w.ID] = w
	}
	out := map[string]planned{}
	for _, r := range res.Records {
		if r.Kind != contract.KindRecorded {
			continue
		}
		w := waves[r.Wave]
		k := fmt.Sprintf("%s %s r%d #%d", w.Mode, contract.KeyOf(w).LoadLabel(), w.Repeat, r.Client)
		if _, dup := out[k]; dup {
			t.Fatalf("two records at %s", k)
		}
		out[k] = planned{r.Prompt, r.IntendedStartS}
	}
	return out
}

// TestWorkersEqualTheSingleProcessPlan: bench --workers 4 (four worker
// processes of this binary and a coordinator) against the simulator gives
// a merged bundle whose records are the single-process plan's: the same
// count, the same prompt per (wave, client or request index), the same
// intended start of every open-loop request; it verifies, and reports
// each wave's release spread across the workers.
func TestWorkersEqualTheSingleProcessPlan(t *testing.T) {
	t.Setenv(rehearseMainEnv, "1") // the workers are this test binary, as rehearse
	url, _, _ := startSim(t, "--engine", "batching", "--time-scale", "1000", "--seed", "3")
	args := []string{"bench", "--base-url", url, "--tokenizer", "usage", "--progress", "never",
		"--concurrency", "1,6", "--repeats", "2", "--request-rate", "40", "--arrival", "poisson", "--seed", "7", "--num-requests", "11"}
	one := filepath.Join(t.TempDir(), "one")
	if code, _, stderr := runMain(context.Background(), append(args, "-o", one)...); code != 0 {
		t.Fatalf("single process: exit %d: %s", code, stderr)
	}
	four := filepath.Join(t.TempDir(), "four")
	code, stdout, stderr := runMain(context.Background(), append(args, "-o", four, "--workers", "4")...)
	if code != 0 {
		t.Fatalf("--workers 4: exit %d: %s\n%s", code, stderr, stdout)
	}
	single, err := bundle.ReadResults(one)
	if err != nil {
		t.Fatal(err)
	}
	merged, err := bundle.ReadVerified(context.Background(), four)
	if err != nil {
		t.Fatal(err)
	}
	want, got := recordsByPlace(t, single), recordsByPlace(t, merged)
	if len(got) != len(want) || len(got) != 2*1+2*6+2*11 {
		t.Fatalf("%d records merged, %d in one process (want %d)", len(got), len(want), 2*1+2*6+2*11)
	}
	for k, w := range want {
		g, ok := got[k]
		switch {
		case !ok:
			t.Errorf("%s: not in the merged bundle", k)
		case g.prompt != w.prompt:
			t.Errorf("%s: prompt %d, the single process sent %d", k, g.prompt, w.prompt)
		case strings.HasPrefix(k, contract.ModeOpen) && g.intended != w.intended:
			t.Errorf("%s: intended start %v, the single process's %v", k, g.intended, w.intended)
		}
	}
	if n := len(merged.Provenance.Workers); n != 4 {
		t.Errorf("%d workers in provenance", n)
	}
	workers := map[int]bool{}
	for _, r := range merged.Records {
		if r.Worker == nil {
			t.Fatalf("a merged record without its worker: %+v", r)
		}
		workers[*r.Worker] = true
	}
	if len(workers) != 4 {
		t.Errorf("records from workers %v, want all four", workers)
	}
	for _, w := range merged.Waves {
		if w.WorkerReleaseSpreadS == nil || *w.WorkerReleaseSpreadS < 0 || len(w.Workers) != 4 {
			t.Errorf("wave %d: release spread %v over %d workers", w.ID, w.WorkerReleaseSpreadS, len(w.Workers))
		}
	}
	readme, err := os.ReadFile(filepath.Join(four, bundle.ReadmeFile))
	if err != nil || !strings.Contains(string(readme), "## Load-generator workers") || !strings.Contains(string(readme), "release spread (ms)") {
		t.Errorf("the merged README does not show the workers: %v", err)
	}
	if !strings.Contains(stdout, "cross-worker release spread") {
		t.Errorf("stdout does not report the release spread:\n%s", stdout)
	}
	// Each segment is a bundle of its own, and merges again by hand.
	var parts []string
	for i := range 4 {
		parts = append(parts, filepath.Join(four+".workers", fmt.Sprintf("worker-%d", i)))
	}
	again := filepath.Join(t.TempDir(), "again")
	if code, _, stderr := runMain(context.Background(), append([]string{"merge", "-o", again}, parts...)...); code != 0 {
		t.Fatalf("merge of the segments: exit %d: %s", code, stderr)
	}
	// Three of four are refused.
	code, _, stderr = runMain(context.Background(), append([]string{"merge", "-o", filepath.Join(t.TempDir(), "three")}, parts[:3]...)...)
	if code != 2 || !strings.Contains(stderr, "missing segments 3/4") {
		t.Errorf("three of four segments: exit %d: %s", code, stderr)
	}
	// A bound below every worker's uncertainty refuses them.
	code, _, stderr = runMain(context.Background(), append([]string{"merge", "-o", filepath.Join(t.TempDir(), "tight"), "--max-offset-uncertainty", "1ns"}, parts...)...)
	if code != 2 || !strings.Contains(stderr, "offset_uncertainty_s") {
		t.Errorf("--max-offset-uncertainty 1ns: exit %d: %s", code, stderr)
	}
}

// TestSegmentRefusals: a split plan of several waves without a
// coordinator, a bad segment, and --workers with --segment are refused
// before any request, in one line, exit 2; a split plan of one wave runs
// without a coordinator.
func TestSegmentRefusals(t *testing.T) {
	srv, _ := benchServer(t, 3, 0)
	base := []string{"bench", "--base-url", srv.URL, "--model", "m", "--tokenizer", "usage", "--progress", "never"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--concurrency", "1,2", "--segment", "0/2"}, "without a coordinator"},
		{[]string{"--concurrency", "2", "--repeats", "2", "--segment", "0/2", "--start-at", "2026-12-01T12:00:00Z"}, "without a coordinator"},
		{[]string{"--concurrency", "2", "--segment", "2/2"}, "--segment"},
		{[]string{"--concurrency", "2", "--segment", "auto/2"}, "REHEARSE_SEGMENT_INDEX"},
		{[]string{"--concurrency", "2", "--workers", "2", "--segment", "0/2"}, "--workers"},
		{[]string{"--concurrency", "2", "--coordinator", "http://127.0.0.1:1"}, "--segment"},
		{[]string{"--concurrency", "2", "--segment", "0/2", "--start-at", "noon"}, "--start-at"},
	} {
		t.Setenv("REHEARSE_SEGMENT_INDEX", "")
		dir := filepath.Join(t.TempDir(), "b")
		code, _, stderr := runMain(context.Background(), append(append(base, tc.args...), "-o", dir)...)
		if code != 2 || !strings.Contains(stderr, tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line saying %q", tc.args, code, stderr, tc.want)
		}
	}
	// Without --model the server would be asked which model it serves: a
	// malformed segment flag is refused before that, with no request sent.
	var hits atomic.Int64
	quiet := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	t.Cleanup(quiet.Close)
	for _, flag := range [][]string{{"--segment", "3/2"}, {"--segment", "0/2", "--start-at", "noon"}, {"--workers", "1"}} {
		code, _, stderr := runMain(context.Background(), append([]string{"bench", "--base-url", quiet.URL, "-o", filepath.Join(t.TempDir(), "b")}, flag...)...)
		if code != 2 || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line", flag, code, stderr)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the server got %d requests before the segment flags were refused", n)
	}
	// One wave: worker 1 of 2 runs its share, released at --start-at.
	dir := filepath.Join(t.TempDir(), "one-wave")
	at := time.Now().Add(200 * time.Millisecond).UTC().Format(time.RFC3339Nano)
	code, _, stderr := runMain(context.Background(), append(base, "--concurrency", "4", "--repeats", "1", "--segment", "1/2", "--start-at", at, "-o", dir)...)
	if code != 0 {
		t.Fatalf("one wave, no coordinator: exit %d: %s", code, stderr)
	}
	res, err := bundle.ReadVerified(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if w := res.Provenance.Worker; w == nil || w.Index != 1 || w.Count != 2 || w.StartAt == "" || w.PlanDigest == "" {
		t.Errorf("worker provenance %+v", res.Provenance.Worker)
	}
	clients := map[int]bool{}
	for _, r := range res.Records {
		clients[r.Client] = true
	}
	if len(res.Records) != 2 || !clients[1] || !clients[3] {
		t.Errorf("worker 1 of 2 at 4 clients sent %d records (%+v), want clients 1 and 3", len(res.Records), res.Records)
	}
	if w := res.Waves[0]; w.ReleaseAt != at || w.ReleaseLateS == nil {
		t.Errorf("wave released at %q (late %v), want the agreed %s", w.ReleaseAt, w.ReleaseLateS, at)
	}
}

// TestWorkerThatIsLeftAloneStops: when another worker dies (here: it
// reaches the first barrier and never the second), the barrier times
// out, the worker stops with a clear error, and what it recorded is kept.
func TestWorkerThatIsLeftAloneStops(t *testing.T) {
	srv, _ := benchServer(t, 3, 0)
	coord := &coordinate.Server{Workers: 2, Margin: 10 * time.Millisecond, Timeout: 300 * time.Millisecond}
	cs := httptest.NewServer(coord)
	t.Cleanup(cs.Close)
	go func() {
		// Worker 1 comes to wave 0 once worker 0 is there, then dies.
		for deadline := time.Now().Add(20 * time.Second); len(coord.Arrived(0)) == 0 && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		_, _ = (&coordinate.Client{URL: cs.URL, Worker: 1, Count: 2, Digest: coord.Digest()}).Release(context.Background(), 0)
	}()
	dir := filepath.Join(t.TempDir(), "alone")
	code, _, stderr := runMain(context.Background(), "bench", "--base-url", srv.URL, "--model", "m", "--tokenizer", "usage", "--progress", "never",
		"--concurrency", "2,4", "--segment", "0/2", "--coordinator", cs.URL, "-o", dir)
	if code != 1 || !strings.Contains(stderr, "could not release a wave together") || !strings.Contains(stderr, "missing: 1") {
		t.Fatalf("exit %d, stderr %s; want exit 1 naming the missing worker", code, stderr)
	}
	res, err := bundle.ReadVerified(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Waves) != 1 || len(res.Records) != 1 || res.Records[0].Client != 0 {
		t.Errorf("%d waves, %d records: want wave 0's one record kept", len(res.Waves), len(res.Records))
	}
	if w := res.Provenance.Worker; w == nil || w.Coordinator != cs.URL || w.OffsetUncertaintyS <= 0 {
		t.Errorf("worker provenance %+v", w)
	}
}

// TestWorkersCtrlC: Ctrl-C during bench --workers reaches every worker;
// each writes the bundle of what it recorded (its requests in flight end
// as canceled) and the merge of them is written and verifies; exit 130.
func TestWorkersCtrlC(t *testing.T) {
	t.Setenv(rehearseMainEnv, "1")
	srv, _ := benchServer(t, 1000, 10*time.Millisecond)
	dir := filepath.Join(t.TempDir(), "b")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// Once both workers released their wave, interrupt.
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			released := 0
			for i := range 2 {
				b, _ := os.ReadFile(filepath.Join(dir+".workers", fmt.Sprintf("worker-%d", i), bundle.JournalFile))
				if strings.Contains(string(b), `"release_at"`) {
					released++
				}
			}
			if released == 2 {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond)
		cancel()
	}()
	code, _, errs := runMain(ctx, "bench", "--base-url", srv.URL, "--model", "m", "--tokenizer", "usage", "--concurrency", "2", "--repeats", "2", "--workers", "2", "-o", dir)
	if code != 130 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	res, err := bundle.ReadVerified(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Records) != 2 {
		t.Fatalf("%d records, want the two canceled requests of the first wave", len(res.Records))
	}
	for _, r := range res.Records {
		if r.ErrorKind != contract.ErrCanceled || r.Worker == nil || *r.Worker != r.Client {
			t.Errorf("record %+v", r)
		}
	}
}
