package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/workload"
)

func TestBuiltinProfilesLoadAndHaveDerivations(t *testing.T) {
	names := ProfileNames()
	if len(names) < 2 {
		t.Fatalf("built-in profiles %v, want at least the two T4 ones", names)
	}
	for _, n := range names {
		p, err := BuiltinProfile(n)
		if err != nil {
			t.Fatal(err)
		}
		if p.Name != n {
			t.Errorf("profile file %s.json names itself %q", n, p.Name)
		}
		md, err := BuiltinDerivation(n)
		if err != nil || len(md) < 500 {
			t.Errorf("%s: derivation missing or short (%d bytes, %v)", n, len(md), err)
		}
	}
	if _, err := BuiltinProfile("nope"); err == nil || !strings.Contains(err.Error(), "t4-qwen2.5-1.5b-serial") {
		t.Errorf("unknown profile: err %v, want one listing the built-in names", err)
	}
}

func TestStepLatencyIsPiecewiseLinear(t *testing.T) {
	p := &Profile{DecodeStepS: [][2]float64{{1, 0.010}, {9, 0.018}, {17, 0.034}}, PrefillBaseS: 0.002, PrefillPerTokenS: 0.0001}
	for _, tc := range []struct {
		batch, prefill int
		want           float64
	}{
		{0, 0, 0.010},           // no sequence: the batch-1 step
		{1, 0, 0.010},           // a point
		{5, 0, 0.014},           // halfway between 1 and 9
		{13, 0, 0.026},          // halfway between 9 and 17
		{25, 0, 0.050},          // extrapolated along the last segment
		{1, 100, 0.010 + 0.012}, // prefill: base + 100 tokens
	} {
		if got := p.StepS(tc.batch, tc.prefill); !near(got, tc.want, 1e-9) {
			t.Errorf("StepS(%d, %d) = %.6f, want %.6f", tc.batch, tc.prefill, got, tc.want)
		}
	}
}

func TestProfileErrorsNameFileAndField(t *testing.T) {
	good := `{"name":"x","engine":"batching","model":"m","max_model_len":100,"chat_template":"chatml","decode_step_s":[[1,0.01]],"max_num_seqs":4,"kv_token_budget":1000,"output_tokens":[5]}`
	dir := t.TempDir()
	file := filepath.Join(dir, "p.json")
	os.WriteFile(file, []byte(good), 0o644)
	if _, err := LoadProfile(file); err != nil {
		t.Fatalf("a valid profile: %v", err)
	}
	for _, tc := range []struct{ from, to, want string }{
		{`"engine":"batching"`, `"engine":"magic"`, `field engine = "magic"`},
		{`[[1,0.01]]`, `[[1,0.01],[1,0.02]]`, "decode_step_s[1]: batch 1 is not above"},
		{`[[1,0.01]]`, `[]`, "decode_step_s has no points"},
		{`"output_tokens":[5]`, `"output_tokens":[5,0]`, "output_tokens[1] = 0"},
		{`"kv_token_budget":1000`, `"kv_token_budget":0`, "kv_token_budget = 0"},
		{`"chat_template":"chatml"`, `"chat_template":"llama"`, `chat_template = "llama"`},
		{`"name":"x"`, `"name":"x","extra":1`, `unknown field "extra"`},
		{`}`, ``, "unexpected EOF"},
	} {
		os.WriteFile(file, []byte(strings.Replace(good, tc.from, tc.to, 1)), 0o644)
		_, err := LoadProfile(file)
		if err == nil || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s → %s: err %v; want it to name %s and %q", tc.from, tc.to, err, file, tc.want)
		}
	}
	if _, err := LoadProfile(filepath.Join(dir, "missing.json")); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("missing file: err %v", err)
	}
}

func TestNaturalOutputTokensFollowTheTable(t *testing.T) {
	p := testProfile(t, Batching)
	counts := map[int]int{}
	const n = 16000
	for i := range n {
		counts[p.NaturalOutputTokens(1, "prompt "+strings.Repeat("x", i%97)+string(rune(i)))]++
	}
	want := map[int]int{}
	for _, l := range p.OutputTokens {
		want[l] += n / len(p.OutputTokens)
	}
	for l, w := range want {
		if c := counts[l]; c < w*8/10 || c > w*12/10 {
			t.Errorf("length %d drawn %d times in %d prompts, want about %d", l, c, n, w)
		}
	}
	if a, b := p.NaturalOutputTokens(1, "same"), p.NaturalOutputTokens(1, "same"); a != b {
		t.Error("the same prompt and seed gave two lengths")
	}
}

// TestT4ProfilesPinTheDemoPrompts: the T4 fit assumes the demo's eight
// prompts have the lengths written in the profiles; a change of
// workload.BuiltinPrompts must come with new pins (and a new fit).
func TestT4ProfilesPinTheDemoPrompts(t *testing.T) {
	for _, engine := range []string{Serial, Batching} {
		p := testProfile(t, engine)
		pinned := map[string]bool{}
		for _, pl := range p.OutputTokensByPrompt {
			pinned[pl.PromptSHA256] = true
		}
		for i, prompt := range workload.BuiltinPrompts() {
			sum := sha256.Sum256([]byte(prompt))
			if !pinned[hex.EncodeToString(sum[:])] {
				t.Errorf("%s: built-in prompt %d (%.40q…) has no pinned output length: re-pin output_tokens_by_prompt and rerun TestFitMeasuredTables", p.Name, i, prompt)
			}
		}
	}
}

// TestStepModelTerms: the context term adds per context token, the jitter
// moves steps around their model with mean about 0, and both are 0 by
// default (the step is StepS exactly).
func TestStepModelTerms(t *testing.T) {
	p, err := BuiltinProfile("t4-qwen2.5-1.5b-batching")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.stepModelS(7, 8, 100, 5000), p.StepS(8, 100); got != want {
		t.Errorf("default profile: step %g, want StepS %g", got, want)
	}
	p.DecodePerContextTokenS = 1e-6
	if got, want := p.stepModelS(7, 8, 100, 5000), p.StepS(8, 100)+0.005; !near(got, want, 1e-12) {
		t.Errorf("context term: step %g, want %g", got, want)
	}
	p.DecodePerContextTokenS, p.StepJitter = 0, 0.2
	base := p.StepS(8, 0)
	sum, lo, hi := 0.0, math.Inf(1), math.Inf(-1)
	const n = 20000
	for i := range int64(n) {
		s := p.stepModelS(i, 8, 0, 0)
		sum += s
		lo, hi = min(lo, s), max(hi, s)
	}
	if mean := sum / n; math.Abs(mean/base-1) > 0.01 {
		t.Errorf("jittered steps average %g, want about %g", mean, base)
	}
	if lo < base*(1-0.2*math.Sqrt(3))-1e-12 || hi > base*(1+0.2*math.Sqrt(3))+1e-12 || hi-lo < base*0.6 {
		t.Errorf("jittered steps span [%g, %g] around %g", lo, hi, base)
	}
	if p.stepModelS(3, 8, 0, 0) != p.stepModelS(3, 8, 0, 0) {
		t.Error("the jitter of a step is not a function of its index")
	}
	for _, bad := range []float64{-0.1, 0.6, math.NaN()} {
		q := *p
		q.StepJitter = bad
		if err := q.Validate(); err == nil || !strings.Contains(err.Error(), "step_jitter") {
			t.Errorf("step_jitter %g: %v", bad, err)
		}
	}
}
