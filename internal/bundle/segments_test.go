package bundle_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/bundle/bundletest"
	"github.com/rehearse/rehearse/internal/contract"
)

const releaseStamp = "2026-12-01T12:00:00.5Z"

// segment is worker i of n's bundle of a plan of one closed wave of
// clients clients and one open-loop wave of requests requests: its share of
// each, its records keeping their global indices.
func segment(i, n, clients, requests int, digest string, unc float64) *bundle.Results {
	res := &bundle.Results{
		Schema: bundle.Schema,
		Provenance: bundle.Provenance{
			StartedAt: "2026-12-01T12:00:00Z", FinishedAt: "2026-12-01T12:00:05Z", Host: bundle.Host{Hostname: fmt.Sprintf("h%d", i)},
			OutputTokensSource: bundle.SourceUsage,
			Worker:             &bundle.Worker{Index: i, Count: n, PlanDigest: digest, ClockOffsetS: 0.0001 * float64(i), OffsetUncertaintyS: unc},
		},
		Workload: bundle.Workload{Kind: "closed+open", Concurrencies: []int{clients}, Repeats: 1, Prompts: []string{"a", "b", "c"}, MaxTokens: 8, TimeoutS: 60,
			Open: &bundle.OpenLoop{RequestRatesRPS: []float64{10}, Arrival: "fixed", NumRequests: requests}},
		Servers: []bundle.Server{{Name: "s", BaseURL: "http://127.0.0.1:1", LaunchArgv: []string{}}},
	}
	late := 0.0001 * float64(i)
	closed := contract.Wave{ID: 1, Server: "s", Concurrency: clients, Repeat: 1, Kind: contract.KindRecorded, Mode: contract.ModeClosed,
		StartedAt: releaseStamp, ReleaseAt: releaseStamp, ReleaseLateS: &late, Cold: true}
	open := contract.Wave{ID: 2, Server: "s", Repeat: 1, Kind: contract.KindRecorded, Mode: contract.ModeOpen, RequestRateRPS: 10, Arrival: "fixed",
		StartedAt: releaseStamp, ReleaseAt: releaseStamp, ReleaseLateS: &late}
	rec := func(w contract.Wave, client int, intended float64) contract.Record {
		usage := 3
		fc := intended + 0.01
		return contract.Record{Kind: w.Kind, Server: "s", Concurrency: w.Concurrency, Repeat: 1, Wave: w.ID, Client: client, Prompt: client % 3,
			IntendedStartS: intended, StartS: intended + 0.001, EndS: intended + 0.05 + 0.001*float64(client), FirstContentS: &fc,
			ChunkTimesS: []float64{fc, fc + 0.01, fc + 0.02}, OK: true, Text: "x y z", OutputTokens: 3, UsageCompletionTokens: &usage, Worker: &i}
	}
	for k := i; k < clients; k += n {
		res.Records = append(res.Records, rec(closed, k, 0))
	}
	for k := i; k < requests; k += n {
		res.Records = append(res.Records, rec(open, k, 0.1*float64(k)))
	}
	byWave := bundle.RecordsByWave(res.Records)
	for _, w := range []*contract.Wave{&closed, &open} {
		w.WallS = contract.WaveWallS(byWave[w.ID])
		if w.Mode == contract.ModeClosed {
			w.ReleaseSpreadS = contract.WaveReleaseSpreadS(byWave[w.ID])
		}
	}
	res.Waves = []contract.Wave{closed, open}
	res.Recompute()
	return res
}

func segments(n int) ([]*bundle.Results, []string) {
	var parts []*bundle.Results
	var names []string
	for i := range n {
		parts = append(parts, segment(i, n, 6, 9, "plan-a", 0.0001))
		names = append(names, fmt.Sprintf("w%d", i))
	}
	return parts, names
}

// TestMergeSegmentsRejoinsTheWholePlan: the merged bundle holds one wave
// per planned wave with every worker's records, the same records as the
// whole plan (every client and request index once, its prompt and
// intended start), per-worker releases and a non-negative spread, and it
// verifies.
func TestMergeSegmentsRejoinsTheWholePlan(t *testing.T) {
	parts, names := segments(4)
	// Given out of order: merge orders them by worker.
	parts[0], parts[2], names[0], names[2] = parts[2], parts[0], names[2], names[0]
	out, err := bundle.MergeWith(parts, names, bundle.MergeOptions{MaxOffsetUncertaintyS: 0.005})
	if err != nil {
		t.Fatal(err)
	}
	whole := segment(0, 1, 6, 9, "plan-a", 0)
	if len(out.Waves) != 2 || len(out.Records) != len(whole.Records) {
		t.Fatalf("%d waves, %d records; want 2 and %d", len(out.Waves), len(out.Records), len(whole.Records))
	}
	type key struct {
		mode   string
		client int
	}
	want := map[key]contract.Record{}
	byID := map[int]string{}
	for _, w := range whole.Waves {
		byID[w.ID] = w.Mode
	}
	for _, r := range whole.Records {
		want[key{byID[r.Wave], r.Client}] = r
	}
	modes := map[int]string{}
	for _, w := range out.Waves {
		modes[w.ID] = w.Mode
		if w.WorkerReleaseSpreadS == nil || *w.WorkerReleaseSpreadS < 0 || len(w.Workers) != 4 || w.OffsetUncertaintyS == nil {
			t.Errorf("wave %d: spread %v, %d workers, uncertainty %v", w.ID, w.WorkerReleaseSpreadS, len(w.Workers), w.OffsetUncertaintyS)
		}
		if w.StartedAt != "2026-12-01T12:00:00.5Z" {
			t.Errorf("wave %d started at %s, want the agreed release", w.ID, w.StartedAt)
		}
	}
	seen := map[key]bool{}
	for _, r := range out.Records {
		k := key{modes[r.Wave], r.Client}
		w, ok := want[k]
		switch {
		case !ok || seen[k]:
			t.Errorf("record %+v: not in the whole plan, or twice", k)
		case r.Prompt != w.Prompt || r.IntendedStartS != w.IntendedStartS || r.StartS != w.StartS:
			t.Errorf("record %+v: prompt %d intended %v start %v, whole plan %d %v %v", k, r.Prompt, r.IntendedStartS, r.StartS, w.Prompt, w.IntendedStartS, w.StartS)
		case r.Worker == nil || *r.Worker != r.Client%4:
			t.Errorf("record %+v: worker %v", k, r.Worker)
		}
		seen[k] = true
	}
	if len(out.Provenance.Workers) != 4 || out.Provenance.Worker != nil || out.Provenance.Workers[3].Host != "h3" {
		t.Errorf("workers provenance: %+v / %+v", out.Provenance.Workers, out.Provenance.Worker)
	}
	if probs := bundle.VerifyResults(out); len(probs) > 0 {
		t.Errorf("the merged bundle does not verify: %v", probs)
	}
	dir := writeBundle(t, out)
	if probs := bundletest.Verify(dir); len(probs) > 0 {
		t.Errorf("written, the merged bundle does not verify: %v", probs)
	}
}

// TestMergeSegmentsRefusals: each refusal names the bundle and the field.
func TestMergeSegmentsRefusals(t *testing.T) {
	for _, tc := range []struct {
		name  string
		parts func() ([]*bundle.Results, []string)
		bound float64
		want  []string
	}{
		{"missing segments", func() ([]*bundle.Results, []string) {
			p, n := segments(4)
			return p[:3], n[:3]
		}, 0, []string{"missing segments 3/4"}},
		{"overlapping segments", func() ([]*bundle.Results, []string) {
			p, n := segments(4)
			twin := segment(1, 4, 6, 9, "plan-a", 0.0001)
			twin.Records[0].EndS += 0.5 // another run of the same segment
			return append(p, twin), append(n, "again")
		}, 0, []string{"again", "provenance.worker.index 1", "w1", "overlapping"}},
		{"different plans", func() ([]*bundle.Results, []string) {
			p, n := segments(4)
			p[2].Provenance.Worker.PlanDigest = "plan-b"
			return p, n
		}, 0, []string{"w2", "provenance.worker.plan_digest", "different plans"}},
		{"different counts", func() ([]*bundle.Results, []string) {
			p, n := segments(4)
			p[3] = segment(3, 5, 6, 9, "plan-a", 0.0001)
			return p, n
		}, 0, []string{"w3", "provenance.worker.count 5"}},
		{"offset uncertainty beyond the bound", func() ([]*bundle.Results, []string) {
			p, n := segments(4)
			p[1].Provenance.Worker.OffsetUncertaintyS = 0.02
			return p, n
		}, 0.005, []string{"w1", "provenance.worker.offset_uncertainty_s", "--max-offset-uncertainty"}},
		{"a wave's offset uncertainty beyond the bound", func() ([]*bundle.Results, []string) {
			p, n := segments(4)
			off, unc := 0.0, 0.03
			p[2].Waves[1].ClockOffsetS, p[2].Waves[1].OffsetUncertaintyS = &off, &unc
			return p, n
		}, 0.005, []string{"w2", "waves[id 2].offset_uncertainty_s 0.030000", "--max-offset-uncertainty"}},
		{"a part that is no segment", func() ([]*bundle.Results, []string) {
			p, n := segments(2)
			p[1].Provenance.Worker = nil
			return p, n
		}, 0, []string{"w1", "no provenance.worker"}},
	} {
		parts, names := tc.parts()
		_, err := bundle.MergeWith(parts, names, bundle.MergeOptions{MaxOffsetUncertaintyS: tc.bound})
		if err == nil {
			t.Errorf("%s: merged", tc.name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", tc.name, err, w)
			}
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: not one line: %q", tc.name, err)
		}
	}
	// Without a bound the uncertain worker merges.
	p, n := segments(4)
	p[1].Provenance.Worker.OffsetUncertaintyS = 0.02
	if _, err := bundle.MergeWith(p, n, bundle.MergeOptions{}); err != nil {
		t.Errorf("no bound: %v", err)
	}
}

// TestMergeSegmentsRebasesOwnReleases: a wave each worker released at its
// own instant (no agreed release_at) is rebased onto the earliest release
// by started_at and clock offset.
func TestMergeSegmentsRebasesOwnReleases(t *testing.T) {
	parts, names := segments(2)
	for i, p := range parts {
		for k := range p.Waves {
			p.Waves[k].ReleaseAt, p.Waves[k].ReleaseLateS = "", nil
			p.Waves[k].StartedAt = time.Date(2026, 12, 1, 12, 0, 1, i*100_000_000, time.UTC).Format(time.RFC3339Nano)
		}
		p.Provenance.Worker.ClockOffsetS = 0
	}
	out, err := bundle.MergeWith(parts, names, bundle.MergeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w := out.Waves[0]
	if w.WorkerReleaseSpreadS == nil || *w.WorkerReleaseSpreadS < 0.099 || *w.WorkerReleaseSpreadS > 0.101 {
		t.Errorf("spread %v, want 0.1 s", w.WorkerReleaseSpreadS)
	}
	for _, r := range out.Records {
		if r.Wave == w.ID && r.Client == 1 && (r.StartS < 0.1 || r.StartS > 0.102) {
			t.Errorf("worker 1's client 1 starts at %v, want shifted by 0.1 s", r.StartS)
		}
	}
	if probs := bundle.VerifyResults(out); len(probs) > 0 {
		t.Errorf("does not verify: %v", probs)
	}
}

// TestMergeSegmentsRefusesARecordOfAnotherShare: a segment holding a
// client that is another worker's (a worker that ran the wrong share)
// overlaps, and is refused by record.
func TestMergeSegmentsRefusesARecordOfAnotherShare(t *testing.T) {
	parts, names := segments(2)
	parts[1].Records[0].Client = 0
	_, err := bundle.MergeWith(parts, names, bundle.MergeOptions{})
	if err == nil || !strings.Contains(err.Error(), "w1: records[0].client 0 is worker 0's share") {
		t.Errorf("%v", err)
	}
}

// TestMergeUsesEachWavesOffset: a wave that carries the offset its worker
// measured at its barrier is rejoined with it, not with the worker's
// offset of its start: worker 1's clock, 0.3 s behind the coordinator's at
// the barrier, started the wave 0.3 s after worker 0 by the coordinator's
// clock though its own started_at equals worker 0's. The merged wave's
// offset uncertainty is the largest of its workers' at that barrier.
func TestMergeUsesEachWavesOffset(t *testing.T) {
	parts, names := segments(2)
	for i, p := range parts {
		for k := range p.Waves {
			p.Waves[k].ReleaseAt, p.Waves[k].ReleaseLateS = "", nil
			p.Waves[k].StartedAt = "2026-12-01T12:00:01Z"
			off, unc := 0.3*float64(i), 0.001*float64(i+1)
			p.Waves[k].ClockOffsetS, p.Waves[k].OffsetUncertaintyS = &off, &unc
		}
		p.Provenance.Worker.ClockOffsetS = 0
	}
	out, err := bundle.MergeWith(parts, names, bundle.MergeOptions{MaxOffsetUncertaintyS: 0.005})
	if err != nil {
		t.Fatal(err)
	}
	w := out.Waves[0]
	if s := w.WorkerReleaseSpreadS; s == nil || *s < 0.299 || *s > 0.301 {
		t.Errorf("spread %v, want 0.3 s from the waves' own offsets", s)
	}
	if u := w.OffsetUncertaintyS; u == nil || *u != 0.002 {
		t.Errorf("merged offset uncertainty %v, want the waves' largest, 0.002", u)
	}
	if w.ClockOffsetS != nil {
		t.Errorf("a merged wave carries a worker's clock offset %v", *w.ClockOffsetS)
	}
	if probs := bundle.VerifyResults(out); len(probs) > 0 {
		t.Errorf("does not verify: %v", probs)
	}
}
