package predict

import (
	"fmt"

	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/sim/engine"
	"github.com/rehearse/rehearse/internal/tokenizer"
)

// promptWorkload is a workload whose requests a prediction plans.
type promptWorkload interface {
	validate() error
	requests() requestSpec
}

// requestSpec is what every request of a workload sends: its prompts and
// request fields.
type requestSpec struct {
	prompts         []string
	maxTokens       int
	promptMaxTokens []int
	minTokens       int
	ignoreEOS       bool
}

// maxTokensOf is the max_tokens prompt i is sent with (plan.Load's).
func (r requestSpec) maxTokensOf(i int) int {
	if i < len(r.promptMaxTokens) && r.promptMaxTokens[i] > 0 {
		return r.promptMaxTokens[i]
	}
	return r.maxTokens
}

func (w ClosedWorkload) requests() requestSpec {
	return requestSpec{w.Prompts, w.MaxTokens, w.PromptMaxTokens, w.MinTokens, w.IgnoreEOS}
}

// prepare is what every prediction starts from: the profile and workload
// checked, o's defaults filled, every prompt planned and the run's prefix
// cache.
func prepare(p *engine.Profile, w promptWorkload, o Options) (Options, []promptPlan, *engine.PrefixCache, error) {
	if err := checkPredictable(p); err != nil {
		return o, nil, nil, err
	}
	if err := w.validate(); err != nil {
		return o, nil, nil, err
	}
	if o.Server == "" {
		o.Server = p.Name
	}
	plans, cache, err := planPrompts(p, w.requests(), o)
	return o, plans, cache, err
}

// checkPredictable refuses a profile the virtual engine cannot run.
func checkPredictable(p *engine.Profile) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("sim: profile %s: %w", p.Name, err)
	}
	if p.Engine == engine.Serial && p.MaxNumSeqs != 1 {
		return fmt.Errorf("sim: profile %s: the serial engine runs one sequence at a time; max_num_seqs %d is not 1", p.Name, p.MaxNumSeqs)
	}
	return nil
}

// promptPlan is what one prompt costs and yields, decided as the server's
// request parsing decides it.
type promptPlan struct {
	promptTokens, outputTokens, maxTokens int
	blocks                                []uint64
}

// request is a virtual request of client sending the prompt of index
// prompt, planned as pl.
func (pl promptPlan) request(client, prompt int) *engine.Request {
	return &engine.Request{Client: client, Prompt: prompt, PromptTokens: pl.promptTokens, OutputTokens: pl.outputTokens, MaxTokens: pl.maxTokens, Blocks: pl.blocks}
}

// planPrompts plans every prompt of a workload through the profile's chat
// template and output lengths, each with its own prompt tokens and
// max_tokens, as the served simulator's request parsing decides them, and
// returns the prefix cache of the whole run (nil for none): one served
// simulator keeps it from wave to wave.
func planPrompts(p *engine.Profile, rs requestSpec, o Options) ([]promptPlan, *engine.PrefixCache, error) {
	prompts, minTokens, ignoreEOS := rs.prompts, rs.minTokens, rs.ignoreEOS
	counter := o.Tokenizer
	if counter == nil {
		c, err := tokenizer.Default()
		if err != nil {
			return nil, nil, fmt.Errorf("sim: tokenizer: %w", err)
		}
		counter = c
	}
	var cache *engine.PrefixCache
	var enc engine.Encoder
	if p.PrefixCaching {
		var ok bool
		if enc, ok = counter.(engine.Encoder); !ok {
			return nil, nil, fmt.Errorf("sim: profile %s caches prefixes, and the tokenizer only counts tokens", p.Name)
		}
		cache = engine.NewPrefixCache(p.KVTokenBudget)
	}
	plans := make([]promptPlan, len(prompts))
	for i, text := range prompts {
		maxTokens := rs.maxTokensOf(i)
		msgs := []engine.Message{{Role: "user", Content: text}}
		var blocks []uint64
		var pt int
		if enc != nil {
			ids := enc.Encode(p.RenderChat(msgs))
			pt, blocks = len(ids), engine.BlockHashes(ids)
		} else {
			pt = counter.Count(p.RenderChat(msgs))
		}
		if pt+maxTokens > p.MaxModelLen {
			return nil, nil, fmt.Errorf("sim: prompt %d: %d prompt tokens + max_tokens %d exceed the profile's max_model_len %d", i, pt, maxTokens, p.MaxModelLen)
		}
		if pt+maxTokens > p.KVTokenBudget {
			return nil, nil, fmt.Errorf("sim: prompt %d: %d prompt tokens + max_tokens %d exceed the profile's kv_token_budget %d", i, pt, maxTokens, p.KVTokenBudget)
		}
		if minTokens > maxTokens {
			return nil, nil, fmt.Errorf("sim: prompt %d: min_tokens %d is above its max_tokens %d", i, minTokens, maxTokens)
		}
		n := max(p.NaturalOutputTokens(o.Seed, text), minTokens)
		if ignoreEOS {
			n = maxTokens
		}
		plans[i] = promptPlan{pt, min(n, maxTokens), maxTokens, blocks}
	}
	return plans, cache, nil
}

// record is the contract's record of the request as its client saw it,
// its times from releaseS, the release of its wave.
// Its output_tokens are its generated tokens, as the served simulator's
// text re-tokenizes.
func record(r *engine.Request, w contract.Wave, releaseS float64) contract.Record {
	rec := contract.Record{
		Kind: w.Kind, Server: w.Server, Concurrency: w.Concurrency, Repeat: w.Repeat, Wave: w.ID,
		Client: r.Client, Prompt: r.Prompt, ChunkTimesS: []float64{},
		StartS: r.SentS - releaseS,
	}
	for _, t := range r.TokensS {
		if t > r.DeadlineS {
			break
		}
		rec.ChunkTimesS = append(rec.ChunkTimesS, t-releaseS)
	}
	got := len(rec.ChunkTimesS)
	if got > 0 {
		first := rec.ChunkTimesS[0]
		rec.FirstContentS = &first
	}
	counted := got
	if got == r.OutputTokens {
		rec.OK, rec.HTTPStatus = true, 200
		rec.EndS = rec.ChunkTimesS[got-1]
		rec.OutputTokens = counted
		usage, prompt := got, r.PromptTokens
		rec.UsageCompletionTokens, rec.UsagePromptTokens = &usage, &prompt
		rec.FinishReason = "stop"
		if got == r.MaxTokens {
			rec.FinishReason = "length"
		}
		return rec
	}
	if r.EngineAtS < r.DeadlineS {
		rec.HTTPStatus = 200 // the simulator answers once the engine has the request
	}
	rec.EndS = r.DeadlineS - releaseS
	rec.OutputTokens = counted
	rec.ErrorKind = contract.ErrTimeout
	timeoutS := r.DeadlineS - r.SentS
	if got == 0 {
		rec.Error = fmt.Sprintf("predicted: client timeout after %g s before the first token", timeoutS)
	} else {
		rec.Error = fmt.Sprintf("predicted: client timeout after %g s with %d of %d tokens", timeoutS, got, r.OutputTokens)
	}
	return rec
}
