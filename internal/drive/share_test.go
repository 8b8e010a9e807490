package drive

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/plan"
	"github.com/rehearse/rehearse/internal/workload"
)

// shareRecords runs every worker's share of a wave (run) and returns each
// worker's records.
func shareRecords(t *testing.T, n int, run func(d *Driver, s Share) (WaveResult, error)) [][]contract.Record {
	t.Helper()
	out := make([][]contract.Record, n)
	for i := range n {
		res, err := run(New(Options{}), Share{Segment: plan.Segment{Index: i, Count: n}})
		if err != nil {
			t.Fatalf("worker %d: %v", i, err)
		}
		for _, r := range res.Records {
			if r.Worker == nil || *r.Worker != i {
				t.Fatalf("worker %d's record says worker %v", i, r.Worker)
			}
		}
		out[i] = res.Records
	}
	return out
}

// TestSharesOfAWave: a closed wave's clients, an open-loop schedule's
// requests (each at its planned offset) and a sustained run's requests
// are split among workers by global index, each sending the prompt it
// sends in the whole wave; a worker whose share is empty still runs the
// wave (with no records).
func TestSharesOfAWave(t *testing.T) {
	srv, _ := fakeServer(t, 2, 0)
	tgt := Target{Name: "s", BaseURL: srv.URL, Model: "m", IncludeUsage: true}
	load := testLoad()

	got := shareRecords(t, 3, func(d *Driver, s Share) (WaveResult, error) {
		return d.ClosedWave(context.Background(), tgt, WaveSpec{Load: load, Kind: contract.KindRecorded, Concurrency: 7, Repeat: 1, Share: s})
	})
	for i, recs := range got {
		var clients []int
		for _, r := range recs {
			clients = append(clients, r.Client)
			if r.Prompt != workload.PromptIndex(r.Client, len(load.Prompts)) || r.Concurrency != 7 {
				t.Errorf("closed, worker %d: client %d sent prompt %d at concurrency %d", i, r.Client, r.Prompt, r.Concurrency)
			}
		}
		slices.Sort(clients)
		if want := plan.Share(plan.Segment{Index: i, Count: 3}, 7); !slices.Equal(clients, want) {
			t.Errorf("closed, worker %d: clients %v, want %v", i, clients, want)
		}
	}
	empty := shareRecords(t, 4, func(d *Driver, s Share) (WaveResult, error) {
		return d.ClosedWave(context.Background(), tgt, WaveSpec{Load: load, Kind: contract.KindRecorded, Concurrency: 2, Repeat: 1, Share: s})
	})
	if len(empty[2]) != 0 || len(empty[3]) != 0 || len(empty[0]) != 1 {
		t.Errorf("2 clients over 4 workers: %d %d %d %d records", len(empty[0]), len(empty[1]), len(empty[2]), len(empty[3]))
	}

	spec := OpenSpec{Load: load, Repeat: 1, RequestRateRPS: 500, Arrival: workload.ArrivalPoisson, Seed: 3, NumRequests: 9}
	offsets, err := spec.Offsets()
	if err != nil {
		t.Fatal(err)
	}
	got = shareRecords(t, 2, func(d *Driver, s Share) (WaveResult, error) {
		sp := spec
		sp.Share = s
		return d.OpenWave(context.Background(), tgt, sp)
	})
	seen := 0
	for i, recs := range got {
		for _, r := range recs {
			seen++
			if r.Client%2 != i || r.IntendedStartS != offsets[r.Client].Seconds() || r.Prompt != workload.PromptIndex(r.Client, len(load.Prompts)) {
				t.Errorf("open, worker %d: request %d intended %v prompt %d; the schedule has it at %v", i, r.Client, r.IntendedStartS, r.Prompt, offsets[r.Client].Seconds())
			}
		}
	}
	if seen != 9 {
		t.Errorf("open: %d requests over the workers, want 9", seen)
	}

	got = shareRecords(t, 3, func(d *Driver, s Share) (WaveResult, error) {
		return d.SustainedWave(context.Background(), tgt, SustainedSpec{Load: load, Concurrency: 4, Repeat: 1, NumRequests: 10, Share: s})
	})
	prompts := map[int]int{}
	for i, recs := range got {
		for _, r := range recs {
			if r.Client%3 != i {
				t.Errorf("sustained, worker %d: client %d", i, r.Client)
			}
			prompts[r.Prompt]++
		}
	}
	// Requests 0..9 of the run send prompts k mod 3: 0 four times, 1 and 2 three.
	if prompts[0] != 4 || prompts[1] != 3 || prompts[2] != 3 {
		t.Errorf("sustained prompts %v, want the whole run's {0:4 1:3 2:3}", prompts)
	}
}

// TestSharedSessions: sessions are split by session (closed: client j
// runs session j; open: arrival k starts session k).
func TestSharedSessions(t *testing.T) {
	srv, _ := newSessionServer(t, nil)
	tgt := Target{Name: "s", BaseURL: srv.URL}
	got := shareRecords(t, 2, func(d *Driver, s Share) (WaveResult, error) {
		return d.ClosedWave(context.Background(), tgt, WaveSpec{Load: sessionLoad(), Kind: contract.KindRecorded, Concurrency: 2, Repeat: 1, Share: s})
	})
	var turns []string
	for i, recs := range got {
		for _, r := range recs {
			turns = append(turns, fmt.Sprintf("w%d:%d:%d.%d", i, r.Client, *r.Session, r.Turn))
		}
	}
	if s := strings.Join(turns, " "); s != "w0:0:0.1 w0:0:0.2 w0:0:0.3 w1:1:1.1" {
		t.Errorf("closed session shares %s", s)
	}
}

// TestShareReleasesAtTheAgreedInstant: a wave with an agreed release is
// let go no sooner than it, times its records from it, and says so.
func TestShareReleasesAtTheAgreedInstant(t *testing.T) {
	srv, _ := fakeServer(t, 1, 0)
	at := time.Now().Add(150 * time.Millisecond)
	res, err := New(Options{}).ClosedWave(context.Background(), Target{Name: "s", BaseURL: srv.URL, Model: "m"},
		WaveSpec{Load: testLoad(), Kind: contract.KindRecorded, Concurrency: 2, Repeat: 1,
			Share: Share{Segment: plan.Segment{Index: 0, Count: 2}, ReleaseAt: at, ReleaseStamp: "stamp"}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Release.Equal(at) || res.Wave.ReleaseAt != "stamp" || res.Wave.ReleaseLateS == nil || *res.Wave.ReleaseLateS < 0 {
		t.Errorf("release %v (want %v), release_at %q, late %v", res.Release, at, res.Wave.ReleaseAt, res.Wave.ReleaseLateS)
	}
	for _, r := range res.Records {
		if r.StartS < 0 {
			t.Errorf("record starts at %v, before the agreed release", r.StartS)
		}
	}
}
