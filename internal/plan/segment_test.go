package plan

import (
	"slices"
	"testing"
)

// TestShareSplitsEveryUnitOnce: the workers' shares of n units are
// disjoint, cover [0, n) and keep the global indices; an empty share is
// possible (more workers than units) and the whole plan is every index.
func TestShareSplitsEveryUnitOnce(t *testing.T) {
	for _, n := range []int{0, 1, 3, 8, 10} {
		for _, count := range []int{1, 2, 4, 7} {
			seen := make([]int, n)
			for i := range count {
				s := Segment{Index: i, Count: count}
				for _, k := range Share(s, n) {
					if k%count != i && count > 1 {
						t.Fatalf("n=%d %d/%d: unit %d is not this worker's", n, i, count, k)
					}
					if !owns(s, k) {
						t.Fatalf("n=%d %d/%d: Share gives %d, Owns says no", n, i, count, k)
					}
					seen[k]++
				}
			}
			for k, c := range seen {
				if c != 1 {
					t.Fatalf("n=%d count=%d: unit %d is in %d shares", n, count, k, c)
				}
			}
		}
	}
	if got := Share(Segment{}, 4); !slices.Equal(got, []int{0, 1, 2, 3}) {
		t.Errorf("whole plan: %v", got)
	}
	if got := Share(Segment{Index: 3, Count: 4}, 2); len(got) != 0 {
		t.Errorf("worker 3 of 4, 2 units: %v, want none", got)
	}
}

func TestShareCap(t *testing.T) {
	total := 0
	for i := range 4 {
		total += ShareCap(Segment{Index: i, Count: 4}, 10)
	}
	if total != 10 {
		t.Errorf("a cap of 10 over 4 workers sums to %d", total)
	}
	if got := ShareCap(Segment{Index: 3, Count: 4}, 2); got != 1 {
		t.Errorf("worker 3 of 4, cap 2: %d, want at least 1", got)
	}
	if got := ShareCap(Segment{Index: 1, Count: 4}, 0); got != 0 {
		t.Errorf("no cap stays no cap: %d", got)
	}
}

// owns reports whether segment s owns unit k of a wave (k mod count = index).
func owns(s Segment, k int) bool { return s.Whole() || k%s.Count == s.Index }
