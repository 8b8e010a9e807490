package benchcmd

import (
	"slices"
	"time"

	"github.com/spf13/pflag"

	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/workload"
)

// Dataset names of bench's --dataset-name, vLLM's where the concept
// matches.
const (
	datasetRandom   = "random"   // synthetic prompts of exact token lengths
	datasetShareGPT = "sharegpt" // ShareGPT JSON
	datasetCustom   = "custom"   // JSONL with a "prompt" per line (or .txt)
	datasetChat     = "chat"     // chat JSONL with whole messages
	// Trace replays (our names: vLLM has none): each line one request,
	// sent at its traced time with its traced lengths.
	datasetMooncake = "mooncake"    // Mooncake JSONL
	datasetAzure    = "azure_trace" // Azure LLM inference trace CSV
	// datasetPrefix is P exact prefixes × S exact suffixes.
	datasetPrefix = workload.SourcePrefixRepetition
)

// traceFormats are the trace format of each trace dataset.
var traceFormats = map[string]string{datasetMooncake: workload.TraceMooncake, datasetAzure: workload.TraceAzure}

// Defaults of --dataset-name prefix_repetition, vLLM's.
const (
	defaultPrefixLen   = 256
	defaultSuffixLen   = 256
	defaultNumPrefixes = 10
	defaultPrefixOut   = 128
)

// prefixFlags are the flags of --dataset-name prefix_repetition.
var prefixFlags = []string{"prefix-repetition-prefix-len", "prefix-repetition-suffix-len", "prefix-repetition-num-prefixes", "prefix-repetition-output-len"}

// datasetOptions are bench's prompt-source flags, named as `vllm bench
// serve` names them.
type datasetOptions struct {
	name string
	// chatTemplate renders custom prompts through the tokenizer's chat
	// template with chatTemplateKwargs (bench serve without
	// --skip-chat-template, as vLLM's custom dataset).
	chatTemplate       bool
	chatTemplateKwargs map[string]any
	path               string
	numPrompts         int
	inputLen           int
	outputLen          int
	rangeRatio         float64
	ignoreEOS          bool
	numPromptsSet      bool

	traceTimeScale float64
	traceBlockSize int
	// randomPrefixLen is --random-prefix-len.
	randomPrefixLen int
	// The flags of --dataset-name prefix_repetition.
	prefixLen, suffixLen, numPrefixes, prefixOutputLen int
	// maxModelLen is --max-model-len, the server's max_model_len.
	maxModelLen int
	// fixedOutputLen sends --max-tokens as every sharegpt prompt's
	// max_tokens, not its reply's length (vLLM's --sharegpt-output-len);
	// fixedOutputTokens is that length.
	fixedOutputLen    bool
	fixedOutputTokens int
	// order is sharegpt's sampling: "" (file order) or vLLM's
	// (workload.OrderVLLM, OrderVLLMUnshuffled), for bench serve.
	order string
	// changed are the dataset flags given on the command line.
	changed map[string]bool

	// Multi-turn sessions (rehearse's own flags: vllm bench serve has none).
	multiTurn bool
	maxTurns  int
	thinkTime time.Duration
	// sessionFlags are the session flags given without --multi-turn.
	sessionFlags []string
}

// trace reports whether the dataset is a trace replay.
func (d *datasetOptions) trace() bool { return traceFormats[d.name] != "" }

func datasetFlags(f *pflag.FlagSet, d *datasetOptions) {
	f.StringVar(&d.name, "dataset-name", "", "prompt source: random (synthetic prompts of exact token lengths), prefix_repetition (shared prefixes of exact lengths), sharegpt, custom (.jsonl with \"prompt\", or .txt), chat (JSONL with \"messages\"), or a trace replayed at its own times: mooncake (JSONL) or azure_trace (CSV); default: --prompts, else eight built-in prompts")
	f.StringVar(&d.path, "dataset-path", "", "the dataset file of --dataset-name sharegpt, custom, chat, mooncake or azure_trace")
	f.IntVar(&d.numPrompts, "num-prompts", config.DefaultNumPrompts, "prompts built (random, prefix_repetition) or taken from the dataset (sharegpt, chat, and the first lines of a trace; 0: all)")
	f.IntVar(&d.inputLen, "random-input-len", config.DefaultRandomInputLen, "input tokens of each random prompt, counted exactly by --tokenizer")
	f.IntVar(&d.outputLen, "random-output-len", config.DefaultRandomOutputLen, "max_tokens of each random prompt")
	f.Float64Var(&d.rangeRatio, "random-range-ratio", 0, "random lengths uniform over [len·(1−r), len·(1+r)]; 0: fixed")
	f.IntVar(&d.randomPrefixLen, "random-prefix-len", 0, "tokens of one prefix common to every random prompt, before its --random-input-len (0: none)")
	f.IntVar(&d.prefixLen, "prefix-repetition-prefix-len", defaultPrefixLen, "tokens of each shared prefix (prefix_repetition)")
	f.IntVar(&d.suffixLen, "prefix-repetition-suffix-len", defaultSuffixLen, "tokens of each prompt's own suffix after its prefix (prefix_repetition)")
	f.IntVar(&d.numPrefixes, "prefix-repetition-num-prefixes", defaultNumPrefixes, "distinct prefixes, each taking --num-prompts / this many suffixes (prefix_repetition)")
	f.IntVar(&d.prefixOutputLen, "prefix-repetition-output-len", defaultPrefixOut, "max_tokens of each prefix_repetition prompt")
	f.IntVar(&d.maxModelLen, "max-model-len", 0, "the server's max_model_len: a prompt whose input tokens + max_tokens exceed it is refused before any request (sharegpt and chat skip it); 0: unknown, or without --model what /v1/models reports")
	f.BoolVar(&d.ignoreEOS, "ignore-eos", false, "send ignore_eos: true, so every request generates all its max_tokens")
	f.Float64Var(&d.traceTimeScale, "trace-time-scale", 1, "multiply the trace's arrival offsets (0.5 replays it twice as fast; mooncake and azure_trace)")
	f.IntVar(&d.traceBlockSize, "trace-block-size", workload.DefaultTraceBlockSize, "tokens of one Mooncake hash block: prompts sharing hash_ids share that prefix text")
	f.BoolVar(&d.multiTurn, "multi-turn", false, "multi-turn sessions of --dataset-name sharegpt, chat or random: turn t+1 is sent after turn t's reply, with the whole history and the server's actual replies; each turn is a request")
	f.IntVar(&d.maxTurns, "max-turns", 0, "with --multi-turn: the most user turns of a sharegpt or chat conversation (0: all), or every random session's turns (required)")
	f.DurationVar(&d.thinkTime, "think-time", 0, "with --multi-turn: the pause between a reply's end and the session's next turn")
}

// markChanged records which dataset flags the command line gave.
func (d *datasetOptions) markChanged(f *pflag.FlagSet) {
	d.changed = map[string]bool{}
	f.Visit(func(fl *pflag.Flag) { d.changed[fl.Name] = true })
	d.numPromptsSet = d.changed["num-prompts"]
	d.sessionFlags = nil
	for _, name := range []string{"max-turns", "think-time"} {
		if d.changed[name] {
			d.sessionFlags = append(d.sessionFlags, name)
		}
	}
}

// firstChanged is the first of names given on the command line, or "".
func (d *datasetOptions) firstChanged(names ...string) string {
	for _, n := range names {
		if d.changed[n] {
			return n
		}
	}
	return ""
}

// validate checks the dataset flags against each other; errors name the
// flag.
func (d *datasetOptions) validate(promptsPath string) error {
	if n := d.firstChanged(prefixFlags...); n != "" && d.name != datasetPrefix {
		return usageError("--%s applies to --dataset-name prefix_repetition", n)
	}
	if d.changed["random-prefix-len"] && d.name != datasetRandom {
		return usageError("--random-prefix-len applies to --dataset-name random")
	}
	switch d.name {
	case "":
		if d.path != "" {
			return usageError("--dataset-path needs --dataset-name (sharegpt, custom, chat, mooncake or azure_trace)")
		}
	case datasetRandom:
		if d.path != "" {
			return usageError("--dataset-path: the random dataset reads no file")
		}
		// 0 is "absent" in a file's lengths, but a value given here.
		if d.inputLen < 1 {
			return usageError("--random-input-len %d: want at least 1", d.inputLen)
		}
		if d.outputLen < 1 {
			return usageError("--random-output-len %d: want at least 1", d.outputLen)
		}
	case datasetPrefix:
		if d.path != "" {
			return usageError("--dataset-path: the prefix_repetition dataset reads no file")
		}
		if d.prefixOutputLen < 1 {
			return usageError("--prefix-repetition-output-len %d: want at least 1", d.prefixOutputLen)
		}
		if d.numPrefixes >= 1 && d.numPrompts%d.numPrefixes != 0 {
			return usageError("--num-prompts %d is not a multiple of --prefix-repetition-num-prefixes %d (each prefix takes the same number of suffixes)", d.numPrompts, d.numPrefixes)
		}
	case datasetShareGPT, datasetCustom, datasetChat:
		if d.path == "" {
			return usageError("--dataset-name %s needs --dataset-path", d.name)
		}
		if d.name == datasetCustom && d.numPromptsSet {
			return usageError("--num-prompts applies to random, sharegpt and chat datasets")
		}
	case datasetMooncake, datasetAzure:
		if d.path == "" {
			return usageError("--dataset-name %s needs --dataset-path", d.name)
		}
		// 0 is the default in a file, but a value given here.
		if d.traceTimeScale == 0 {
			return usageError("--trace-time-scale 0: want a positive number")
		}
		if d.traceBlockSize == 0 {
			return usageError("--trace-block-size 0: want a positive number of tokens")
		}
	default:
		if slices.Contains(vllmDatasets, d.name) {
			return usageError("--dataset-name %s: vllm bench serve's dataset that rehearse does not read: use random, prefix_repetition, sharegpt, custom (a \"prompt\" per line), chat, mooncake or azure_trace", d.name)
		}
		return usageError("--dataset-name %q: want random, prefix_repetition, sharegpt, custom, chat, mooncake or azure_trace", d.name)
	}
	if f := d.firstChanged("trace-time-scale", "trace-block-size"); f != "" && !d.trace() {
		return usageError("--%s applies to --dataset-name mooncake or azure_trace", f)
	}
	if d.name != "" && promptsPath != "" {
		return usageError("--prompts and --dataset-name: give one")
	}
	return d.validateSessions()
}

// validateSessions checks --multi-turn, --max-turns and --think-time.
func (d *datasetOptions) validateSessions() error {
	if !d.multiTurn {
		if len(d.sessionFlags) > 0 {
			return usageError("--%s applies to multi-turn sessions: add --multi-turn", d.sessionFlags[0])
		}
		return nil
	}
	switch d.name {
	case datasetRandom:
		if d.maxTurns < 1 {
			return usageError("--multi-turn with --dataset-name random needs --max-turns N (at least 1): every session's turns")
		}
	case datasetShareGPT, datasetChat:
		if d.maxTurns < 0 {
			return usageError("--max-turns %d: want 0 (all) or more", d.maxTurns)
		}
	default:
		return usageError("--multi-turn needs --dataset-name sharegpt, chat or random: the other prompt sources have no conversations")
	}
	if d.thinkTime < 0 {
		return usageError("--think-time %v: want 0 or a positive duration such as 500ms", d.thinkTime)
	}
	return nil
}

// sessions is workload.sessions of bench's flags (nil without --multi-turn).
func (d *datasetOptions) sessions() *config.Sessions {
	if !d.multiTurn {
		return nil
	}
	return &config.Sessions{Turns: d.maxTurns, ThinkTime: config.ThinkTime{Mean: config.Duration(d.thinkTime)}}
}

func (d *datasetOptions) synthetic(seed int64) workload.Synthetic {
	l := func(n int) workload.Length {
		if d.rangeRatio == 0 {
			return workload.Length{Fixed: n}
		}
		return workload.Length{Mean: float64(n), RangeRatio: d.rangeRatio}
	}
	return workload.Synthetic{InputLen: l(d.inputLen), OutputLen: l(d.outputLen), Count: d.numPrompts, Seed: seed, IgnoreEOS: d.ignoreEOS, PrefixLen: d.randomPrefixLen}
}

func (d *datasetOptions) traceParams(seed int64) workload.Trace {
	return workload.Trace{Format: traceFormats[d.name], TimeScale: d.traceTimeScale, BlockSize: d.traceBlockSize,
		Count: d.numPrompts, Seed: seed, IgnoreEOS: d.ignoreEOS}
}

// prefixRepetition is the prefix_repetition source of the flags: vLLM's
// --num-prompts prompts, --num-prompts / --prefix-repetition-num-prefixes
// per prefix.
func (d *datasetOptions) prefixRepetition(seed int64) workload.PrefixRepetition {
	return workload.PrefixRepetition{NumPrefixes: d.numPrefixes, PrefixLen: d.prefixLen, SuffixLen: d.suffixLen, Count: d.numPrompts,
		OutputLen: workload.Length{Fixed: d.prefixOutputLen}, Seed: seed, IgnoreEOS: d.ignoreEOS}
}

// prompts is workload.prompts of bench's flags.
func (d *datasetOptions) prompts(promptsPath string, seed int64) config.Prompts {
	length := func(l workload.Length) *config.Length {
		return &config.Length{Fixed: l.Fixed, Mean: l.Mean, RangeRatio: l.RangeRatio}
	}
	switch d.name {
	case datasetRandom:
		s := d.synthetic(seed)
		return config.Prompts{Source: workload.SourceSynthetic, InputLen: length(s.InputLen), OutputLen: length(s.OutputLen),
			Count: s.Count, Seed: s.Seed, IgnoreEOS: s.IgnoreEOS, PrefixLen: s.PrefixLen}
	case datasetPrefix:
		p := d.prefixRepetition(seed)
		return config.Prompts{Source: workload.SourcePrefixRepetition, NumPrefixes: p.NumPrefixes, PrefixLen: p.PrefixLen, SuffixLen: p.SuffixLen,
			OutputLen: length(p.OutputLen), Count: p.Count, Seed: p.Seed, IgnoreEOS: p.IgnoreEOS}
	case datasetShareGPT:
		p := config.Prompts{Source: workload.SourceShareGPT, File: d.path, UseOutputLen: !d.fixedOutputLen, Count: d.numPrompts, Order: d.order}
		if d.order != "" {
			p.Seed = seed
		}
		if d.order != "" && d.fixedOutputLen {
			p.OutputLen = &config.Length{Fixed: d.fixedOutputTokens}
		}
		return p
	case datasetChat:
		return config.Prompts{Source: workload.SourceChatJSONL, File: d.path, Count: d.numPrompts}
	case datasetCustom:
		return config.Prompts{Source: workload.SourceFile, File: d.path, ChatTemplate: d.chatTemplate, ChatTemplateKwargs: d.chatTemplateKwargs}
	case datasetMooncake, datasetAzure:
		tr := d.traceParams(seed)
		return config.Prompts{Source: workload.SourceTrace, File: d.path, Format: tr.Format, TimeScale: tr.TimeScale,
			BlockSize: tr.BlockSize, Count: tr.Count, Seed: tr.Seed, IgnoreEOS: tr.IgnoreEOS}
	}
	return config.Prompts{File: promptsPath}
}
