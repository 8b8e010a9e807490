package rehearsal_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/bundle/bundletest"
	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/rehearsal"
	"github.com/rehearse/rehearse/internal/search"
)

func loadCapacityExample(t *testing.T) *config.Rehearsal {
	t.Helper()
	if testing.Short() {
		t.Skip("launches two simulators")
	}
	cfg, err := config.Load(filepath.Join("..", "..", "examples", "capacity.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestCapacityExampleRuns searches both simulated servers of
// examples/capacity.yaml. Their capacities are what their engines imply,
// with margins no machine speed crosses: the serial engine serves one
// request at a time, so a second client waits a whole generation (≈ 6 s of
// simulated time against a 1 s TTFT objective) and the answer is exactly 1;
// the batching engine runs 32 sequences at once, so its answer is well
// above the serial one's and one probe at 128 (96 requests queued for whole
// generations) fails. Where between those it lies depends on the host: the
// objective is 40 ms of wall time at time scale 50, and a loaded machine
// (the race detector, packages tested in parallel) adds enough to a
// batching probe's TTFTs to move its answer (16 was seen, against 56–58 on
// a quiet one), so only bounds no machine speed crosses are asserted.
// Every probe is an ordinary recorded sustained wave, the bundle verifies
// (run.do), and verify catches a probe's verdict or the bracket changed.
func TestCapacityExampleRuns(t *testing.T) {
	r := &run{cfg: loadCapacityExample(t), dir: filepath.Join(t.TempDir(), "bundle")}
	out := r.do(t, context.Background())
	if len(out.Failed) > 0 {
		t.Fatalf("failed: %v", out.Failed)
	}
	res := out.Results
	if len(res.Capacity) != 2 {
		t.Fatalf("%d capacity entries, want 2", len(res.Capacity))
	}
	serial, batching := res.Capacity[0], res.Capacity[1]
	if serial.Server != "serial" || serial.StopReason != search.StopConverged || ptr(serial.MaxPass) != 1 || ptr(serial.MinFail) != 2 {
		t.Errorf("serial: %s, bracket [%d, %d], want converged [1, 2]", serial.StopReason, ptr(serial.MaxPass), ptr(serial.MinFail))
	}
	if bp, bf := ptr(batching.MaxPass), ptr(batching.MinFail); batching.Server != "batching" || bp < 4 || bf <= bp || bf > 128 {
		t.Errorf("batching: %s, bracket [%d, %d], want max_pass ≥ 4 and min_fail ≤ 128", batching.StopReason, bp, bf)
	}
	// Both brackets were predicted from the servers' profiles before any
	// request (capacity.predict_from), kept beside the measured ones, and
	// the note says which profile predicted each.
	for _, c := range res.Capacity {
		if c.Predicted == nil || c.Search.Predicted == nil || *c.Predicted != *c.Search.Predicted {
			t.Errorf("%s: predicted %v, search.predicted %v: want the predicted bracket in both", c.Server, c.Predicted, c.Search.Predicted)
			continue
		}
		if len(c.Probes) == 0 || (c.Probes[0].Load != c.Predicted.MaxPass && c.Probes[0].Load != c.Predicted.MinFail) {
			t.Errorf("%s: first probe %+v, want an end of the predicted bracket %+v", c.Server, c.Probes, *c.Predicted)
		}
	}
	if p := serial.Predicted; p != nil && *p != (search.Bracket{MaxPass: 1, MinFail: 2}) {
		t.Errorf("serial: predicted %+v, want [1, 2]", *p)
	}
	if p := batching.Predicted; p != nil && (p.MaxPass < 32 || p.MinFail > 64) {
		t.Errorf("batching: predicted %+v, want within [32, 64] (32 sequences run at once; at 64 half the clients wait whole generations)", *p)
	}
	notes := strings.Join(res.Notes, "\n")
	for _, want := range []string{"predicted bracket [1, 2] from simulator profile t4-qwen2.5-1.5b-serial", "from simulator profile t4-qwen2.5-1.5b-batching with max_num_seqs 32"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes do not say %q:\n%s", want, notes)
		}
	}

	probeWaves := map[int]contract.Wave{}
	for _, w := range res.Waves {
		if w.Probe != "" {
			probeWaves[w.ID] = w
		}
	}
	for _, c := range res.Capacity {
		for i, p := range c.Probes {
			if len(p.WaveIDs) != 1 {
				t.Fatalf("%s probe %d: wave ids %v", c.Server, i, p.WaveIDs)
			}
			w, ok := probeWaves[p.WaveIDs[0]]
			if !ok || w.Kind != contract.KindRecorded || w.Mode != contract.ModeSustained || w.Concurrency != p.Load || w.Probe != p.Kind {
				t.Errorf("%s probe %d (%d clients, %s): its wave is %+v", c.Server, i, p.Load, p.Kind, w)
			}
			if p.Verdict == search.VerdictPass && p.N < c.Search.MinRequests {
				t.Errorf("%s probe %d passed over %d requests, below min_requests %d", c.Server, i, p.N, c.Search.MinRequests)
			}
		}
	}

	// Split by server and merged again, the searches still replay: merge
	// renumbers the waves and the probes' wave ids with them.
	var parts []*bundle.Results
	for _, name := range []string{"serial", "batching"} {
		part := *res
		part.Servers, part.Waves, part.Records, part.Capacity = nil, nil, nil, nil
		for _, s := range res.Servers {
			if s.Name == name {
				part.Servers = append(part.Servers, s)
			}
		}
		for _, w := range res.Waves {
			if w.Server == name {
				part.Waves = append(part.Waves, w)
			}
		}
		for _, r := range res.Records {
			if r.Server == name {
				part.Records = append(part.Records, r)
			}
		}
		for _, c := range res.Capacity {
			if c.Server == name {
				part.Capacity = append(part.Capacity, c)
			}
		}
		part.Baseline = nil
		parts = append([]*bundle.Results{&part}, parts...) // batching first: its wave ids move
	}
	merged, err := bundletest.Merge(t, parts, []string{"batching", "serial"}, bundle.MergeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range bundle.VerifyResults(merged) {
		t.Errorf("merged: %s", p)
	}
	if len(merged.Capacity) != 2 || merged.Capacity[1].Server != "serial" || ptr(merged.Capacity[1].MinFail) != 2 {
		t.Errorf("merged capacity %+v", merged.Capacity)
	}
	if _, err := bundletest.Merge(t, []*bundle.Results{parts[0], parts[0]}, []string{"a", "b"}, bundle.MergeOptions{}); err == nil {
		t.Error("merge took the same part twice")
	}

	// A changed verdict and a changed bracket are both caught.
	data, err := os.ReadFile(filepath.Join(r.dir, bundle.ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	var tampered bundle.Results
	if err := json.Unmarshal(data, &tampered); err != nil {
		t.Fatal(err)
	}
	tampered.Capacity[0].Probes[1].Verdict = search.VerdictPass
	two := 2
	tampered.Capacity[0].MaxPass = &two
	var msgs []string
	for _, p := range bundle.VerifyResults(&tampered) {
		msgs = append(msgs, p.String())
	}
	all := strings.Join(msgs, "\n")
	for _, want := range []string{"capacity[0].probes[1].verdict", "capacity[0].max_pass"} {
		if !strings.Contains(all, want) {
			t.Errorf("verify of a tampered capacity does not name %s:\n%s", want, all)
		}
	}
}

// TestCapacitySearchInterrupted stops the search after its third probe: the
// bundle keeps every finished probe, says the search was interrupted, and
// verifies (verify replays the probes it has).
func TestCapacitySearchInterrupted(t *testing.T) {
	cfg := loadCapacityExample(t)
	cfg.Servers = cfg.Servers[1:] // batching: many probes
	// Doubling from 1, not the predicted bracket's ends: at least six
	// probes on any host, so the third is never the search's last.
	cfg.Capacity.PredictFrom = nil
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &run{cfg: cfg, dir: filepath.Join(t.TempDir(), "bundle")}
	var waves atomic.Int32
	r.onWave = func(ev rehearsal.Event) {
		if ev.Wave != nil && ev.Wave.Kind == contract.KindRecorded && waves.Add(1) == 3 {
			cancel()
		}
	}
	out := r.do(t, ctx)
	if !out.Interrupted {
		t.Fatal("not interrupted")
	}
	c := out.Results.Capacity
	if len(c) != 1 || c[0].StopReason != search.StopInterrupted || len(c[0].Probes) != 3 {
		t.Fatalf("capacity %+v: want one interrupted search with its 3 finished probes", c)
	}
}

func ptr(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

// TestCapacityPredictFromRefused: a profile that cannot be loaded, or that
// cannot run the server's engine as configured, refuses the rehearsal
// before any work: a *PredictError naming the key and the profile, in one
// line, and no bundle folder.
func TestCapacityPredictFromRefused(t *testing.T) {
	for _, tc := range []struct {
		from config.PredictFrom
		want string
	}{
		{config.PredictFrom{Profile: "no-such-profile"}, `no-such-profile" is neither a built-in profile`},
		{config.PredictFrom{Profile: "t4-qwen2.5-1.5b-serial", MaxNumSeqs: 32}, "capacity.predict_from.serial: profile t4-qwen2.5-1.5b-serial: sim: profile t4-qwen2.5-1.5b-serial: the serial engine runs one sequence at a time; max_num_seqs 32 is not 1"},
		{config.PredictFrom{Profile: "bad-profile.json"}, "bad-profile.json"},
	} {
		cfg, err := config.Load(filepath.Join("..", "..", "examples", "capacity.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Dir = t.TempDir()
		if err := os.WriteFile(filepath.Join(cfg.Dir, "bad-profile.json"), []byte(`{"name": "x", "engine": "warp"}`), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg.Capacity.PredictFrom["serial"] = tc.from
		prompts, err := rehearsal.Prompts(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), "bundle")
		_, err = rehearsal.Run(context.Background(), rehearsal.Options{Rehearsal: cfg, Dir: dir, Prompts: prompts})
		var pe *rehearsal.PredictError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v: error %v, want one line, a *PredictError containing %q", tc.from, err, tc.want)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%+v: the bundle folder was made (%v)", tc.from, err)
		}
	}
}
