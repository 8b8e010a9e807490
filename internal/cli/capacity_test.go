package cli

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/search"
)

// TestCapacityFlagErrors: every bad flag of rehearse capacity is one line
// naming it, exit 2, before any request (http://x is never reached).
func TestCapacityFlagErrors(t *testing.T) {
	base := []string{"--base-url", "http://x", "--model", "m", "--tokenizer", "qwen3"}
	cases := []struct {
		args []string
		want string
	}{
		{base, "--slo is required"},
		{append(base, "--slo", "ttft<=500"), `--slo "ttft<=500": `},
		{append(base, "--slo", "latency<=5ms"), `--slo "latency<=5ms"`},
		{append(base, "--slo", "ttft<=500ms", "--attainment", "1"), "--attainment"},
		{append(base, "--slo", "ttft<=500ms", "--attainment", "0"), "--attainment"},
		{append(base, "--slo", "ttft<=500ms", "--start", "0"), "--start 0: must be at least 1"},
		{append(base, "--slo", "ttft<=500ms", "--start", "64", "--max-concurrency", "32"), "--max-concurrency 32 is below the start 64"},
		{append(base, "--slo", "ttft<=500ms", "--min-requests", "-1"), "--min-requests -1"},
		{append(base, "--slo", "ttft<=500ms", "--min-requests", "100", "--max-requests", "50"), "--max-requests 50 is below min_requests 100"},
		{append(base, "--slo", "ttft<=500ms", "--warmup-requests", "-3"), "--warmup-requests -3"},
		{append(base, "--slo", "ttft<=500ms", "--repeats", "-1"), "--repeats -1"},
		{append(base, "--slo", "ttft<=500ms", "--predicted", "8"), `--predicted "8": want MAX_PASS,MIN_FAIL`},
		{append(base, "--slo", "ttft<=500ms", "--predicted", "8,4"), "--predicted [8, 4]: want 0 ≤ max_pass < min_fail"},
		{append(base, "--slo", "ttft<=500ms", "--max-tokens", "0"), "--max-tokens: 0: must be at least 1"},
		{append(base, "--slo", "ttft<=500ms", "--predict-from", "no-such-profile"), `--predict-from no-such-profile: sim: profile "no-such-profile" is neither a built-in profile`},
		{append(base, "--slo", "ttft<=500ms", "--predict-from", "t4-qwen2.5-1.5b-serial", "--predicted", "1,2"), "--predict-from and --predicted both"},
		{append(base, "--slo", "ttft<=500ms", "--concurrency", "4"), "unknown flag: --concurrency"},
	}
	for _, c := range cases {
		args := append([]string{"capacity"}, c.args...)
		code, _, errs := runMain(context.Background(), args...)
		if code != 2 || !strings.Contains(errs, c.want) || strings.Count(strings.TrimSpace(errs), "\n") > 0 {
			t.Errorf("capacity %q: exit %d, stderr %q; want 2 and one line containing %q", c.args, code, errs, c.want)
		}
	}
}

// TestCapacityAgainstTheSimulator runs rehearse capacity end to end with
// objectives no machine speed decides: one every request meets (the search
// doubles to --max-concurrency and stops there) and one none meets (one
// client already fails). The bundle verifies, and the answer leads the
// output and README.md.
func TestCapacityAgainstTheSimulator(t *testing.T) {
	url, _, _ := startSim(t, "--engine", "batching", "--time-scale", "1000", "--seed", "5")
	for _, tc := range []struct {
		slo, stop, sentence string
		loads               []int
		kinds               string
		extra               []string
		predicted           *search.Bracket
	}{
		// The doubling screens from 4 (the first load whose screen of 16
		// requests takes no more than two rounds below the maximum);
		// the maximum is probed in full.
		{"e2el<=60s", search.StopMaxConcurrency, "server sustains 8 concurrent clients", []int{4, 8, 8},
			"screen search repeat", nil, nil},
		{"e2el<=60s", search.StopMaxConcurrency, "server sustains 8 concurrent clients", []int{1, 2, 4, 8, 8},
			"search search search search repeat", []string{"--no-screen"}, nil},
		// The screen at 4 fails the load; bisection below it in full
		// reaches one client, which fails too.
		{"ttft<=0.001ms", search.StopUnmetAtMinimum, "server does not meet", []int{4, 2, 1, 1}, "screen search search repeat", nil, nil},
		// The profile predicts that every load up to 8 passes: the search
		// probes 8 first and stops there.
		{"e2el<=60s", search.StopMaxConcurrency, "server sustains 8 concurrent clients", []int{8, 8}, "search repeat",
			[]string{"--predict-from", "t4-qwen2.5-1.5b-batching"}, &search.Bracket{MaxPass: 8}},
	} {
		dir := filepath.Join(t.TempDir(), "b")
		args := append([]string{"capacity", "--base-url", url, "--tokenizer", "usage", "--max-tokens", "8",
			"--slo", tc.slo, "--attainment", "0.5", "--min-requests", "20", "--max-concurrency", "8", "--progress", "never", "-o", dir}, tc.extra...)
		code, out, errs := runMain(context.Background(), args...)
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s\n%s", tc.slo, code, out, errs)
		}
		res, err := bundle.ReadResults(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Capacity) != 1 {
			t.Fatalf("%s: capacity %+v", tc.slo, res.Capacity)
		}
		c := res.Capacity[0]
		var loads []int
		var kinds []string
		for _, p := range c.Probes {
			loads = append(loads, p.Load)
			kinds = append(kinds, p.Kind)
			if p.Kind == search.ProbeScreen && p.Verdict == search.VerdictPass {
				t.Errorf("%s: a screen passed: %+v", tc.slo, p)
			}
		}
		if c.StopReason != tc.stop || !slices.Equal(loads, tc.loads) || strings.Join(kinds, " ") != tc.kinds {
			t.Errorf("%s %v: stopped %s after probes at %v (%v), want %s after %v (%s)", tc.slo, tc.extra, c.StopReason, loads, kinds, tc.stop, tc.loads, tc.kinds)
		}
		if c.Search.Screen == slices.Contains(tc.extra, "--no-screen") {
			t.Errorf("%s %v: search.screen %v", tc.slo, tc.extra, c.Search.Screen)
		}
		if code, vout, verrs := runMain(context.Background(), "verify", dir); code != 0 {
			t.Errorf("%s %v: verify exit %d\n%s\n%s", tc.slo, tc.extra, code, vout, verrs)
		}
		if tc.kinds == "screen search repeat" {
			screenTampered(t, dir)
		}
		if (c.Predicted == nil) != (tc.predicted == nil) || (c.Predicted != nil && *c.Predicted != *tc.predicted) {
			t.Errorf("%s %v: predicted %v, want %v", tc.slo, tc.extra, c.Predicted, tc.predicted)
		}
		readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(out, tc.sentence) || !strings.Contains(string(readme), "## Capacity under the SLO\n\n**"+tc.sentence) {
			t.Errorf("%s: the answer does not lead:\n%s", tc.slo, out)
		}
	}
}

// screenTampered checks that verify refuses the bundle in dir, whose
// first probe is a screen that did not fail, once that screen claims a
// pass, once its wave claims to be a full probe, and once its margin (what
// the steered search interpolates) is not the one its records give.
func screenTampered(t *testing.T, dir string) {
	t.Helper()
	read := func() *bundle.Results {
		res, err := bundle.ReadResults(dir)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	verifyNames := func(what string, res *bundle.Results, want string) {
		var msgs []string
		for _, p := range bundle.VerifyResults(res) {
			msgs = append(msgs, p.String())
		}
		if all := strings.Join(msgs, "\n"); !strings.Contains(all, want) {
			t.Errorf("verify of %s does not say %q:\n%s", what, want, all)
		}
	}
	res := read()
	if p := res.Capacity[0].Probes[0]; p.Kind != search.ProbeScreen || p.Verdict != search.VerdictScreened {
		t.Fatalf("first probe %+v: want a screen, screened", p)
	}
	res.Capacity[0].Probes[0].Verdict = search.VerdictPass
	verifyNames("a screen claiming a pass", res, "capacity[0].probes[0].verdict")
	res = read()
	for i, w := range res.Waves {
		if w.ID == res.Capacity[0].Probes[0].WaveIDs[0] {
			res.Waves[i].Probe = search.ProbeSearch
		}
	}
	verifyNames("a screen's wave claiming a full probe", res, "the search does not replay")
	res = read()
	if m := res.Capacity[0].Probes[0].Margin; m == nil || !res.Capacity[0].Search.Steer {
		t.Fatalf("first probe %+v of a search %+v: want a margin, steered", res.Capacity[0].Probes[0], res.Capacity[0].Search)
	}
	*res.Capacity[0].Probes[0].Margin *= 2
	verifyNames("a probe's margin altered", res, "capacity[0].probes[0].margin")
}

// TestCapacityServerGoneIsNotAFail: an endpoint that stops accepting
// connections after the first probe has gone away; its refused probe is
// no verdict on its capacity, and the search stops with server_failed
// instead of bisecting towards a capacity of 1.
func TestCapacityServerGoneIsNotAFail(t *testing.T) {
	srv, _ := benchServer(t, 2, 0)
	var n atomic.Int32
	inner := srv.Config.Handler
	srv.Config.Handler = http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		inner.ServeHTTP(rw, r)
		if r.URL.Path != "/v1/models" && n.Add(1) == 30 { // the first probe: 10 warm-up, 20 measured
			srv.Listener.Close()
		}
	})
	dir := filepath.Join(t.TempDir(), "b")
	code, out, errs := runMain(context.Background(), "capacity", "--base-url", srv.URL, "--model", "m", "--tokenizer", "usage",
		"--slo", "e2el<=60s", "--attainment", "0.5", "--min-requests", "20", "--warmup-requests", "10", "--progress", "never", "-o", dir,
		"--no-screen") // the requests are counted for full probes
	res, err := bundle.ReadResults(dir)
	if err != nil {
		t.Fatalf("exit %d, no bundle: %v\n%s\n%s", code, err, out, errs)
	}
	c := res.Capacity[0]
	if c.StopReason != search.StopServerFailed || len(c.Probes) != 2 || ptr(c.MaxPass) != 1 || c.MinFail != nil {
		t.Errorf("stop %s, %d probes, bracket [%d, %v]: want server_failed after the refused second probe, max_pass 1, no min_fail",
			c.StopReason, len(c.Probes), ptr(c.MaxPass), c.MinFail)
	}
	if !strings.Contains(out, "server_failed") && !strings.Contains(out, "server failed") {
		t.Errorf("the answer does not say the server failed:\n%s", out)
	}
	// The search has no answer: the command fails, and says why first.
	first, _, _ := strings.Cut(errs, "\n")
	if code != 1 || !strings.HasPrefix(first, "rehearse: capacity of server: the server failed during the probe at 2 clients (stop_reason server_failed)") {
		t.Errorf("exit %d, stderr:\n%s\nwant exit 1, the server's failure on the first line", code, errs)
	}
}

// TestCapacityServerErrorsFail: an endpoint that answers 500 to every
// request after the first probe gives the search a fail at 2 clients that
// says nothing of its capacity: the command exits 1 with the reason on the
// first line of stderr. With stderr no terminal, each finished probe is
// a line of progress.
func TestCapacityServerErrorsFail(t *testing.T) {
	srv, _ := benchServer(t, 2, 0)
	var n atomic.Int32
	inner := srv.Config.Handler
	srv.Config.Handler = http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/models" && n.Add(1) > 31 { // readiness, then the first probe: 10 warm-up, 20 measured
			http.Error(rw, "engine overloaded", http.StatusInternalServerError)
			return
		}
		inner.ServeHTTP(rw, r)
	})
	dir := filepath.Join(t.TempDir(), "b")
	code, _, errs := runMain(context.Background(), "capacity", "--base-url", srv.URL, "--model", "m", "--tokenizer", "usage",
		"--slo", "e2el<=60s", "--attainment", "0.5", "--min-requests", "20", "--warmup-requests", "10", "--progress", "auto", "-o", dir,
		"--no-screen") // the requests are counted for full probes
	lines := strings.Split(strings.TrimSpace(errs), "\n")
	last := lines[len(lines)-1]
	if code != 1 || !strings.HasPrefix(last, "rehearse: capacity of server: every request of the probe at 2 clients failed with an error, not a timeout (http_status ") {
		t.Errorf("exit %d, stderr:\n%s\nwant exit 1 and the server's errors named", code, errs)
	}
	// The look judges the first 20 sent (a request sent meanwhile lands
	// outside the verdict).
	if len(lines) < 3 || lines[0] != "server: probe 1 at 1 client (search): 20/20 good, attainment 100.0% [83.9–100.0%] against 50%: pass; bracket so far [1, —]" ||
		!strings.HasPrefix(lines[1], "server: probe 2 at 2 clients (search): 0/") || !strings.HasSuffix(lines[1], "fail; bracket so far [1, 2]") {
		t.Errorf("no line of progress per probe:\n%s", errs)
	}
}

func ptr(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}
