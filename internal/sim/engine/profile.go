package engine

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/rehearse/rehearse/internal/sim/profiles"
)

// Profile is a calibrated step-latency model of one engine serving one model
// on one accelerator. All durations are simulated seconds. A profile is data:
// the built-in ones live in package profiles (internal/sim/profiles/*.json),
// each with a .md beside it that derives every number.
type Profile struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Engine is the engine this profile was fitted for: "serial" or "batching".
	Engine string `json:"engine"`
	// Model is the model id the simulated server reports by default.
	Model string `json:"model"`
	// MaxModelLen bounds prompt plus output tokens, like vLLM's --max-model-len;
	// it is also the default max_tokens budget (max_model_len - prompt tokens).
	MaxModelLen int `json:"max_model_len"`

	// ChatTemplate names how messages are rendered before counting prompt
	// tokens: "chatml" renders <|im_start|>role\ncontent<|im_end|>\n per
	// message plus <|im_start|>assistant\n, as Qwen2.5's template does.
	ChatTemplate string `json:"chat_template"`
	// DefaultSystemPrompt is inserted when the request has no system message
	// (Qwen2.5's template does this); empty means none.
	DefaultSystemPrompt string `json:"default_system_prompt"`

	// RequestOverheadS is the latency a request spends before it reaches the
	// engine's queue (HTTP handling, tokenization, detokenizer set-up). It is
	// paid by every request in parallel, never serialized.
	RequestOverheadS float64 `json:"request_overhead_s"`
	// FrontendSPerRequest is the time each request holds a single frontend
	// (an API server that parses, templates and tokenizes one request at a
	// time) before it reaches the engine: requests arriving together queue
	// there, one after another.
	FrontendSPerRequest float64 `json:"frontend_s_per_request"`
	// DecodeStepS gives the latency of one engine step as a function of the
	// number of sequences in the step: [batch, seconds] points, interpolated
	// linearly between points and extrapolated along the last segment.
	DecodeStepS [][2]float64 `json:"decode_step_s"`
	// PrefillBaseS is added once to a step that prefills any prompt tokens.
	PrefillBaseS float64 `json:"prefill_base_s"`
	// PrefillPerTokenS is the cost of each prompt token prefilled in a step.
	PrefillPerTokenS float64 `json:"prefill_per_token_s"`
	// DecodePerContextTokenS is added to a step for every context token
	// (prompt plus tokens generated so far) of the sequences it decodes:
	// attention's cost growing with context length. 0 (absent) is none; a
	// fit sets it only where the records' context lengths vary.
	DecodePerContextTokenS float64 `json:"decode_per_context_token_s,omitempty"`
	// StepJitter is the relative spread of a step's latency: step n of an
	// engine takes its modelled latency times 1 + step_jitter·u(n), u drawn
	// uniformly from [−√3, √3] (mean 0, variance 1) by a hash of n alone, so
	// the predictor and the served engine draw the same sequence. 0 (absent)
	// is none: every step costs exactly its model.
	StepJitter float64 `json:"step_jitter,omitempty"`

	// MaxNumSeqs caps the sequences running at once (1 for a serial engine).
	MaxNumSeqs int `json:"max_num_seqs"`
	// MaxNumBatchedTokens caps the tokens one step processes (decode tokens
	// plus prefill chunks), like vLLM's chunked prefill; 0 means unlimited.
	MaxNumBatchedTokens int `json:"max_num_batched_tokens"`
	// KVTokenBudget caps prompt plus generated tokens held by running
	// sequences; requests beyond it wait in the queue.
	KVTokenBudget int `json:"kv_token_budget"`
	// PrefixCaching says whether the engine reuses the KV blocks of prompt
	// prefixes it computed recently (vLLM's automatic prefix caching, on by
	// default in vLLM V1): a prompt's leading whole blocks of 16 tokens that
	// match a cached hash chain cost no prefill. The cache holds up to
	// kv_token_budget tokens of blocks, least recently used evicted first.
	PrefixCaching bool `json:"prefix_caching,omitempty"`

	// OutputTokensByPrompt fixes the natural output length (where the model
	// would emit its end-of-sequence token) of known prompts, keyed by the
	// SHA-256 of the last user message's text.
	OutputTokensByPrompt []PromptLength `json:"output_tokens_by_prompt,omitempty"`
	// OutputTokens is the natural output length of any other prompt: entry
	// hash(seed, prompt) mod n. The output is max_tokens when that is
	// smaller, or when ignore_eos is set.
	OutputTokens []int `json:"output_tokens"`

	// Source says where the profile was loaded from (a path or "builtin").
	Source string `json:"-"`
}

// Encode writes the profile as the indented JSON of the built-in ones, with
// each list of numbers on one line.
func (p *Profile) Encode() ([]byte, error) {
	data, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return nil, err
	}
	data = numberList.ReplaceAllFunc(data, func(m []byte) []byte {
		return bytes.ReplaceAll(spaceRun.ReplaceAll(m, nil), []byte(","), []byte(", "))
	})
	return append(data, '\n'), nil
}

var (
	// numberList matches a JSON array of numbers or of arrays of numbers.
	numberList = regexp.MustCompile(`\[(\s*(\[[\s0-9eE.+-]*(,[\s0-9eE.+-]*)*\]|[0-9eE.+-]+)\s*,?)+\s*\]`)
	spaceRun   = regexp.MustCompile(`\s+`)
)

// PromptLength is the natural output length of one known prompt.
type PromptLength struct {
	// PromptSHA256 is the hex SHA-256 of the prompt text (the last user
	// message's content).
	PromptSHA256 string `json:"prompt_sha256"`
	// Prompt is the prompt's beginning, for the reader; it is not matched.
	Prompt string `json:"prompt"`
	Tokens int    `json:"tokens"`
}

// ProfileNames lists the built-in profiles, sorted.
func ProfileNames() []string {
	entries, err := profiles.FS.ReadDir(".")
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range entries {
		if n, ok := strings.CutSuffix(e.Name(), ".json"); ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// BuiltinProfile returns the built-in profile of that name.
func BuiltinProfile(name string) (*Profile, error) {
	data, err := profiles.FS.ReadFile(name + ".json")
	if err != nil {
		return nil, fmt.Errorf("sim: no built-in profile %q (have: %s)", name, strings.Join(ProfileNames(), ", "))
	}
	p, err := ParseProfile(data, "builtin:"+name)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// BuiltinDerivation returns the markdown derivation written beside a
// built-in profile. A test helper: the tests hold each built-in profile to
// the figures its derivation states.
func BuiltinDerivation(name string) (string, error) {
	data, err := profiles.FS.ReadFile(name + ".md")
	if err != nil {
		return "", fmt.Errorf("sim: no derivation for built-in profile %q", name)
	}
	return string(data), nil
}

// LoadProfile reads a profile from a JSON file.
func LoadProfile(file string) (*Profile, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("sim: profile: %w", err)
	}
	return ParseProfile(data, file)
}

// ResolveProfile returns the built-in profile of that name, or loads the
// file when the name is not a built-in one.
func ResolveProfile(nameOrPath string) (*Profile, error) {
	for _, n := range ProfileNames() {
		if n == nameOrPath {
			return BuiltinProfile(n)
		}
	}
	if _, err := os.Stat(nameOrPath); err != nil {
		return nil, fmt.Errorf("sim: profile %q is neither a built-in profile (%s) nor a readable file", nameOrPath, strings.Join(ProfileNames(), ", "))
	}
	return LoadProfile(nameOrPath)
}

// ParseProfile decodes and validates a profile; source names it in errors.
func ParseProfile(data []byte, source string) (*Profile, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var p Profile
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("sim: profile %s: %w", source, err)
	}
	p.Source = source
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("sim: profile %s: %w", source, err)
	}
	return &p, nil
}

// maxStepS bounds every latency of a profile (seconds), far above any real
// one, so that simulated times stay finite.
const maxStepS = 3600

// Validate checks that every field holds a usable value.
func (p *Profile) Validate() error {
	if p.Name == "" {
		return fmt.Errorf("field name is empty")
	}
	if p.Engine != Serial && p.Engine != Batching {
		return fmt.Errorf("field engine = %q, want %q or %q", p.Engine, Serial, Batching)
	}
	if p.Model == "" {
		return fmt.Errorf("field model is empty")
	}
	if p.MaxModelLen <= 0 {
		return fmt.Errorf("field max_model_len = %d, want > 0", p.MaxModelLen)
	}
	if p.ChatTemplate != "chatml" {
		return fmt.Errorf("field chat_template = %q, want \"chatml\"", p.ChatTemplate)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"request_overhead_s", p.RequestOverheadS}, {"frontend_s_per_request", p.FrontendSPerRequest}, {"prefill_base_s", p.PrefillBaseS}, {"prefill_per_token_s", p.PrefillPerTokenS}} {
		if !finite(f.v) || f.v < 0 || f.v > maxStepS {
			return fmt.Errorf("field %s = %g, want between 0 and %g", f.name, f.v, float64(maxStepS))
		}
	}
	if !finite(p.DecodePerContextTokenS) || p.DecodePerContextTokenS < 0 || p.DecodePerContextTokenS > 1 {
		return fmt.Errorf("field decode_per_context_token_s = %g, want between 0 and 1", p.DecodePerContextTokenS)
	}
	if !finite(p.StepJitter) || p.StepJitter < 0 || p.StepJitter > MaxStepJitter {
		return fmt.Errorf("field step_jitter = %g, want between 0 and %g", p.StepJitter, MaxStepJitter)
	}
	if len(p.DecodeStepS) == 0 {
		return fmt.Errorf("field decode_step_s has no points")
	}
	for i, pt := range p.DecodeStepS {
		if !(pt[0] >= 1 && pt[0] <= 1e6) || !(pt[1] > 0 && pt[1] <= maxStepS) {
			return fmt.Errorf("decode_step_s[%d] = [%g, %g], want batch 1 to 1e6 and seconds above 0 and at most %g", i, pt[0], pt[1], float64(maxStepS))
		}
		if i > 0 && pt[0] <= p.DecodeStepS[i-1][0] {
			return fmt.Errorf("decode_step_s[%d]: batch %g is not above the previous point's %g", i, pt[0], p.DecodeStepS[i-1][0])
		}
	}
	if p.MaxNumSeqs < 1 {
		return fmt.Errorf("field max_num_seqs = %d, want >= 1", p.MaxNumSeqs)
	}
	if p.MaxNumBatchedTokens < 0 {
		return fmt.Errorf("field max_num_batched_tokens = %d, want >= 0", p.MaxNumBatchedTokens)
	}
	if p.KVTokenBudget < 1 {
		return fmt.Errorf("field kv_token_budget = %d, want >= 1", p.KVTokenBudget)
	}
	if len(p.OutputTokens) == 0 {
		return fmt.Errorf("field output_tokens is empty")
	}
	for i, n := range p.OutputTokens {
		if n < 1 {
			return fmt.Errorf("output_tokens[%d] = %d, want >= 1", i, n)
		}
	}
	for i, pl := range p.OutputTokensByPrompt {
		if b, err := hex.DecodeString(pl.PromptSHA256); err != nil || len(b) != sha256.Size {
			return fmt.Errorf("output_tokens_by_prompt[%d].prompt_sha256 = %q, want 64 hex digits", i, pl.PromptSHA256)
		}
		if pl.Tokens < 1 {
			return fmt.Errorf("output_tokens_by_prompt[%d].tokens = %d, want >= 1", i, pl.Tokens)
		}
	}
	return nil
}

// StepS is the latency of one engine step that serves batch sequences
// (decoding or finishing a prefill chunk) and prefills prefillTokens prompt
// tokens.
func (p *Profile) StepS(batch, prefillTokens int) float64 {
	s := p.DecodeS(float64(max(batch, 1)))
	if prefillTokens > 0 {
		s += p.PrefillBaseS + p.PrefillPerTokenS*float64(prefillTokens)
	}
	return s
}

// MaxStepJitter bounds step_jitter so that a jittered step stays positive
// (1 − √3·0.5 > 0).
const MaxStepJitter = 0.5

// stepModelS is the latency of step n of an engine: StepS, plus the context
// term over the contextTokens of the sequences it decodes, times the step's
// jitter. The served engine and the predictor both time their steps by it.
func (p *Profile) stepModelS(n int64, batch, prefillTokens, contextTokens int) float64 {
	s := p.StepS(batch, prefillTokens) + p.DecodePerContextTokenS*float64(contextTokens)
	if p.StepJitter > 0 {
		s *= 1 + p.StepJitter*jitterU(n)
	}
	return s
}

// jitterU is a deterministic draw of step n, uniform on [−√3, √3]: the
// splitmix64 finalizer of n, whose top 53 bits are uniform.
func jitterU(n int64) float64 {
	z := uint64(n) + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	u := float64(z>>11) / (1 << 53) // [0, 1)
	return (2*u - 1) * math.Sqrt(3)
}

// DecodeS is the latency of a decode step of b sequences: decode_step_s
// interpolated linearly between its points and extrapolated along the last
// segment, never below half the first point's.
func (p *Profile) DecodeS(b float64) float64 {
	pts := p.DecodeStepS
	if len(pts) == 1 || b <= pts[0][0] {
		return pts[0][1]
	}
	i := sort.Search(len(pts), func(i int) bool { return pts[i][0] >= b })
	if i == len(pts) {
		i = len(pts) - 1 // extrapolate along the last segment
	}
	a, c := pts[i-1], pts[i]
	s := a[1] + (c[1]-a[1])*(b-a[0])/(c[0]-a[0])
	return max(s, pts[0][1]*0.5)
}

// NaturalOutputTokens is the output length the modelled model would produce
// for this prompt (the last user message's text) before stopping on its
// own: fixed for the profile's known prompts, otherwise drawn from the table
// by a hash of the seed and the prompt, so deterministic in both, as a
// temperature-0 model is in its prompt.
func (p *Profile) NaturalOutputTokens(seed int64, prompt string) int {
	if len(p.OutputTokensByPrompt) > 0 {
		sum := sha256.Sum256([]byte(prompt))
		key := hex.EncodeToString(sum[:])
		for _, pl := range p.OutputTokensByPrompt {
			if strings.EqualFold(pl.PromptSHA256, key) {
				return pl.Tokens
			}
		}
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%d\x00", seed)
	h.Write([]byte(prompt))
	return p.OutputTokens[h.Sum64()%uint64(len(p.OutputTokens))]
}

// finite reports whether v is a usable number.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
