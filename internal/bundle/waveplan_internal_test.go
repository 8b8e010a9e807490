package bundle

import (
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/contract"
)

// TestPlanCheckBoundsItsMemory: a request index far past the records
// seen is kept apart, not given a bitset up to it, and still found twice.
func TestPlanCheckBoundsItsMemory(t *testing.T) {
	p := newPlanCheck([]contract.Wave{{ID: 4, Server: "s", Kind: contract.KindRecorded, Mode: contract.ModeOpen}}, &Workload{}, nil)
	for i, k := range []int{1 << 40, 0, 1 << 40, 1} {
		p.add(i, &contract.Record{Wave: 4, Server: "s", Client: k})
	}
	if p.words > (planBits+4)/64 {
		t.Errorf("%d bitset words for 4 records", p.words)
	}
	var got []string
	for _, pr := range p.problems() {
		got = append(got, pr.String())
	}
	want := []string{
		"records[2].client: request 1099511627776 of the wave is recorded twice",
		"waves[0]: requests 0 to 1099511627776 sent, but request 2 has no record (1099511627774 missing)",
	}
	if len(got) != len(want) {
		t.Fatalf("got %q, want %d problems", got, len(want))
	}
	for i := range want {
		if !strings.Contains(got[i], want[i]) {
			t.Errorf("problem %d: %q does not contain %q", i, got[i], want[i])
		}
	}
}

// TestPlanCheckOfASegment: a worker's segment plans its share of each
// wave (clients, requests k with k mod count = index).
func TestPlanCheckOfASegment(t *testing.T) {
	waves := []contract.Wave{
		{ID: 0, Server: "s", Kind: contract.KindRecorded, Mode: contract.ModeClosed, Concurrency: 5},
		{ID: 1, Server: "s", Kind: contract.KindRecorded, Mode: contract.ModeOpen},
	}
	for _, tc := range []struct {
		name    string
		clients [2][]int // of waves 0 and 1
		want    []string
	}{
		{"its share", [2][]int{{3, 1}, {1, 5, 3}}, nil},
		{"a client missing, a request missing", [2][]int{{1}, {1, 7, 3}}, []string{
			"waves[0]: 1 of its 2 clients have a record (client 3 has none)",
			"waves[1]: requests 1 to 7 sent, but request 5 has no record (1 missing)"}},
		{"another worker's", [2][]int{{1, 2, 3}, {}}, []string{
			"records[1].client: 2 is not worker 1's (of 2 workers"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPlanCheck(waves, &Workload{}, &Worker{Index: 1, Count: 2})
			i := 0
			for w, clients := range tc.clients {
				for _, c := range clients {
					p.add(i, &contract.Record{Wave: w, Server: "s", Client: c})
					i++
				}
			}
			probs := p.problems()
			if len(probs) != len(tc.want) {
				t.Fatalf("got %v, want %d problems", probs, len(tc.want))
			}
			for k, want := range tc.want {
				if !strings.Contains(probs[k].String(), want) {
					t.Errorf("%q does not contain %q", probs[k], want)
				}
			}
		})
	}
}
