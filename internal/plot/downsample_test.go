package plot

import (
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/rehearse/rehearse/internal/contract"
)

// A CDF of many values is drawn through cdfMaxPoints steps, each exactly
// on the empirical CDF, the smallest and largest values included; a small
// one through a step per value.
func TestECDFDownsamples(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 7, cdfMaxPoints, cdfMaxPoints + 1, 100_000} {
		xs := make([]float64, n)
		for i := range xs {
			xs[i] = rng.ExpFloat64()
		}
		pts := ecdf(xs)
		want := min(n, cdfMaxPoints) + 1
		if len(pts) != want {
			t.Fatalf("n=%d: %d points, want %d", n, len(pts), want)
		}
		s := append([]float64(nil), xs...)
		sort.Float64s(s)
		if pts[0].X != s[0] || pts[0].Y != 0 || pts[len(pts)-1].X != s[n-1] || pts[len(pts)-1].Y != 1 {
			t.Fatalf("n=%d: ends %v and %v, want (%v, 0) and (%v, 1)", n, pts[0], pts[len(pts)-1], s[0], s[n-1])
		}
		for _, p := range pts[1:] {
			// Exactly on the CDF: the share of values ≤ x is the height,
			// for distinct values.
			le := sort.SearchFloat64s(s, p.X)
			for le < n && s[le] <= p.X {
				le++
			}
			if float64(le)/float64(n) != p.Y {
				t.Fatalf("n=%d: point %v is not on the empirical CDF (%d of %d values ≤ x)", n, p, le, n)
			}
		}
	}
}

func TestSampleRequests(t *testing.T) {
	small := make([]contract.Record, timelineMaxRequests)
	if got := sampleRequests(small); len(got) != len(small) {
		t.Errorf("%d requests sampled to %d", len(small), len(got))
	}
	big := make([]contract.Record, 10*timelineMaxRequests+3)
	for i := range big {
		big[i].Client = i
	}
	got := sampleRequests(big)
	if len(got) != timelineMaxRequests || got[0].Client != 0 || got[len(got)-1].Client != len(big)-1 {
		t.Fatalf("%d sampled, first %d, last %d", len(got), got[0].Client, got[len(got)-1].Client)
	}
	for i := 1; i < len(got); i++ {
		if got[i].Client <= got[i-1].Client {
			t.Fatal("not in order of sending")
		}
	}
}
