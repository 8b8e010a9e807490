package bundle

import (
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/contract"
)

// TestPlanCheckBoundsItsMemory: a request index far past the records
// seen is kept apart, not given a bitset up to it, and still found twice.
func TestPlanCheckBoundsItsMemory(t *testing.T) {
	p := newPlanCheck([]contract.Wave{{ID: 4, Server: "s", Kind: contract.KindRecorded, Mode: contract.ModeOpen}}, &Workload{})
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
