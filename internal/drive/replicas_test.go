package drive

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/plan"
	"github.com/rehearse/rehearse/internal/stream"
	"github.com/rehearse/rehearse/internal/workload"
)

// balancedTarget is a target of two replicas, each a fake server that
// counts its requests.
func balancedTarget(t *testing.T, balance string) (Target, [2]func() int64) {
	a, na := fakeServer(t, 2, time.Millisecond)
	b, nb := fakeServer(t, 2, time.Millisecond)
	tg := Target{Name: "pair", BaseURL: a.URL, Model: "m", IncludeUsage: true, Replicas: []string{a.URL, b.URL}, Balance: balance}
	return tg, [2]func() int64{na.Load, nb.Load}
}

func TestRoundRobinClosedWaveSplitsByClient(t *testing.T) {
	tg, hits := balancedTarget(t, BalanceRoundRobin)
	d := New(Options{Counter: words{}})
	res, err := d.ClosedWave(context.Background(), tg, WaveSpec{Load: testLoad(), Kind: contract.KindRecorded, Concurrency: 7})
	if err != nil {
		t.Fatal(err)
	}
	// The next wave's client 0 is the pair's request 7: replica 1.
	next, err := d.ClosedWave(context.Background(), tg, WaveSpec{Load: testLoad(), Kind: contract.KindRecorded, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	if r := next.Records; *r[0].Replica != 1 || *r[1].Replica != 0 {
		t.Errorf("the second wave's clients went to replicas %d and %d, want 1 and 0", *r[0].Replica, *r[1].Replica)
	}
	if err != nil {
		t.Fatal(err)
	}
	per := [2]int{}
	for _, r := range res.Records {
		if !r.OK || r.Replica == nil {
			t.Fatalf("record: %+v", r)
		}
		if *r.Replica != r.Client%2 {
			t.Errorf("client %d went to replica %d", r.Client, *r.Replica)
		}
		per[*r.Replica]++
	}
	if per != [2]int{4, 3} || hits[0]() != 4+1 || hits[1]() != 3+1 {
		t.Errorf("records per replica %v, requests seen %d and %d; want 4 and 3", per, hits[0](), hits[1]())
	}
}

func TestRoundRobinSustainedAndOpenWaves(t *testing.T) {
	tg, hits := balancedTarget(t, BalanceRoundRobin)
	d := New(Options{Counter: words{}})
	res, err := d.SustainedWave(context.Background(), tg, SustainedSpec{Load: testLoad(), Concurrency: 3, NumRequests: 9, WarmupRequests: 2})
	if err != nil {
		t.Fatal(err)
	}
	per := [2]int{}
	for _, r := range append(res.Warmup.Records, res.Records...) {
		per[*r.Replica]++
	}
	// Requests 0..10 of the run alternate: 6 to replica 0, 5 to replica 1.
	if per != [2]int{6, 5} || hits[0]() != 6 || hits[1]() != 5 {
		t.Errorf("sustained: records per replica %v, seen %d and %d", per, hits[0](), hits[1]())
	}
	open, err := d.OpenWave(context.Background(), tg, OpenSpec{Load: testLoad(), RequestRateRPS: 200, Arrival: workload.ArrivalFixed, NumRequests: 5})
	if err != nil {
		t.Fatal(err)
	}
	// The target's numbering goes on across waves: the open wave's
	// arrival i is the pair's request 11 + i.
	per = [2]int{}
	for i, r := range open.Records {
		if *r.Replica != (11+i)%2 {
			t.Errorf("arrival %d went to replica %d", i, *r.Replica)
		}
		per[*r.Replica]++
	}
	if per != [2]int{2, 3} {
		t.Errorf("open: records per replica %v", per)
	}
}

func TestLeastOutstandingPicksTheIdlest(t *testing.T) {
	rs := &replicaSet{prepared: make([][]*stream.Prepared, 3), balance: BalanceLeastOutstanding, outstanding: make([]int, 3)}
	var got []int
	for i := range 3 {
		got = append(got, rs.pick(i))
	}
	rs.done(1)
	got = append(got, rs.pick(3), rs.pick(4))
	if want := []int{0, 1, 2, 1, 0}; !equalInts(got, want) {
		t.Errorf("picks %v, want %v", got, want)
	}
	single := &replicaSet{prepared: make([][]*stream.Prepared, 1)}
	if r := single.pick(5); r != -1 || replicaTag(r) != nil {
		t.Errorf("a single address picks %d", r)
	}
}

func TestSingleTargetRecordsNoReplica(t *testing.T) {
	srv, _ := fakeServer(t, 2, time.Millisecond)
	d := New(Options{Counter: words{}})
	res, err := d.ClosedWave(context.Background(), Target{Name: "s", BaseURL: srv.URL, Model: "m"}, WaveSpec{Load: testLoad(), Kind: contract.KindRecorded, Concurrency: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Records {
		if r.Replica != nil {
			t.Errorf("replica %d on a single server's record", *r.Replica)
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestRefusedReplicaIsThatReplicasFailure(t *testing.T) {
	srv, _ := fakeServer(t, 2, time.Millisecond)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	d := New(Options{Counter: words{}})
	tg := Target{Name: "pair", BaseURL: srv.URL, Model: "m", Replicas: []string{srv.URL, dead}, Balance: BalanceRoundRobin}
	res, err := d.ClosedWave(context.Background(), tg, WaveSpec{Load: testLoad(), Kind: contract.KindRecorded, Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Records {
		switch *r.Replica {
		case 0:
			if !r.OK {
				t.Errorf("replica 0's request failed: %+v", r)
			}
		case 1:
			if r.OK || r.ErrorKind != contract.ErrConnect {
				t.Errorf("replica 1's request: ok %v, kind %q", r.OK, r.ErrorKind)
			}
		}
	}
}

// TestRoundRobinNumbersAlikeOnEveryWorker: a split plan's workers number a
// balanced target's next wave on from the whole wave's requests, not from
// their share, so client k of the next wave goes to the replica it goes to
// in one process.
func TestRoundRobinNumbersAlikeOnEveryWorker(t *testing.T) {
	tg, _ := balancedTarget(t, BalanceRoundRobin)
	replicaOf := map[int]int{} // client of the second wave -> replica
	for i := range 2 {
		d := New(Options{})
		s := Share{Segment: plan.Segment{Index: i, Count: 2}}
		if _, err := d.ClosedWave(context.Background(), tg, WaveSpec{Load: testLoad(), Kind: contract.KindRecorded, Concurrency: 7, Share: s}); err != nil {
			t.Fatal(err)
		}
		next, err := d.ClosedWave(context.Background(), tg, WaveSpec{Load: testLoad(), Kind: contract.KindRecorded, Concurrency: 2, Share: s})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range next.Records {
			replicaOf[r.Client] = *r.Replica
		}
	}
	// One process: the second wave's clients are the pair's requests 7, 8.
	if replicaOf[0] != 1 || replicaOf[1] != 0 {
		t.Errorf("the second wave's clients went to replicas %v, want client 0 to 1 and client 1 to 0 as in one process", replicaOf)
	}
}
