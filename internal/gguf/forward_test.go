package gguf

import (
	"fmt"
	"math"
	"testing"

	"github.com/rehearse/rehearse/internal/tokenizer"
)

// reference is a plain float64 forward pass of a written model (RMSNorm,
// grouped-query attention with rotary positions, SwiGLU), enough to see
// which token a model of this package ranks first. It rotates q and k as
// NeoX does (qwen2's style); the word dimension does not depend on how.
type reference struct {
	s Shape
	w map[string][]float32
}

func newReference(m *Model) reference {
	r := reference{s: m.Shape, w: map[string][]float32{}}
	for _, t := range m.Tensors() {
		r.w[t.Name] = tensorData(t)
	}
	return r
}

// matVec is W·x for W of out rows of len(x) columns, plus bias when given.
func matVec(w []float32, x []float64, out int, bias []float32) []float64 {
	y := make([]float64, out)
	for r := range out {
		row := w[r*len(x) : (r+1)*len(x)]
		var s float64
		for c, v := range row {
			s += float64(v) * x[c]
		}
		if bias != nil {
			s += float64(bias[r])
		}
		y[r] = s
	}
	return y
}

func (r reference) norm(x []float64, w []float32) []float64 {
	var ss float64
	for _, v := range x {
		ss += v * v
	}
	scale := 1 / math.Sqrt(ss/float64(len(x))+r.s.NormEps)
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = v * scale * float64(w[i])
	}
	return y
}

func (r reference) rope(v []float64, pos int) {
	hd := r.s.headDim()
	for h := 0; h < len(v)/hd; h++ {
		for i := range hd / 2 {
			theta := float64(pos) * math.Pow(r.s.RopeBase, -2*float64(i)/float64(hd))
			a, b := v[h*hd+i], v[h*hd+i+hd/2]
			v[h*hd+i] = a*math.Cos(theta) - b*math.Sin(theta)
			v[h*hd+i+hd/2] = a*math.Sin(theta) + b*math.Cos(theta)
		}
	}
}

// logits runs the tokens through the model and returns the last
// position's logits.
func (r reference) logits(tokens []int) []float64 {
	n := r.s.Embd
	xs := make([][]float64, len(tokens))
	for p, id := range tokens {
		xs[p] = make([]float64, n)
		for i := range n {
			xs[p][i] = float64(r.w["token_embd.weight"][id*n+i])
		}
	}
	for l := range r.s.Layers {
		xs = r.block(l, xs)
	}
	h := r.norm(xs[len(xs)-1], r.w["output_norm.weight"])
	out := r.w["output.weight"]
	if out == nil {
		out = r.w["token_embd.weight"]
	}
	return matVec(out, h, r.s.Vocab, nil)
}

// block is one decoder layer over every position.
func (r reference) block(l int, xs [][]float64) [][]float64 {
	w := func(t string) []float32 { return r.w[fmt.Sprintf("blk.%d.%s", l, t)] }
	n, hd, kvDim := r.s.Embd, r.s.headDim(), r.s.KVHeads*r.s.headDim()
	var qs, ks, vs [][]float64
	for p, x := range xs {
		h := r.norm(x, w("attn_norm.weight"))
		q, k := matVec(w("attn_q.weight"), h, n, w("attn_q.bias")), matVec(w("attn_k.weight"), h, kvDim, w("attn_k.bias"))
		r.rope(q, p)
		r.rope(k, p)
		qs, ks, vs = append(qs, q), append(ks, k), append(vs, matVec(w("attn_v.weight"), h, kvDim, w("attn_v.bias")))
	}
	group := r.s.Heads / r.s.KVHeads
	out := make([][]float64, len(xs))
	for p := range xs {
		att := make([]float64, n)
		for h := range r.s.Heads {
			kvh := h / group
			scores := make([]float64, p+1)
			top := math.Inf(-1)
			for j := range scores {
				for i := range hd {
					scores[j] += qs[p][h*hd+i] * ks[j][kvh*hd+i]
				}
				scores[j] /= math.Sqrt(float64(hd))
				top = max(top, scores[j])
			}
			var sum float64
			for j := range scores {
				scores[j] = math.Exp(scores[j] - top)
				sum += scores[j]
			}
			for j := range scores {
				for i := range hd {
					att[h*hd+i] += scores[j] / sum * vs[j][kvh*hd+i]
				}
			}
		}
		x := add(xs[p], matVec(w("attn_output.weight"), att, n, nil))
		h := r.norm(x, w("ffn_norm.weight"))
		gate, up := matVec(w("ffn_gate.weight"), h, r.s.FFN, nil), matVec(w("ffn_up.weight"), h, r.s.FFN, nil)
		for i := range gate {
			gate[i] = gate[i] / (1 + math.Exp(-gate[i])) * up[i]
		}
		out[p] = add(x, matVec(w("ffn_down.weight"), gate, n, nil))
	}
	return out
}

func add(a, b []float64) []float64 {
	y := make([]float64, len(a))
	for i := range a {
		y[i] = a[i] + b[i]
	}
	return y
}

// TestOnlyWordsCanBeEmitted runs prompts that end in non-word tokens (the
// chat template's "assistant\n") and in words, and checks that every word
// outranks every other token by a margin no sampler crosses.
func TestOnlyWordsCanBeEmitted(t *testing.T) {
	tok, err := tokenizer.Default()
	if err != nil {
		t.Fatal(err)
	}
	prompts := []string{
		"<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
		"<|im_start|>user\n12345 !!! ???<|im_end|>\n<|im_start|>assistant\n some words already",
	}
	for _, c := range []struct {
		arch string
		tied bool
	}{{"qwen2", true}, {"qwen2", false}, {"llama", true}} {
		s := tiny
		s.Arch, s.Tied = c.arch, c.tied
		m := newModel(t, s, 11)
		r := newReference(m)
		for _, prompt := range prompts {
			logits := r.logits(tok.Encode(prompt))
			minWord, maxOther := math.Inf(1), math.Inf(-1)
			for id, v := range logits {
				if m.words[id] {
					minWord = min(minWord, v)
				} else {
					maxOther = max(maxOther, v)
				}
			}
			margin := minWord - maxOther
			t.Logf("%s tied %v: margin %.2f, words spread %.4f", c.arch, c.tied, margin, maxWord(logits, m.words)-minWord)
			// 2·wordMargin·√n_embd, less a little for the rest of the
			// hidden state; at 16 dimensions e^-30: no sampler picks it.
			if want := 0.95 * 2 * wordMargin * math.Sqrt(float64(s.Embd)); margin < want {
				t.Errorf("%s tied %v, %q: the weakest word leads the strongest other token by %.2f; want at least %.2f",
					c.arch, c.tied, prompt, margin, want)
			}
		}
	}
}

func maxWord(logits []float64, words []bool) float64 {
	top := math.Inf(-1)
	for id, v := range logits {
		if words[id] {
			top = max(top, v)
		}
	}
	return top
}
