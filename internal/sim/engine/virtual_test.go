package engine

import (
	"math"
	"testing"
)

// TestSustainedSuccessorMissesTheStartedStep: with no request overhead or
// frontend, a sustained client's next request, sent as its last one ends
// at a step's end, joins the batch one step later (the served engine has
// started that step before the client's request is read), unless the engine
// is idle.
func TestSustainedSuccessorMissesTheStartedStep(t *testing.T) {
	p := &Profile{Name: "t", Engine: Batching, Model: "m", MaxModelLen: 1024, ChatTemplate: "chatml",
		DecodeStepS: [][2]float64{{1, 0.01}}, MaxNumSeqs: 8, KVTokenBudget: 1 << 20, OutputTokens: []int{2}}
	a := &Request{Client: 0, PromptTokens: 10, OutputTokens: 2, MaxTokens: 2}
	b := &Request{Client: 1, PromptTokens: 10, OutputTokens: 10, MaxTokens: 10}
	var succ *Request
	once := func(r *Request, endS float64) *Request {
		if r == a {
			succ = &Request{Client: 0, PromptTokens: 10, OutputTokens: 2, MaxTokens: 2}
			return succ
		}
		return nil
	}
	if err := Run(p, []*Request{a, b}, 60, nil, once); err != nil {
		t.Fatal(err)
	}
	// a: tokens at 0.01 and 0.02; its successor is sent at 0.02, misses
	// the step 0.02–0.03 (b alone) and prefills in 0.03–0.04.
	if succ == nil || len(succ.TokensS) != 2 || math.Abs(succ.TokensS[0]-0.04) > 1e-9 || succ.SentS != 0.02 {
		t.Fatalf("successor sent at %v, tokens at %v: want sent at 0.02, first token at 0.04", succ.SentS, succ.TokensS)
	}
	// An idle engine takes it at once: a alone, then its successor.
	succ = nil
	a = &Request{Client: 0, PromptTokens: 10, OutputTokens: 2, MaxTokens: 2}
	if err := Run(p, []*Request{a}, 60, nil, once); err != nil {
		t.Fatal(err)
	}
	if succ == nil || math.Abs(succ.TokensS[0]-0.03) > 1e-9 {
		t.Fatalf("successor on an idle engine: tokens at %v, want the first at 0.03", succ.TokensS)
	}
}
