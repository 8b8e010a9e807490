package gguf

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
)

// Fills. A two-dimensional tensor of Dims {ne0, ne1} is ne1 rows of ne0
// elements: element i is row i/ne0, column i%ne0. For a weight that maps
// ne0 inputs to ne1 outputs, a row is one output and a column one input.

func zeros(buf []float32, first uint64) {}

func ones(buf []float32, first uint64) {
	for i := range buf {
		buf[i] = 1
	}
}

// uniform fills with independent values, uniform on [-std·√3, std·√3]
// (standard deviation std), from a generator seeded by the model's seed,
// the tensor's name and the chunk's first element: the same seed gives the
// same file however many goroutines write it.
func uniform(seed uint64, name string, std float32) Fill {
	h := fnv.New64a()
	h.Write([]byte(name))
	tensorSeed := seed ^ h.Sum64()
	bound := std * float32(math.Sqrt(3))
	return func(buf []float32, first uint64) {
		r := rand.New(rand.NewPCG(tensorSeed, first))
		for i := 0; i < len(buf); i += 2 {
			x := r.Uint64()
			buf[i] = (float32(x>>40)*0x1p-24*2 - 1) * bound
			if i+1 < len(buf) {
				buf[i+1] = (float32(x&(1<<24-1))*0x1p-24*2 - 1) * bound
			}
		}
	}
}

// setRow sets row `row` (of ne0 columns) to val(column) after f.
func setRow(f Fill, ne0, row uint64, val func(col uint64) float32) Fill {
	return func(buf []float32, first uint64) {
		f(buf, first)
		lo, hi := max(row*ne0, first), min((row+1)*ne0, first+uint64(len(buf)))
		for i := lo; i < hi; i++ {
			buf[i-first] = val(i - row*ne0)
		}
	}
}

// setCols sets the given columns of every row to val(row) after f.
func setCols(f Fill, ne0 uint64, cols []uint64, val func(row uint64) float32) Fill {
	return func(buf []float32, first uint64) {
		f(buf, first)
		end := first + uint64(len(buf))
		for row := first / ne0; row*ne0 < end; row++ {
			for _, c := range cols {
				if i := row*ne0 + c; i >= first && i < end {
					buf[i-first] = val(row)
				}
			}
		}
	}
}

func constant(v float32) func(uint64) float32 { return func(uint64) float32 { return v } }
