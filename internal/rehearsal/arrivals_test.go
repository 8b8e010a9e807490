package rehearsal_test

import (
	"bufio"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/tokenizer"
)

// TestTraceExampleAgainstSim runs examples/trace.yaml against rehearse sim
// (time scale 200, the trace scaled to match): for each server one replay
// of the whole trace, record i sending prompt i at its traced timestamp
// less the first times the time scale, with exactly its traced input
// tokens and its output length as max_tokens; the bundle verifies.
func TestTraceExampleAgainstSim(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two simulated servers")
	}
	const scale = 0.005
	res := runExample(t, "trace.yaml", "time_scale: 0.1", "time_scale: 0.005")
	type line struct {
		Timestamp    float64 `json:"timestamp"`
		InputLength  int     `json:"input_length"`
		OutputLength int     `json:"output_length"`
	}
	f, err := os.Open(filepath.Join("..", "..", "examples", "data", "mooncake-sample.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var trace []line
	for sc := bufio.NewScanner(f); sc.Scan(); {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		trace = append(trace, l)
	}
	tok, err := tokenizer.Embedded("qwen2.5")
	if err != nil {
		t.Fatal(err)
	}
	wl := res.Workload
	if len(wl.Prompts) != len(trace) || len(wl.ArrivalsS) != len(trace) || wl.Open == nil || wl.Open.Arrival != contract.ArrivalTrace {
		t.Fatalf("%d prompts, %d arrivals for %d trace lines; open %+v", len(wl.Prompts), len(wl.ArrivalsS), len(trace), wl.Open)
	}
	perServer := map[string]int{}
	for _, r := range res.Records {
		perServer[r.Server]++
		i := r.Prompt
		want := (trace[i].Timestamp - trace[0].Timestamp) / 1000 * scale
		if math.Abs(r.IntendedStartS-want) > 1e-9 || r.Client != i {
			t.Errorf("%s record of prompt %d: intended_start_s %v, client %d; the trace says %v", r.Server, i, r.IntendedStartS, r.Client, want)
		}
		if r.InputTokens == nil || *r.InputTokens != trace[i].InputLength || r.MaxTokens != trace[i].OutputLength {
			t.Errorf("%s record of prompt %d: input_tokens %v, max_tokens %d; the trace says %d, %d", r.Server, i, r.InputTokens, r.MaxTokens, trace[i].InputLength, trace[i].OutputLength)
		}
		if n := tok.Count(wl.Prompts[i]); n != trace[i].InputLength {
			t.Errorf("prompt %d counts %d tokens, the trace says %d", i, n, trace[i].InputLength)
		}
	}
	if perServer["serial"] != len(trace) || perServer["batching"] != len(trace) {
		t.Errorf("records per server %v, want %d each", perServer, len(trace))
	}
	var labels []string
	for _, a := range res.Aggregates {
		labels = append(labels, a.Server+" at "+a.LoadLabel())
	}
	if want := []string{"serial at trace replay", "batching at trace replay"}; !slices.Equal(labels, want) {
		t.Errorf("aggregates %q, want %q", labels, want)
	}
	// Host honesty: each wave against the launched simulators has their
	// clock, scraped around it, and the client's own stalls.
	for _, w := range res.Waves {
		if w.ServerSlip == nil || w.ServerSlip.Steps == 0 {
			t.Errorf("wave %d (%s): server slip %+v, want the simulator's steps", w.ID, w.Server, w.ServerSlip)
		}
		if w.WallS > 0.05 && (w.ClientStalls == nil || w.ClientStalls.Ticks == 0) {
			t.Errorf("wave %d (%s) over %v s: client stalls %+v, want its wake-ups", w.ID, w.Server, w.WallS, w.ClientStalls)
		}
	}
	// Lines 1 and 4 (hash ids [0, 100, 102], 1113 and 1115 tokens) share
	// their first 1113 words; lines 1 and 2 ([0, 104], 786 tokens) block 0
	// alone.
	w1, w4, w2 := strings.Fields(wl.Prompts[1]), strings.Fields(wl.Prompts[4]), strings.Fields(wl.Prompts[2])
	if !slices.Equal(w1[:1113], w4[:1113]) || !slices.Equal(w1[:512], w2[:512]) || slices.Equal(w1[512:786], w2[512:786]) {
		t.Error("prompts sharing hash blocks do not share exactly their blocks' text")
	}
}

// TestRampExampleAgainstSim runs examples/ramp.yaml against rehearse sim:
// one ramp wave per server, recorded in the bundle, its gaps shrinking as
// the rate rises, its aggregate labeled by the ramp.
func TestRampExampleAgainstSim(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two simulated servers")
	}
	res := runExample(t, "ramp.yaml", "duration: 4s", "duration: 1s", "start_rps: 1, end_rps: 16", "start_rps: 4, end_rps: 40")
	want := contract.Ramp{Strategy: contract.RampLinear, StartRPS: 4, EndRPS: 40}
	if o := res.Workload.Open; o == nil || o.Ramp == nil || *o.Ramp != want {
		t.Fatalf("open loop %+v", res.Workload.Open)
	}
	if len(res.Waves) != 2 {
		t.Fatalf("%d waves, want one per server", len(res.Waves))
	}
	for _, w := range res.Waves {
		if w.Ramp == nil || *w.Ramp != want || w.Arrival != "poisson" || w.Seed != 1 || w.RequestRateRPS != 0 {
			t.Errorf("wave %+v", w)
		}
	}
	var labels []string
	for _, a := range res.Aggregates {
		labels = append(labels, a.Server+" at "+a.LoadLabel())
	}
	if want := []string{"serial at ramp 4→40 req/s", "batching at ramp 4→40 req/s"}; !slices.Equal(labels, want) {
		t.Errorf("aggregates %q, want %q", labels, want)
	}
	// ∫rate over the second is 22; the first half holds (4·0.5 + 9·0.25)/22 ≈ 19% of it.
	n, early := 0, 0
	for _, r := range res.Records {
		if r.Server != "serial" {
			continue
		}
		n++
		if r.IntendedStartS < 0.5 {
			early++
		}
	}
	if n < 8 || n > 40 || early*2 >= n {
		t.Errorf("serial: %d requests, %d in the first half of the ramp: the rate did not rise", n, early)
	}
}
