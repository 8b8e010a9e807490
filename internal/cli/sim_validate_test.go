package cli

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/sim/fit"
)

// demoLikeBundle is a bundle as the demo writes one, small and fast: a
// rehearsal (through rehearse run) of one simulated batching server at 1,
// 2 and 4 clients, 16 tokens, time scale 20. Its launch argv names the
// engine, as the demo's does.
func demoLikeBundle(t *testing.T) string {
	t.Helper()
	return simulatedBundle(t, `  concurrencies: [1, 2, 4]
  repeats: 1
`)
}

// simulatedBundle is a bundle written by rehearse run of one simulated
// batching server at time scale 20, 16 tokens, its workload's loads given
// by the YAML lines load (indented as keys of workload:).
func simulatedBundle(t *testing.T, load string) string {
	t.Helper()
	t.Setenv(rehearseMainEnv, "1") // {rehearse} sim is the real command
	dir := filepath.Join(t.TempDir(), "bundle")
	file := filepath.Join(t.TempDir(), "r.yaml")
	yaml := `model: {id: Qwen/Qwen2.5-1.5B-Instruct}
servers:
  - name: batching
    simulated: t4-qwen2.5-1.5b-batching
    launch: ["{rehearse}", sim, --engine, batching, --profile, t4-qwen2.5-1.5b-batching,
             --model, "{model}", --port, "{port}", --time-scale, "20", --seed, "1", --quiet]
    ready: {timeout: 30s}
workload:
` + load + `  max_tokens: 16
  timeout: 3s
  extra_body: {ignore_eos: true}
mechanism_check: ~
`
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := run(t, "run", "-f", file, "-o", dir, "-q"); code != 0 {
		t.Fatalf("rehearse run: exit %d, stderr %q", code, stderr)
	}
	return dir
}

// TestSimValidateLive fits on 1 and 4 clients, holds 2 out, and runs the
// held-out wave live against rehearse sim (time-scaled): the JSON rows are
// one per source, metric and held-out load, and the stored file has them.
func TestSimValidateLive(t *testing.T) {
	dir := demoLikeBundle(t)
	out := filepath.Join(t.TempDir(), "v.json")
	live := filepath.Join(t.TempDir(), "live")
	code, stdout, stderr := run(t, "sim", "validate", dir, "--fit-on", "1,4", "--hold-out", "2", "--time-scale", "10", "--json", "-o", out, "--live-bundle", live)
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	var rows []fit.ErrorRow
	if err := json.Unmarshal([]byte(stdout), &rows); err != nil {
		t.Fatalf("stdout is not JSON rows: %v\n%s", err, stdout)
	}
	if len(rows) != 2*len(fit.ValidateMetrics) {
		t.Fatalf("%d rows, want %d", len(rows), 2*len(fit.ValidateMetrics))
	}
	for i, r := range rows {
		wantSource := []string{fit.SourcePredictor, fit.SourceLive}[i/len(fit.ValidateMetrics)]
		if r.Source != wantSource || r.Server != "batching" || r.Load != "2 clients" || r.Metric != fit.ValidateMetrics[i%len(fit.ValidateMetrics)] {
			t.Errorf("row %d: %+v", i, r)
		}
		// Error is nil only where the measured figure is 0 (chunks read
		// together at this time scale give an ITL of 0).
		if r.Predicted == nil || r.Measured == nil || (r.Error == nil && *r.Measured != 0) {
			t.Errorf("row %d: %+v lacks a figure", i, r)
		}
	}
	// Every output token of the live run was counted: the goodput row's
	// live figure is a real rate.
	if g := rows[len(fit.ValidateMetrics)]; g.Metric != "goodput_tok_s" || !(*g.Predicted > 0) {
		t.Errorf("live goodput row %+v", g)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var stored struct {
		Rows     []fit.ErrorRow   `json:"rows"`
		Profiles []map[string]any `json:"profiles"`
	}
	if err := json.Unmarshal(data, &stored); err != nil {
		t.Fatal(err)
	}
	if len(stored.Rows) != len(rows) || len(stored.Profiles) != 1 {
		t.Errorf("stored %d rows and %d profiles, want %d and 1", len(stored.Rows), len(stored.Profiles), len(rows))
	}
	// The live run is a bundle of its own, through the one runner: only the
	// held-out wave, and the input bundle is left as it was.
	lr, err := bundle.ReadResults(live)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(lr.Workload.Concurrencies, []int{2}) || len(lr.Servers) != 1 || lr.Servers[0].Name != "batching" {
		t.Errorf("live bundle workload %v, servers %+v", lr.Workload.Concurrencies, lr.Servers)
	}
	if _, err := os.Stat(filepath.Join(dir, "sim-validate.json")); err == nil {
		t.Error("the table was written into the bundle")
	}

	// The text table, predictor only.
	code, stdout, stderr = run(t, "sim", "validate", dir, "--fit-on", "1,4", "--hold-out", "2", "--no-live", "-o", out)
	if code != 0 || !strings.Contains(stdout, "goodput_tok_s") || !strings.Contains(stdout, "2 clients") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

func TestSimValidateRefusesBadInput(t *testing.T) {
	dir := demoLikeBundle(t)
	out := filepath.Join(t.TempDir(), "v.json")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--fit-on", "1,x", "--hold-out", "2"}, `--fit-on "1,x": load "x"`},
		{[]string{"--fit-on", "1,4", "--hold-out", ""}, `--hold-out "": no loads`},
		{[]string{"--fit-on", "1,4", "--hold-out", "0rps"}, `load "0rps"`},
		{[]string{"--fit-on", "1,4", "--hold-out", "2rps"}, "has no recorded open-loop wave at 2 req/s (have: 1, 2, 4)"},
		{[]string{"--fit-on", "1,4", "--hold-out", "sustained"}, "no recorded sustained wave"},
		{[]string{"--fit-on", "1,4", "--hold-out", "trace"}, "--hold-out trace: server batching of the bundle has no recorded trace replay"},
		{[]string{"--fit-on", "ramp", "--hold-out", "2"}, "--fit-on ramp: server batching of the bundle has no recorded open-loop ramp-up wave"},
		{[]string{"--fit-on", "1,rampx", "--hold-out", "2"}, `--fit-on "1,rampx": load "rampx"`},
		{[]string{"--fit-on", "open,open", "--hold-out", "2"}, `load "open" is named twice`},
		{[]string{"--fit-on", "1", "--hold-out", "2,1.5"}, `--hold-out "2,1.5": load "1.5"`},
		{[]string{"--fit-on", "sustained", "--hold-out", "2"}, "--fit-on sustained: server batching of the bundle has no recorded sustained wave"},
		{[]string{"--fit-on", "1,4", "--hold-out", "2", "--hold-out-bundle", "/nonexistent"}, "--hold-out-bundle"},
		{[]string{"--fit-on", "1,4", "--hold-out", "4"}, "4 clients is both fitted on and held out"},
		{[]string{"--fit-on", "1,4", "--hold-out", "8"}, "no recorded closed-loop wave at 8 clients"},
		{[]string{"--fit-on", "1,4", "--hold-out", "2", "--server", "batching"}, `--server "batching": want NAME=serial or NAME=batching`},
		{[]string{"--fit-on", "1,4", "--hold-out", "2", "--server", "x=serial"}, "the bundle has no server x"},
		{[]string{"--fit-on", "1,4", "--hold-out", "2", "--json", "--markdown"}, "pick one"},
	} {
		args := append([]string{"sim", "validate", dir, "-o", out, "--no-live"}, tc.args...)
		code, stdout, stderr := run(t, args...)
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		if code != 2 || len(lines) != 1 || !strings.Contains(stderr, tc.want) || stdout != "" {
			t.Errorf("%v: exit %d, stderr %q, stdout %q; want exit 2 and one line with %q", tc.args, code, stderr, stdout, tc.want)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a refused validation wrote its table")
	}
	code, _, stderr := run(t, "sim", "validate", "--fit-on", "1", "--hold-out", "2")
	if code != 2 || !strings.Contains(stderr, "want one BUNDLE folder") {
		t.Errorf("no bundle: exit %d, stderr %q", code, stderr)
	}
}

// TestSimValidateSustainedAndOpen fits on the closed waves of a bundle and
// holds out its open-loop rate, then a sustained load of a second bundle of
// the same server (a rehearsal runs its concurrencies one way), each
// predicted and run live (time-scaled): every metric has a predictor row
// and a live row at the held-out load, with finite figures.
func TestSimValidateSustainedAndOpen(t *testing.T) {
	closed := simulatedBundle(t, `  concurrencies: [1, 4]
  repeats: 1
  open_loop: {request_rates_rps: [20], arrival: poisson, seed: 1, num_requests: 8}
`)
	sustained := simulatedBundle(t, `  concurrencies: [2]
  repeats: 1
  mode: sustained
  sustained: {num_requests: 8, warmup_requests: 2}
`)
	ramp := simulatedBundle(t, `  concurrencies: [1, 4]
  repeats: 1
  open_loop: {ramp: {strategy: linear, start_rps: 10, end_rps: 40}, arrival: poisson, seed: 1, num_requests: 8}
`)
	lengths := simulatedBundle(t, `  concurrencies: [1, 2, 4]
  repeats: 1
  prompts: {source: synthetic, input_len: {mean: 64, range_ratio: 0.5}, output_len: {mean: 12, range_ratio: 0.5}, count: 8, seed: 1, ignore_eos: true}
`)
	for _, tc := range []struct {
		name  string
		args  []string
		fitOn string
		load  string
	}{
		// 20 req/s on the wall clock at time scale 20 is 1 req/s simulated.
		{"open", []string{closed, "--hold-out", "1rps"}, "1,4", "1 req/s"},
		{"open mode", []string{closed, "--hold-out", "open"}, "1,4", "1 req/s"},
		{"sustained", []string{closed, "--hold-out", "sustained", "--hold-out-bundle", sustained}, "1,4", "2 clients, sustained"},
		// The fit reads the sustained loop, the open-loop rate and the ramp.
		{"fit on sustained", []string{sustained, "--hold-out", "4", "--hold-out-bundle", closed}, "sustained", "4 clients"},
		{"fit on open", []string{closed, "--hold-out", "4"}, "1,1rps", "4 clients"},
		{"ramp", []string{ramp, "--hold-out", "ramp"}, "1,4", "ramp 0.5→2 req/s"},
		{"fit on a ramp", []string{ramp, "--hold-out", "4"}, "ramp,1", "4 clients"},
		{"lengths", []string{lengths, "--hold-out", "2"}, "1,4", "2 clients"},
	} {
		out := filepath.Join(t.TempDir(), "v.json")
		args := append([]string{"sim", "validate"}, tc.args...)
		args = append(args, "--fit-on", tc.fitOn, "--time-scale", "20", "--json", "-o", out)
		code, stdout, stderr := run(t, args...)
		if code != 0 {
			t.Fatalf("%s: exit %d, stderr %q", tc.name, code, stderr)
		}
		var rows []fit.ErrorRow
		if err := json.Unmarshal([]byte(stdout), &rows); err != nil {
			t.Fatalf("%s: stdout is not JSON rows: %v\n%s", tc.name, err, stdout)
		}
		n := len(fit.ValidateMetrics)
		if len(rows) != 2*n {
			t.Fatalf("%s: %d rows, want %d: %+v", tc.name, len(rows), 2*n, rows)
		}
		for i, r := range rows {
			wantSource := []string{fit.SourcePredictor, fit.SourceLive}[i/n]
			if r.Source != wantSource || r.Server != "batching" || r.Load != tc.load || r.Metric != fit.ValidateMetrics[i%n] {
				t.Errorf("%s: row %d: %+v", tc.name, i, r)
			}
			if r.Predicted == nil || r.Measured == nil || (r.Error == nil && *r.Measured != 0) {
				t.Errorf("%s: row %d: %+v lacks a figure", tc.name, i, r)
				continue
			}
			if r.Error != nil && (math.IsNaN(*r.Error) || math.IsInf(*r.Error, 0)) {
				t.Errorf("%s: row %d: error %v is not finite", tc.name, i, *r.Error)
			}
		}
		if g := rows[0]; g.Metric != "goodput_tok_s" || !(*g.Predicted > 0) || !(*g.Measured > 0) {
			t.Errorf("%s: goodput row %+v", tc.name, g)
		}
	}
}
