package bundle

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// keptTimes gives back every chunk time bit for bit, whatever it is, and
// keeps whole nanoseconds (a rehearsal's Duration.Seconds, a decimal of
// nine places) compactly.
func TestKeptTimes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var recs [][]float64
	odd := []float64{0, math.Copysign(0, -1), math.NaN(), math.Inf(1), math.Inf(-1), 1e300, -1e-300, 5e-324, math.MaxFloat64, 1 << 53, 9007199.254740993}
	for i := 0; i < 3000; i++ {
		n := rng.IntN(40)
		ts := make([]float64, n)
		ns := rng.Int64N(1e12)
		step := int64(5e7)
		if i%12 == 1 {
			step = 5e9 // gaps beyond the 2.1 s of a 4-byte delta
		}
		for k := range ts {
			ns += rng.Int64N(step)
			if i%12 == 7 {
				ns -= rng.Int64N(2 * step) // out of order, negative
			}
			switch i % 6 {
			case 0:
				ts[k] = time.Duration(ns).Seconds()
			case 1:
				ts[k] = float64(ns) / 1e9
			case 2:
				ts[k] = float64(ns/1000) / 1e6 // microseconds, as bench/bundle writes them
			case 3:
				ts[k] = rng.Float64() * 1e4
			case 4:
				ts[k] = math.Float64frombits(rng.Uint64())
			default:
				ts[k] = odd[rng.IntN(len(odd))]
			}
		}
		if i%6 == 5 && n > 0 {
			ts[0] = time.Duration(ns).Seconds() // one odd value among whole ones
		}
		recs = append(recs, ts)
	}
	var c keptTimes
	for _, ts := range recs {
		c.add(ts)
	}
	if c.dropped {
		t.Fatal("dropped")
	}
	r := c.reader()
	for i, want := range recs {
		got := r.next()
		if len(got) != len(want) {
			t.Fatalf("record %d: %d times, want %d", i, len(got), len(want))
		}
		for k := range want {
			if math.Float64bits(got[k]) != math.Float64bits(want[k]) {
				t.Fatalf("record %d, time %d: %v (%x), want %v (%x)", i, k, got[k], math.Float64bits(got[k]), want[k], math.Float64bits(want[k]))
			}
		}
	}
	// Whole nanoseconds take a few bytes a time, not eight.
	var w keptTimes
	ts := make([]float64, 128)
	for k := range ts {
		ts[k] = time.Duration(int64(30e9) + int64(k)*int64(17_123_457)).Seconds()
	}
	w.add(ts)
	if w.size > 4*len(ts)+8 || w.size < 4*len(ts) {
		t.Errorf("128 times of whole nanoseconds take %d bytes", w.size)
	}
}
