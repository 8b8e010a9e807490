package workload

// pyRandom is CPython's random.Random as random.seed(n) seeds it for a
// non-negative integer n: the Mersenne Twister MT19937 initialised by
// init_by_array with n's 32-bit words, least significant first. vLLM's
// datasets shuffle with it (random.seed(seed); random.shuffle(data)), so a
// source that draws with it picks the entries vLLM picks.
type pyRandom struct {
	mt  [624]uint32
	idx int
}

func newPyRandom(seed uint64) *pyRandom {
	key := []uint32{uint32(seed)}
	if hi := uint32(seed >> 32); hi != 0 {
		key = append(key, hi)
	}
	r := &pyRandom{}
	r.initGenrand(19650218)
	i, j := 1, 0
	for k := max(624, len(key)); k > 0; k-- {
		r.mt[i] = (r.mt[i] ^ ((r.mt[i-1] ^ (r.mt[i-1] >> 30)) * 1664525)) + key[j] + uint32(j)
		i, j = i+1, j+1
		if i >= 624 {
			r.mt[0], i = r.mt[623], 1
		}
		if j >= len(key) {
			j = 0
		}
	}
	for k := 623; k > 0; k-- {
		r.mt[i] = (r.mt[i] ^ ((r.mt[i-1] ^ (r.mt[i-1] >> 30)) * 1566083941)) - uint32(i)
		i++
		if i >= 624 {
			r.mt[0], i = r.mt[623], 1
		}
	}
	r.mt[0] = 0x80000000
	return r
}

func (r *pyRandom) initGenrand(s uint32) {
	r.mt[0] = s
	for i := 1; i < 624; i++ {
		r.mt[i] = 1812433253*(r.mt[i-1]^(r.mt[i-1]>>30)) + uint32(i)
	}
	r.idx = 624
}

// uint32 is genrand_uint32.
func (r *pyRandom) uint32() uint32 {
	if r.idx >= 624 {
		for k := range 624 {
			y := (r.mt[k] & 0x80000000) | (r.mt[(k+1)%624] & 0x7fffffff)
			v := r.mt[(k+397)%624] ^ (y >> 1)
			if y&1 != 0 {
				v ^= 0x9908b0df
			}
			r.mt[k] = v
		}
		r.idx = 0
	}
	y := r.mt[r.idx]
	r.idx++
	y ^= y >> 11
	y ^= (y << 7) & 0x9d2c5680
	y ^= (y << 15) & 0xefc60000
	return y ^ (y >> 18)
}

// randBelow is _randbelow_with_getrandbits(n) for 1 ≤ n < 2³²: draws of
// n's bit length until one is below n.
func (r *pyRandom) randBelow(n int) int {
	k := 0
	for v := n; v > 0; v >>= 1 {
		k++
	}
	for {
		if v := int(r.uint32() >> (32 - k)); v < n {
			return v
		}
	}
}

// shuffle is random.shuffle of n items, swap exchanging two of them.
func (r *pyRandom) shuffle(n int, swap func(i, j int)) {
	for i := n - 1; i > 0; i-- {
		swap(i, r.randBelow(i+1))
	}
}
