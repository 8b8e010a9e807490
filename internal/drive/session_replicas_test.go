package drive

import (
	"context"
	"sort"
	"testing"

	"github.com/rehearse/rehearse/internal/contract"
)

// sessionPair is a target of two replicas, each a session server.
func sessionPair(t *testing.T, balance string) (Target, [2]*sessionServer) {
	a, sa := newSessionServer(t, nil)
	b, sb := newSessionServer(t, nil)
	return Target{Name: "pair", BaseURL: a.URL, Model: "m", Replicas: []string{a.URL, b.URL}, Balance: balance}, [2]*sessionServer{sa, sb}
}

// conversations groups records into conversations: by wave, client and
// session, in start order, a new one at each first turn.
func conversations(recs []contract.Record) [][]contract.Record {
	sorted := append([]contract.Record(nil), recs...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].StartS < sorted[j].StartS })
	type key struct{ wave, client, session int }
	open := map[key]int{}
	var out [][]contract.Record
	for _, r := range sorted {
		if r.Session == nil {
			continue
		}
		k := key{r.Wave, r.Client, *r.Session}
		if i, ok := open[k]; ok && r.Turn > 1 {
			out[i] = append(out[i], r)
			continue
		}
		open[k] = len(out)
		out = append(out, []contract.Record{r})
	}
	return out
}

// TestRoundRobinSessionsKeepToOneReplica: with client balancing, session
// s goes to replica s mod N, every turn of it: session 0 (3 turns, run by
// clients 0 and 2) to replica 0, session 1 (1 turn, clients 1 and 3) to
// replica 1, and each turn's record says so.
func TestRoundRobinSessionsKeepToOneReplica(t *testing.T) {
	tg, servers := sessionPair(t, BalanceRoundRobin)
	res, err := New(Options{}).ClosedWave(context.Background(), tg, WaveSpec{Load: sessionLoad(), Kind: contract.KindRecorded, Concurrency: 4, Repeat: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Records) != 8 {
		t.Fatalf("%d records, want 8 turns", len(res.Records))
	}
	for _, r := range res.Records {
		if r.Replica == nil || *r.Replica != *r.Session%2 {
			t.Errorf("client %d, session %d, turn %d went to replica %v, want %d", r.Client, *r.Session, r.Turn, r.Replica, *r.Session%2)
		}
	}
	if servers[0].n != 6 || servers[1].n != 2 {
		t.Errorf("replicas served %d and %d turns, want 6 and 2", servers[0].n, servers[1].n)
	}
}

// TestLeastOutstandingSessionsKeepTheirReplica: least-outstanding picks a
// session's replica at its first turn and keeps it. A closed wave's four
// sessions all pick before the release (each first turn is armed), so two
// go to each replica; in a sustained run of sessions back to back, no
// conversation changes replica either.
func TestLeastOutstandingSessionsKeepTheirReplica(t *testing.T) {
	tg, _ := sessionPair(t, BalanceLeastOutstanding)
	d := New(Options{})
	closed, err := d.ClosedWave(context.Background(), tg, WaveSpec{Load: sessionLoad(), Kind: contract.KindRecorded, Concurrency: 4, Repeat: 1})
	if err != nil {
		t.Fatal(err)
	}
	sustained, err := d.SustainedWave(context.Background(), tg, SustainedSpec{Load: sessionLoad(), Kind: contract.KindRecorded, Concurrency: 2, Repeat: 1, NumRequests: 12})
	if err != nil {
		t.Fatal(err)
	}
	per := [2]int{}
	for i, recs := range [][]contract.Record{closed.Records, sustained.Records} {
		convs := conversations(recs)
		if len(convs) < 2 {
			t.Fatalf("wave %d: %d conversations", i, len(convs))
		}
		for _, c := range convs {
			for _, r := range c {
				if r.Replica == nil || *r.Replica != *c[0].Replica {
					t.Errorf("wave %d, client %d, session %d: turn %d went to replica %v, its first turn to %d", i, r.Client, *r.Session, r.Turn, r.Replica, *c[0].Replica)
				}
			}
			if i == 0 && c[0].Replica != nil {
				per[*c[0].Replica]++
			}
		}
	}
	if per != [2]int{2, 2} {
		t.Errorf("the closed wave's sessions per replica %v, want 2 and 2", per)
	}
}
