package cli

import (
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
)

// datasetOptions are bench's prompt-source flags, named as `vllm bench
// serve` names them.
type datasetOptions struct {
	name          string
	path          string
	numPrompts    int
	inputLen      int
	outputLen     int
	rangeRatio    float64
	ignoreEOS     bool
	numPromptsSet bool

	// Multi-turn sessions (rehearse's own flags: vllm bench serve has none).
	multiTurn bool
	maxTurns  int
	thinkTime time.Duration
	// sessionFlags are the session flags given without --multi-turn.
	sessionFlags []string
}

func datasetFlags(f *pflag.FlagSet, d *datasetOptions) {
	f.StringVar(&d.name, "dataset-name", "", "prompt source: random (synthetic prompts of exact token lengths), sharegpt, custom (.jsonl with \"prompt\", or .txt) or chat (JSONL with \"messages\"); default: --prompts, else eight built-in prompts")
	f.StringVar(&d.path, "dataset-path", "", "the dataset file of --dataset-name sharegpt, custom or chat")
	f.IntVar(&d.numPrompts, "num-prompts", config.DefaultNumPrompts, "prompts built (random) or taken from the dataset (sharegpt, chat; 0: all)")
	f.IntVar(&d.inputLen, "random-input-len", config.DefaultRandomInputLen, "input tokens of each random prompt, counted exactly by --tokenizer")
	f.IntVar(&d.outputLen, "random-output-len", config.DefaultRandomOutputLen, "max_tokens of each random prompt")
	f.Float64Var(&d.rangeRatio, "random-range-ratio", 0, "random lengths uniform over [len·(1−r), len·(1+r)]; 0: fixed")
	f.BoolVar(&d.ignoreEOS, "ignore-eos", false, "send ignore_eos: true, so every request generates all its max_tokens")
	f.BoolVar(&d.multiTurn, "multi-turn", false, "multi-turn sessions of --dataset-name sharegpt, chat or random: turn t+1 is sent after turn t's reply, with the whole history and the server's actual replies; each turn is a request")
	f.IntVar(&d.maxTurns, "max-turns", 0, "with --multi-turn: the most user turns of a sharegpt or chat conversation (0: all), or every random session's turns (required)")
	f.DurationVar(&d.thinkTime, "think-time", 0, "with --multi-turn: the pause between a reply's end and the session's next turn")
}

// validate checks the dataset flags against each other; errors name the
// flag.
func (d *datasetOptions) validate(promptsPath string) error {
	switch d.name {
	case "":
		if d.path != "" {
			return usageError("--dataset-path needs --dataset-name (sharegpt, custom or chat)")
		}
	case datasetRandom:
		if d.path != "" {
			return usageError("--dataset-path: the random dataset reads no file")
		}
		if d.inputLen < 1 {
			return usageError("--random-input-len %d: want at least 1", d.inputLen)
		}
		if d.outputLen < 1 {
			return usageError("--random-output-len %d: want at least 1", d.outputLen)
		}
		s := d.synthetic(0)
		if probs := s.Check(); len(probs) > 0 {
			return usageError("--dataset-name random: %s (--random-input-len, --random-output-len, --random-range-ratio, --num-prompts)", probs[0])
		}
	case datasetShareGPT, datasetCustom, datasetChat:
		if d.path == "" {
			return usageError("--dataset-name %s needs --dataset-path", d.name)
		}
		if d.numPrompts < 0 {
			return usageError("--num-prompts %d: want 0 (all) or more", d.numPrompts)
		}
		if d.name == datasetCustom && d.numPromptsSet {
			return usageError("--num-prompts applies to random, sharegpt and chat datasets")
		}
	default:
		return usageError("--dataset-name %q: want random, sharegpt, custom or chat", d.name)
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
	return workload.Synthetic{InputLen: l(d.inputLen), OutputLen: l(d.outputLen), Count: d.numPrompts, Seed: seed, IgnoreEOS: d.ignoreEOS}
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
			Count: s.Count, Seed: s.Seed, IgnoreEOS: s.IgnoreEOS}
	case datasetShareGPT:
		return config.Prompts{Source: workload.SourceShareGPT, File: d.path, UseOutputLen: true, Count: d.numPrompts}
	case datasetChat:
		return config.Prompts{Source: workload.SourceChatJSONL, File: d.path, Count: d.numPrompts}
	case datasetCustom:
		return config.Prompts{Source: workload.SourceFile, File: d.path}
	}
	return config.Prompts{File: promptsPath}
}
