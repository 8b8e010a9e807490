package search

import (
	"math"
	"math/rand/v2"
)

// wilson is the 95 % Wilson score interval of good successes in n trials:
// a test's own, so that this package's tests stand without contract's.
func wilson(good, n int) (lo, hi float64) {
	if n == 0 {
		return 0, 1
	}
	const z = 1.959963984540054
	p, nf := float64(good)/float64(n), float64(n)
	den := 1 + z*z/nf
	center := (p + z*z/(2*nf)) / den
	half := z * math.Sqrt(p*(1-p)/nf+z*z/(4*nf*nf)) / den
	return math.Max(0, center-half), math.Min(1, center+half)
}

// verdictOf is SPEC §8's verdict: pass when the interval lies wholly above
// α, fail when wholly below, unresolved otherwise or below min requests.
func verdictOf(lo, hi, alpha float64, n, minRequests int) string {
	switch {
	case n < minRequests:
		return VerdictUnresolved
	case lo > alpha:
		return VerdictPass
	case hi < alpha:
		return VerdictFail
	}
	return VerdictUnresolved
}

// model is a synthetic, deterministic server: its true attainment at each
// concurrency. Its capacity (the true boundary) is the largest load whose
// attainment is at least α.
type model struct {
	name       string
	attainment func(c int) float64
}

// logistic falls from 1 to 0.9 around mid with the given width: with α =
// 0.95 its boundary is the largest integer below mid (mid non-integer).
func logistic(name string, mid, width float64) model {
	return model{name: name, attainment: func(c int) float64 {
		return 1 - 0.1/(1+math.Exp(-(float64(c)-mid)/width))
	}}
}

func (m model) boundary(alpha float64, max int) int {
	b := 0
	for c := 1; c <= max; c++ {
		if m.attainment(c) >= alpha {
			b = c
		}
	}
	return b
}

// prober draws probe outcomes from a model with a seeded binomial: each
// request is good with the model's attainment at the probe's load.
type prober struct {
	m   model
	rng *rand.Rand
	cfg Config
	cap int // max requests of a probe (RetryScale times for a retry)
	// every is how many requests past min_requests the interval is looked
	// at again (0: at min_requests × 2^k only).
	every int
	// fixed, when set, measures exactly fixed requests and gives the point
	// estimate's verdict with no interval (the plain search to compare).
	fixed    int
	requests int // requests spent so far
}

func (p *prober) probe(pr Probe) Outcome {
	att := p.m.attainment(pr.Load)
	if p.fixed > 0 {
		good := p.draw(att, p.fixed)
		p.requests += p.fixed
		est := float64(good) / float64(p.fixed)
		v := VerdictFail
		if est >= p.cfg.Alpha {
			v = VerdictPass
		}
		return Outcome{N: p.fixed, Good: good, Attainment: est, CILow: est, CIHigh: est, Verdict: v}
	}
	limit := p.cap
	if pr.Retry {
		limit *= RetryScale
	}
	n, good := 0, 0
	for n < limit {
		step := p.every
		switch {
		case n < p.cfg.MinRequests:
			step = p.cfg.MinRequests - n
		case p.every == 0: // looks at min_requests × 2^k (Look)
			step = n
		}
		step = min(step, limit-n)
		good += p.draw(att, step)
		n += step
		lo, hi := wilson(good, n)
		if verdictOf(lo, hi, p.cfg.Alpha, n, p.cfg.MinRequests) != VerdictUnresolved {
			break
		}
	}
	p.requests += n
	lo, hi := wilson(good, n)
	return Outcome{N: n, Good: good, Attainment: float64(good) / float64(n), CILow: lo, CIHigh: hi,
		Verdict: verdictOf(lo, hi, p.cfg.Alpha, n, p.cfg.MinRequests), Failures: 0,
		AchievedRPS: float64(pr.Load), GoodputTokS: 100 * float64(pr.Load), Binding: "ttft"}
}

func (p *prober) draw(att float64, n int) int {
	good := 0
	for range n {
		if p.rng.Float64() < att {
			good++
		}
	}
	return good
}

// run drives a whole search of cfg against p and returns its result.
func run(cfg Config, p *prober) (Result, error) {
	s, err := New(cfg)
	if err != nil {
		return Result{}, err
	}
	for {
		pr, ok := s.Next()
		if !ok {
			return s.Result(), nil
		}
		if err := s.Observe(pr, p.probe(pr)); err != nil {
			return Result{}, err
		}
	}
}

// contains reports whether the bracket holds the boundary b: max_pass ≤ b
// < min_fail (no min_fail: above every load).
func contains(r Result, b int) bool {
	return r.MaxPass <= b && (r.MinFail == 0 || b < r.MinFail)
}
