package contract

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// exactBoundRank is UpperBoundRank worked out in integers, for q = num/den
// and confidence 95 %: the smallest k with P[Binomial(n, q) ≤ k−1] ≥ 0.95,
// summing C(n, j)·numʲ·(den−num)ⁿ⁻ʲ over den^n exactly; rank k−1, false
// when k would pass n.
func exactBoundRank(n int, num, den int64) (int, bool) {
	rest := den - num
	total := new(big.Int).Exp(big.NewInt(den), big.NewInt(int64(n)), nil)
	need := new(big.Int).Mul(total, big.NewInt(95)) // P ≥ 95/100 ⇔ 100·sum ≥ 95·total
	term := new(big.Int).Exp(big.NewInt(rest), big.NewInt(int64(n)), nil)
	sum, scaled := new(big.Int), new(big.Int)
	for k := 1; k <= n; k++ {
		j := int64(k - 1) // sum holds the terms 0..k−1
		sum.Add(sum, term)
		if scaled.Mul(sum, big.NewInt(100)).Cmp(need) >= 0 {
			return k - 1, true
		}
		term.Mul(term, big.NewInt((int64(n)-j)*num))
		term.Quo(term, big.NewInt((j+1)*rest))
	}
	return 0, false
}

// exactMinN is the smallest n with numⁿ·100 ≤ 5·denⁿ, qⁿ ≤ 0.05 exactly.
func exactMinN(num, den int64) int {
	a, b := big.NewInt(100), big.NewInt(5)
	for n := 1; ; n++ {
		a.Mul(a, big.NewInt(num))
		b.Mul(b, big.NewInt(den))
		if a.Cmp(b) <= 0 {
			return n
		}
	}
}

func TestUpperBoundRankIsTheExactBinomialBound(t *testing.T) {
	qs := []struct {
		num, den int64
	}{{99, 100}, {95, 100}, {9, 10}, {1, 2}}
	for _, q := range qs {
		p := float64(q.num) / float64(q.den)
		ns := []int{1, 2, 3, 1000, 1234, 3001, 10000}
		for n := 4; n <= 400; n++ {
			ns = append(ns, n)
		}
		for _, n := range ns {
			want, wantOK := exactBoundRank(n, q.num, q.den)
			got, ok := UpperBoundRank(n, p, 0.95)
			if got != want || ok != wantOK {
				t.Fatalf("q %v, n %d: rank %d %v, exact %d %v", p, n, got, ok, want, wantOK)
			}
		}
	}
}

func TestMinBoundN(t *testing.T) {
	for _, tc := range []struct {
		num, den int64
		want     int
	}{{99, 100, 299}, {95, 100, 59}, {9, 10, 29}, {1, 2, 5}, {999, 1000, 2995}} {
		q := float64(tc.num) / float64(tc.den)
		if exact := exactMinN(tc.num, tc.den); exact != tc.want {
			t.Fatalf("q %v: exact %d, table %d", q, exact, tc.want)
		}
		if got := MinBoundN(q, 0.95); got != tc.want {
			t.Errorf("MinBoundN(%v) = %d, want %d", q, got, tc.want)
		}
		if _, ok := UpperBoundRank(tc.want-1, q, 0.95); ok {
			t.Errorf("q %v: a bound at n %d, below the minimum", q, tc.want-1)
		}
		if k, ok := UpperBoundRank(tc.want, q, 0.95); !ok || k != tc.want-1 {
			t.Errorf("q %v: at the minimum n %d, rank %d %v, want the maximum %d", q, tc.want, k, ok, tc.want-1)
		}
	}
	if p99MinN != 299 {
		t.Errorf("p99_min_n %d, want 299", p99MinN)
	}
}

// The bound's rank never falls as the sample grows, grows by at most one
// a sample, and stays at or above the type 7 percentile's upper rank, so
// the bound is never below the percentile it bounds.
func TestUpperBoundRankMonotone(t *testing.T) {
	for _, q := range []float64{0.95, 0.99} {
		prev, seen := 0, false
		for n := 1; n <= 20000; n++ {
			k, ok := UpperBoundRank(n, q, 0.95)
			if !ok {
				if seen {
					t.Fatalf("q %v: no bound at n %d after one at a smaller n", q, n)
				}
				continue
			}
			if seen && (k < prev || k > prev+1) {
				t.Fatalf("q %v: rank %d at n %d after %d", q, k, n, prev)
			}
			if lo := int(math.Ceil(float64(n-1) * q)); k < lo {
				t.Fatalf("q %v, n %d: rank %d below the percentile's %d", q, n, k, lo)
			}
			prev, seen = k, true
		}
	}
}

// lgammaBoundRank is the bound from a log-space sum of every binomial
// term, O(n): an independent float computation for samples too large for
// the exact one.
func lgammaBoundRank(n int, q float64) int {
	ln, _ := math.Lgamma(float64(n + 1))
	tail := 0.0
	for j := n; j >= 0; j-- {
		a, _ := math.Lgamma(float64(j + 1))
		b, _ := math.Lgamma(float64(n - j + 1))
		tail += math.Exp(ln - a - b + float64(j)*math.Log(q) + float64(n-j)*math.Log1p(-q))
		if tail > 0.05 {
			return j
		}
	}
	return -1
}

func TestUpperBoundRankLargeSamples(t *testing.T) {
	for _, n := range []int{123457, 1000000, 3000017} {
		for _, q := range []float64{0.95, 0.99} {
			want := lgammaBoundRank(n, q)
			if got, ok := UpperBoundRank(n, q, 0.95); !ok || got != want {
				t.Errorf("q %v, n %d: rank %d %v, log-space sum %d", q, n, got, ok, want)
			}
		}
	}
}

func TestSummarizeTailBounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 58, 59, 298, 299, 1000} {
		xs := make([]float64, n)
		for i := range xs {
			xs[i] = rng.ExpFloat64()
		}
		p := Summarize(xs)
		s := sortedCopy(xs)
		if p.P99MinN != 299 {
			t.Errorf("n %d: p99_min_n %d", n, p.P99MinN)
		}
		for _, b := range []struct {
			name string
			q    float64
			ub   *float64
			min  int
		}{{"p95_ub", 0.95, p.P95UB, 59}, {"p99_ub", 0.99, p.P99UB, 299}} {
			if n < b.min {
				if b.ub != nil {
					t.Errorf("n %d: %s %v below the minimum %d", n, b.name, *b.ub, b.min)
				}
				continue
			}
			k, _ := UpperBoundRank(n, b.q, 0.95)
			if b.ub == nil || *b.ub != s[k] {
				t.Errorf("n %d: %s %v, want x(%d) = %v", n, b.name, b.ub, k+1, s[k])
			}
			if n == b.min && *b.ub != s[n-1] {
				t.Errorf("n %d: %s %v, want the maximum %v", n, b.name, *b.ub, s[n-1])
			}
		}
	}
}
