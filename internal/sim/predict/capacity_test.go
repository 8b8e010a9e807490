package predict

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/search"
	"github.com/rehearse/rehearse/internal/sim/engine"
)

// inFlightAtEverySend checks that exactly clients requests are in flight
// the instant any request is sent (its own included, those ending at that
// instant not), that every client's next request is sent the instant its
// last one ended, and that the run used exactly clients clients.
func inFlightAtEverySend(t *testing.T, recs []contract.Record, clients int) {
	t.Helper()
	byClient := map[int][]contract.Record{}
	for _, r := range recs {
		byClient[r.Client] = append(byClient[r.Client], r)
	}
	if len(byClient) != clients {
		t.Fatalf("%d clients sent requests, want %d", len(byClient), clients)
	}
	for c, rs := range byClient {
		for i := 1; i < len(rs); i++ {
			if rs[i].StartS != rs[i-1].EndS {
				t.Fatalf("client %d: request %d sent at %v, its last one ended at %v", c, i, rs[i].StartS, rs[i-1].EndS)
			}
		}
	}
	for _, r := range recs {
		n := 0
		for _, q := range recs {
			if q.StartS <= r.StartS && q.EndS > r.StartS {
				n++
			}
		}
		if n != clients {
			t.Fatalf("%d requests in flight when one was sent at %v, want %d", n, r.StartS, clients)
		}
	}
}

// TestPredictSustainedKeepsClientsInFlight runs the sustained closed loop
// on the batching engine below and above its running-sequence cap, and on
// the serial engine with requests timing out in its queue: whether a
// request streams to its end or its client gives up, the client sends its
// next one at once, so the engine always has C requests.
func TestPredictSustainedKeepsClientsInFlight(t *testing.T) {
	cases := []struct {
		profile  string
		maxSeqs  int
		clients  int
		timeoutS float64
		timeouts bool // some requests time out
	}{
		{"t4-qwen2.5-1.5b-batching", 0, 8, 60, false},
		{"t4-qwen2.5-1.5b-batching", 4, 12, 60, false},
		{"t4-qwen2.5-1.5b-serial", 0, 4, 15, true},
	}
	for _, tc := range cases {
		p, err := engine.BuiltinProfile(tc.profile)
		if err != nil {
			t.Fatal(err)
		}
		if tc.maxSeqs > 0 {
			p.MaxNumSeqs = tc.maxSeqs
		}
		w := SustainedWorkload{Prompts: fitPrompts, MaxTokens: 128, TimeoutS: tc.timeoutS, Requests: 60}
		pr, err := Sustained(p, w, tc.clients, Options{Server: "s"})
		if err != nil {
			t.Fatal(err)
		}
		if len(pr.Waves) != 1 || pr.Waves[0].Mode != contract.ModeSustained || pr.Waves[0].Kind != contract.KindRecorded || len(pr.Records) != 60 {
			t.Fatalf("%s: waves %+v, %d records; want one recorded sustained wave of 60", tc.profile, pr.Waves, len(pr.Records))
		}
		failed := 0
		for i, r := range pr.Records {
			if r.Prompt != i%len(fitPrompts) {
				t.Fatalf("request %d sent prompt %d", i, r.Prompt)
			}
			if !r.OK {
				failed++
			}
		}
		if tc.timeouts != (failed > 0) {
			t.Fatalf("%s: %d of 60 requests timed out, want some: %v", tc.profile, failed, tc.timeouts)
		}
		inFlightAtEverySend(t, pr.Records, tc.clients)

		// Deterministic.
		again, err := Sustained(p, w, tc.clients, Options{Server: "s"})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(pr, again) {
			t.Fatalf("%s: two predictions of one workload differ", tc.profile)
		}
	}
}

// TestPredictSustainedWarmup: the warm-up requests are a wave of their own,
// sent first by the same clients; the measured wave is timed from its first
// send, so its records start after 0 only where the loop had moved on.
func TestPredictSustainedWarmup(t *testing.T) {
	p, err := engine.BuiltinProfile("t4-qwen2.5-1.5b-batching")
	if err != nil {
		t.Fatal(err)
	}
	pr, err := Sustained(p, SustainedWorkload{Prompts: fitPrompts, MaxTokens: 64, TimeoutS: 60, Requests: 20, WarmupRequests: -1}, 5, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pr.Waves) != 2 || pr.Waves[0].Kind != contract.KindWarmup || pr.Waves[1].Kind != contract.KindRecorded {
		t.Fatalf("waves %+v: want a warm-up wave, then a recorded one", pr.Waves)
	}
	var warm, meas []contract.Record
	for _, r := range pr.Records {
		if r.Wave == 0 {
			warm = append(warm, r)
		} else {
			meas = append(meas, r)
		}
	}
	if len(warm) != search.WarmupRounds*5 || len(meas) != 20 {
		t.Fatalf("%d warm-up and %d measured records, want %d and 20", len(warm), len(meas), search.WarmupRounds*5)
	}
	if meas[0].StartS != 0 || warm[0].StartS != 0 {
		t.Fatalf("first sends at %v and %v, want each wave timed from its first", warm[0].StartS, meas[0].StartS)
	}
	if first := search.WarmupRounds * 5; meas[0].Prompt != first%len(fitPrompts) {
		t.Fatalf("first measured request sent prompt %d, want %d (request %d of the run)", meas[0].Prompt, first%len(fitPrompts), first)
	}
}

// TestPredictCapacitySerial: the serial engine serves one request at a
// time, so a second client waits a whole generation (about 6 s of 128
// tokens) for its first token; under a 2 s TTFT objective one client
// passes and two fail, and the search stops there.
func TestPredictCapacitySerial(t *testing.T) {
	p, err := engine.BuiltinProfile("t4-qwen2.5-1.5b-serial")
	if err != nil {
		t.Fatal(err)
	}
	ttft := 2000.0
	w := SustainedWorkload{Prompts: fitPrompts, MaxTokens: 128, TimeoutS: 60, Requests: 80, WarmupRequests: -1}
	b, probes, err := Capacity(p, w, contract.Objectives{TTFTMS: &ttft}, 0.9, 256, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if b != (search.Bracket{MaxPass: 1, MinFail: 2}) {
		t.Fatalf("bracket %+v, want [1, 2]", b)
	}
	if len(probes) != 2 || probes[0].Load != 1 || probes[0].Verdict != search.VerdictPass || probes[1].Load != 2 || probes[1].Verdict != search.VerdictFail || probes[1].Binding != "ttft" {
		t.Fatalf("probes %+v: want 1 client passing, 2 failing on ttft", probes)
	}
	if probes[0].N != 80 || probes[0].Attainment != 1 {
		t.Fatalf("one client: %d requests, attainment %v; want 80 and 1", probes[0].N, probes[0].Attainment)
	}

	// A looser objective the second client's wait meets moves it up.
	ttft = 60000
	b, _, err = Capacity(p, w, contract.Objectives{TTFTMS: &ttft}, 0.9, 4, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if b.MaxPass < 2 {
		t.Fatalf("bracket %+v under a 60 s TTFT: want more than one client", b)
	}
}

// TestPredictCapacityBatchingCap: with 32 running sequences the batching
// engine's bracket lies above 32 (every client runs at once) and below 64
// (half the clients wait for whole generations), converged.
func TestPredictCapacityBatchingCap(t *testing.T) {
	p, err := engine.BuiltinProfile("t4-qwen2.5-1.5b-batching")
	if err != nil {
		t.Fatal(err)
	}
	p.MaxNumSeqs = 32
	ttft, tpot := 2000.0, 100.0
	w := SustainedWorkload{Prompts: fitPrompts, MaxTokens: 128, TimeoutS: 60, Requests: 160, WarmupRequests: -1}
	b, probes, err := Capacity(p, w, contract.Objectives{TTFTMS: &ttft, TPOTMS: &tpot}, 0.9, 256, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if b.MaxPass < 32 || b.MinFail > 64 || !search.Converged(b.MaxPass, b.MinFail) {
		t.Fatalf("bracket %+v: want converged within [32, 64]", b)
	}
	loads := make([]int, len(probes))
	for i, pp := range probes {
		loads[i] = pp.Load
	}
	if !slices.Equal(loads[:7], []int{1, 2, 4, 8, 16, 32, 64}) {
		t.Fatalf("probes at %v: want doubling from 1", loads)
	}
}

// TestPredictCapacityRefuses: a profile the engine cannot run, and a
// workload with nothing to predict, are errors, not brackets.
func TestPredictCapacityRefuses(t *testing.T) {
	ttft := 2000.0
	obj := contract.Objectives{TTFTMS: &ttft}
	w := SustainedWorkload{Prompts: fitPrompts, MaxTokens: 128, TimeoutS: 60, Requests: 10}
	serial, err := engine.BuiltinProfile("t4-qwen2.5-1.5b-serial")
	if err != nil {
		t.Fatal(err)
	}
	serial.MaxNumSeqs = 32
	batching, err := engine.BuiltinProfile("t4-qwen2.5-1.5b-batching")
	if err != nil {
		t.Fatal(err)
	}
	small := *batching
	small.KVTokenBudget = 100
	cases := []struct {
		name string
		p    *engine.Profile
		w    SustainedWorkload
		obj  contract.Objectives
		want string
	}{
		{"serial with 32 sequences", serial, w, obj, "max_num_seqs 32 is not 1"},
		{"kv budget below one request", &small, w, obj, "kv_token_budget"},
		{"no requests", batching, SustainedWorkload{Prompts: fitPrompts, MaxTokens: 128, TimeoutS: 60}, obj, "requests = 0"},
		{"no objectives", batching, w, contract.Objectives{}, "no objectives"},
	}
	for _, tc := range cases {
		_, _, err := Capacity(tc.p, tc.w, tc.obj, 0.9, 16, Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one naming %q", tc.name, err, tc.want)
		}
	}
	if _, err := engine.ResolveProfile("no-such-profile.json"); err == nil || !strings.Contains(err.Error(), "neither a built-in profile") {
		t.Errorf("a missing profile: %v", err)
	}
}
