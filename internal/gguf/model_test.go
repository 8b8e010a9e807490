package gguf

import (
	"crypto/sha256"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
)

// tiny is a shape small enough to write many times in a test.
var tiny = Shape{Arch: "qwen2", Layers: 2, Embd: 16, Heads: 4, KVHeads: 2, FFN: 32, Context: 2048,
	RopeBase: 1e6, NormEps: 1e-6, Tied: true, Type: F16}

var models sync.Map // fmt.Sprint(shape, seed) → *Model: New reads the whole vocabulary

func newModel(t *testing.T, s Shape, seed uint64) *Model {
	t.Helper()
	key := fmt.Sprint(s, seed)
	if m, ok := models.Load(key); ok {
		return m.(*Model)
	}
	m, err := New(s, seed, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	models.Store(key, m)
	return m
}

func digest(t *testing.T, m *Model) [32]byte {
	t.Helper()
	h := sha256.New()
	if _, err := m.Write(h); err != nil {
		t.Fatal(err)
	}
	return [32]byte(h.Sum(nil))
}

// TestWriteIsDeterministic: one seed, one file, however many goroutines
// generate it; another seed, another file.
func TestWriteIsDeterministic(t *testing.T) {
	m := newModel(t, tiny, 7)
	a := digest(t, m)
	prev := runtime.GOMAXPROCS(1)
	b := digest(t, m)
	runtime.GOMAXPROCS(prev)
	if a != b {
		t.Fatal("the same seed wrote different files on 1 and on GOMAXPROCS goroutines")
	}
	if digest(t, newModel(t, tiny, 8)) == a {
		t.Fatal("seeds 7 and 8 wrote the same file")
	}
}

func TestWriteFileSizeAndPlace(t *testing.T) {
	m := newModel(t, tiny, 1)
	path := filepath.Join(t.TempDir(), "m.gguf")
	n, err := m.WriteFile(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Size() != n || n%Alignment != 0 || st.Mode().Perm() != 0o644 {
		t.Fatalf("wrote %d bytes, file %v (err %v)", n, st, err)
	}
	var data int64
	for _, ts := range m.Tensors() {
		data += ts.Bytes() + padding(ts.Bytes())
	}
	// token_embd, then per layer the norms, q, k, v (with biases),
	// output and the three FFN matrices, then output_norm.
	layer := 16 + 16*16 + 16 + 16*8 + 8 + 16*8 + 8 + 16*16 + 16 + 3*16*32
	if want := int64(151669*16 + 2*layer + 16); m.Params() != want {
		t.Errorf("%d parameters; want %d", m.Params(), want)
	}
	if data >= n {
		t.Fatalf("tensor data %d bytes in a %d-byte file", data, n)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("the folder holds %d files after the write; want the model alone", len(entries))
	}
	if _, err := m.WriteFile(filepath.Join(t.TempDir(), "no", "such", "folder", "m.gguf")); err == nil {
		t.Fatal("a write into a missing folder succeeded")
	}
}

// tensorData returns every element of a tensor, made as Encode makes it.
func tensorData(t Tensor) []float32 {
	out := make([]float32, t.Elements())
	for first := uint64(0); first < t.Elements(); first += chunkElems {
		t.Fill(out[first:min(first+chunkElems, t.Elements())], first)
	}
	return out
}

func tensorsByName(m *Model) map[string]Tensor {
	byName := map[string]Tensor{}
	for _, t := range m.Tensors() {
		byName[t.Name] = t
	}
	return byName
}

// TestTensorsCarryTheWordDimension checks the construction the package
// doc describes, tensor by tensor.
func TestTensorsCarryTheWordDimension(t *testing.T) {
	for _, tied := range []bool{true, false} {
		s := tiny
		s.Tied = tied
		m := newModel(t, s, 3)
		ts := tensorsByName(m)
		n, hd := uint64(s.Embd), uint64(s.headDim())
		out := "output.weight"
		if tied {
			out = "token_embd.weight"
		}
		if _, ok := ts["output.weight"]; ok == tied {
			t.Fatalf("tied %v: output.weight present %v", tied, ok)
		}
		w := tensorData(ts[out])
		for id := range uint64(s.Vocab) {
			if want := m.wordSign(id); w[id*n] != want {
				t.Fatalf("%s[%d][0] = %v; want %v", out, id, w[id*n], want)
			}
		}
		for l := range s.Layers {
			name := func(s string) string { return fmt.Sprintf("blk.%d.%s", l, s) }
			v := tensorData(ts[name("attn_v.weight")])
			for c := range n {
				if v[c] != 0 {
					t.Fatalf("attn_v.weight row 0 col %d = %v", c, v[c])
				}
			}
			if b := tensorData(ts[name("attn_v.bias")]); b[0] != valueConst {
				t.Fatalf("attn_v.bias[0] = %v", b[0])
			}
			o := tensorData(ts[name("attn_output.weight")])
			for row := range n {
				for h := range uint64(s.Heads) {
					want := float32(0)
					if row == 0 && h == 0 {
						want = outputGain
					}
					if got := o[row*n+h*hd]; got != want {
						t.Fatalf("attn_output[%d][%d] = %v; want %v", row, h*hd, got, want)
					}
				}
			}
			for c := range n {
				if c != 0 && o[c] != 0 {
					t.Fatalf("attn_output row 0 col %d = %v", c, o[c])
				}
			}
			if d := tensorData(ts[name("ffn_down.weight")]); d[0] != 0 || d[s.FFN-1] != 0 || d[s.FFN] == 0 {
				t.Fatalf("ffn_down row 0 not zero or row 1 zero: %v %v %v", d[0], d[s.FFN-1], d[s.FFN])
			}
		}
	}
}

// TestRandomWeightsHaveTheirScale: the random part is spread as intended.
func TestRandomWeightsHaveTheirScale(t *testing.T) {
	m := newModel(t, tiny, 5)
	e := tensorData(tensorsByName(m)["token_embd.weight"])
	var sum, sq float64
	var n int
	for i, v := range e {
		if i%tiny.Embd == 0 { // the word dimension
			continue
		}
		sum += float64(v)
		sq += float64(v) * float64(v)
		n++
	}
	mean, variance := sum/float64(n), sq/float64(n)
	if math.Abs(mean) > 0.0001 || math.Abs(variance-0.0004) > 0.00001 {
		t.Fatalf("token_embd mean %v, variance %v; want about 0 and 0.02² = 0.0004", mean, variance)
	}
	if !slices.Equal(e, tensorData(tensorsByName(m)["token_embd.weight"])) {
		t.Fatal("a fill made different values twice")
	}
}
