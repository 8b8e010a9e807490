package plottest

import (
	"bytes"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle/bundletest"
	"github.com/rehearse/rehearse/internal/contract"
)

func TestDefaultIsAValidSeedShapedBundle(t *testing.T) {
	res := Results(Default())
	data, err := bundletest.Encode(res)
	if err != nil {
		t.Fatal(err)
	}
	back, err := bundletest.Decode(data)
	if err != nil {
		t.Fatalf("synthetic results do not read back (bundle.ReadResults): %v", err)
	}
	recomputed := *back
	recomputed.Recompute()
	a, _ := bundletest.Encode(back)
	b, _ := bundletest.Encode(&recomputed)
	if !bytes.Equal(a, b) {
		t.Error("stored aggregates differ from the contract's recomputation")
	}
	fails := map[string]map[int]int{}
	for _, ag := range res.Aggregates {
		if fails[ag.Server] == nil {
			fails[ag.Server] = map[int]int{}
		}
		fails[ag.Server][ag.Concurrency] = ag.Failures.Count
		if ag.Repeats != 3 {
			t.Errorf("%s at %d: %d repeats", ag.Server, ag.Concurrency, ag.Repeats)
		}
	}
	// The seed's shape: the serial server times out at 32 and 64 clients,
	// never below; the batching server never.
	for _, c := range []int{1, 8} {
		if fails["naive"][c] != 0 {
			t.Errorf("naive fails at %d clients", c)
		}
	}
	for _, c := range []int{32, 64} {
		if fails["naive"][c] == 0 {
			t.Errorf("naive never fails at %d clients", c)
		}
	}
	for c, n := range fails["batching"] {
		if n != 0 {
			t.Errorf("batching fails %d times at %d clients", n, c)
		}
	}
	m := res.MechanismCheck
	if m == nil || m.Max == nil || *m.Max != 64 || m.Server != "batching" {
		t.Errorf("mechanism check %+v, want batching with a maximum of 64 running", m)
	}
	cold := 0
	for _, w := range res.Waves {
		if w.Cold {
			cold++
			if w.Repeat != 1 || w.Concurrency != 1 || w.Kind != contract.KindRecorded {
				t.Errorf("cold wave %+v is not the first recorded wave of its server", w)
			}
		}
	}
	if cold != 2 {
		t.Errorf("%d cold waves, want one per server", cold)
	}
}

func TestSameOptionsSameResults(t *testing.T) {
	a, _ := bundletest.Encode(Results(Default()))
	b, _ := bundletest.Encode(Results(Default()))
	if !bytes.Equal(a, b) {
		t.Error("two builds with the same options differ")
	}
	o := Default()
	o.Seed = 2
	c, _ := bundletest.Encode(Results(o))
	if bytes.Equal(a, c) {
		t.Error("another seed gives the same results")
	}
}
