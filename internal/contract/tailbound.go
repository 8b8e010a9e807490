package contract

import "math"

// TailConfidence is the confidence of the tail bounds of a latency summary
// (p95_ub, p99_ub).
const TailConfidence = 0.95

// tailPs are the quantiles a latency summary bounds from above.
var tailPs = []float64{0.95, 0.99}

// UpperBoundRank returns the rank (0: the smallest) of the order statistic
// of a sorted sample of n that is an upper confidence bound, at confidence
// conf, of the population's q-quantile; false when no order statistic of
// n is one (n is too small).
//
// The bound is distribution-free, from order statistics and the binomial
// law (the argument of MLPerf LoadGen's early stopping). For n independent
// samples x(1) ≤ … ≤ x(n) of a continuous distribution whose q-quantile is
// ξ, the count B of samples below ξ is Binomial(n, q), and x(k) < ξ exactly
// when B ≥ k. So x(k) is at or above ξ with probability P[B ≤ k−1], and
// x(k) is a conf upper bound when P[Binomial(n, q) ≤ k−1] ≥ conf. The
// bound is x(k) for the smallest such k, the returned rank is k−1, and
// there is none when k would pass n: P[B ≤ n−1] = 1 − qⁿ, so a bound needs
// qⁿ ≤ 1 − conf (n ≥ 59 for q = 0.95, 299 for q = 0.99, at 95 %:
// MinBoundN). Where the distribution has atoms (ties), fewer samples fall
// strictly below ξ than Binomial(n, q) says, and the bound is conservative
// still.
//
// P[B ≥ k] is summed from the binomial terms around the mode, each from
// the one before by the ratio (n−j)/(j+1) · q/(1−q) and scaled so that the
// mode's is 1, out to terms below 1e-20 of it on either side: no term
// underflows, the normalization is the sum itself, and the walk is a few
// tens of standard deviations, √(nq(1−q)), long: O(√n), not O(n).
func UpperBoundRank(n int, q, conf float64) (int, bool) {
	if n <= 0 || !(q > 0 && q < 1) || !(conf > 0 && conf < 1) {
		return 0, false
	}
	const tiny = 1e-20
	r := q / (1 - q)
	m := min(n, int(math.Floor(float64(n+1)*q)))
	total := 1.0
	// Up from the mode: hi is the last term counted, tHi its value.
	hi, tHi := m, 1.0
	for t := 1.0; hi < n; hi++ {
		t = t * float64(n-hi) / float64(hi+1) * r
		if t < tiny {
			break
		}
		total += t
		tHi = t
	}
	for j, t := m, 1.0; j > 0; j-- {
		t = t * float64(j) / (float64(n-j+1) * r)
		if t < tiny {
			break
		}
		total += t
	}
	// Down from the top: tail is P[B ≥ j] (× total); the bound is the
	// order statistic above the first j whose tail exceeds 1 − conf.
	limit := (1 - conf) * total
	tail, t := 0.0, tHi
	for j := hi; j >= 0; j-- {
		if tail += t; tail > limit {
			if j >= n {
				return 0, false
			}
			return j, true // k = j+1, rank k−1
		}
		t = t * float64(j) / (float64(n-j+1) * r)
	}
	return 0, false // unreachable: the whole sum exceeds the limit
}

// MinBoundN returns the smallest sample size n for which UpperBoundRank
// has a bound of the q-quantile at confidence conf: the first n with
// qⁿ ≤ 1 − conf, 0 where q or conf is outside (0, 1).
func MinBoundN(q, conf float64) int {
	if !(q > 0 && q < 1) || !(conf > 0 && conf < 1) {
		return 0
	}
	n := max(1, int(math.Ceil(math.Log(1-conf)/math.Log(q))))
	// The logarithms round: settle on UpperBoundRank's own answer.
	for _, ok := UpperBoundRank(n, q, conf); !ok; _, ok = UpperBoundRank(n, q, conf) {
		n++
	}
	for n > 1 {
		if _, ok := UpperBoundRank(n-1, q, conf); !ok {
			break
		}
		n--
	}
	return n
}

// p99MinN is MinBoundN of the p99 at TailConfidence, every summary's
// p99_min_n.
var p99MinN = MinBoundN(0.99, TailConfidence)

// setBounds sets the tail bounds of p, the summary of a population of p.N
// whose order statistic of rank i (0: the smallest) is at(i).
func (p *Percentiles) setBounds(at func(rank int) float64) {
	p.P99MinN = p99MinN
	p.P95UB, p.P99UB = nil, nil
	for _, q := range tailPs {
		k, ok := UpperBoundRank(p.N, q, TailConfidence)
		if !ok {
			continue
		}
		v := at(k)
		if q == 0.95 {
			p.P95UB = &v
		} else {
			p.P99UB = &v
		}
	}
}

// boundRanks are the ranks setBounds reads in a population of n.
func boundRanks(n int) []int {
	var out []int
	for _, q := range tailPs {
		if k, ok := UpperBoundRank(n, q, TailConfidence); ok {
			out = append(out, k)
		}
	}
	return out
}
