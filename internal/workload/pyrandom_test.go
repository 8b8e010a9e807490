package workload

import (
	"slices"
	"testing"
)

// pyRandom draws what CPython's random does with the same seed (the values
// below are CPython 3's: random.seed(s); random.shuffle(list(range(12)))).
func TestPyRandomIsCPythons(t *testing.T) {
	r := newPyRandom(0)
	if got := []uint32{r.uint32(), r.uint32(), r.uint32()}; !slices.Equal(got, []uint32{3626764237, 1654615998, 3255389356}) {
		t.Errorf("getrandbits(32) after seed(0): %v", got)
	}
	for seed, want := range map[uint64][]int{
		0:         {1, 9, 8, 5, 10, 2, 3, 7, 4, 0, 11, 6},
		1:         {7, 11, 0, 8, 5, 6, 3, 10, 4, 1, 9, 2},
		42:        {7, 5, 2, 8, 9, 6, 11, 3, 4, 0, 1, 10},
		1<<40 + 5: {3, 5, 2, 9, 6, 7, 1, 10, 0, 4, 11, 8},
	} {
		l := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
		newPyRandom(seed).shuffle(len(l), func(i, j int) { l[i], l[j] = l[j], l[i] })
		if !slices.Equal(l, want) {
			t.Errorf("shuffle with seed %d: %v, want %v", seed, l, want)
		}
	}
}
