package benchcmd

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/rehearsal"
)

// Capacity is rehearse capacity's options: bench's of the endpoint,
// the prompts and the SLO, and the search's own.
type Capacity struct {
	bench Bench

	start          int
	maxConcurrency int
	minRequests    int
	maxRequests    int
	maxDuration    time.Duration
	warmupRequests int
	repeats        int
	predicted      string
	predictFrom    string
	noScreen       bool

	env Env
}

// capacityFlagKeys maps a capacity: key to the flag that sets it.
var capacityFlagKeys = map[string]string{
	"start": "--start", "max_concurrency": "--max-concurrency", "min_requests": "--min-requests",
	"max_requests": "--max-requests", "max_duration": "--max-duration", "warmup_requests": "--warmup-requests",
	"repeats": "--repeats",
}

// NewCapacity is the options of rehearse capacity.
func NewCapacity(env Env) *Capacity {
	return &Capacity{env: env}
}

// FromFlags takes what the flags of f (parsed) say beyond their values:
// which were given.
func (o *Capacity) FromFlags(f *pflag.FlagSet) {
	o.bench.dataset.markChanged(f)
	o.bench.slo.NoteChanged(f)
	o.bench.cost.noteChanged(f)
	if !f.Changed("warmup-requests") {
		o.warmupRequests = -1
	}
}

// Flags binds capacity's flags to o: bench's of the endpoint, the
// prompts and the SLO, and the search's own.
func (o *Capacity) Flags(f *pflag.FlagSet) {
	endpointFlags(f, &o.bench, "capacity")
	datasetFlags(f, &o.bench.dataset)
	o.bench.slo.Flags(f, false)
	capacityFlags(f, o)
}

func capacityFlags(f *pflag.FlagSet, o *Capacity) {
	f.IntVar(&o.start, "start", config.DefaultCapacityStart, "first concurrency of the doubling")
	f.IntVar(&o.maxConcurrency, "max-concurrency", config.DefaultCapacityMax, "largest concurrency the search may probe")
	f.IntVar(&o.minRequests, "min-requests", 0, "fewest measured requests of a resolved probe (default: the fewest whose interval can pass --attainment, 73 at 0.95)")
	f.IntVar(&o.maxRequests, "max-requests", 0, "cap on one probe's measured requests (default 8 × --min-requests; never below two looks, 8·C)")
	f.DurationVar(&o.maxDuration, "max-duration", 0, "cap on one probe's measured time (0: none)")
	f.IntVar(&o.warmupRequests, "warmup-requests", 0, "warm-up requests of each probe, kept out of its verdict (default: two per client before the first probe, one after)")
	f.IntVar(&o.repeats, "repeats", config.DefaultCapacityRepeats, "re-runs of the final pass and fail points")
	f.StringVar(&o.predicted, "predicted", "", "a predicted bracket MAX_PASS,MIN_FAIL to probe first")
	f.BoolVar(&o.noScreen, "no-screen", false, "probe every load of the doubling in full, with no screen (capacity.screen: false)")
	f.StringVar(&o.predictFrom, "predict-from", "", "predict the bracket to probe first from a simulator profile (a built-in name or a profile JSON file, e.g. from sim fit)")
	costFlags(f, &o.bench.cost)
}

// capacity returns the search of the flags, checked; errors name the flag.
func (o *Capacity) capacity() (*config.Capacity, error) {
	// 0 is a default in the file, but a value given on the command line.
	switch {
	case o.start < 1:
		return nil, usageError("--start %d: must be at least 1", o.start)
	case o.minRequests < 0:
		return nil, usageError("--min-requests %d: must be at least 1 (absent: from --attainment)", o.minRequests)
	case o.maxConcurrency < 1:
		return nil, usageError("--max-concurrency %d: must be at least 1", o.maxConcurrency)
	}
	c := &config.Capacity{
		Start: o.start, MaxConcurrency: o.maxConcurrency, MinRequests: o.minRequests, MaxRequests: o.maxRequests,
		MaxDuration: config.Duration(o.maxDuration), WarmupRequests: &o.warmupRequests, Repeats: &o.repeats,
	}
	screen := !o.noScreen
	c.Screen = &screen
	if o.predicted != "" {
		lo, hi, ok := strings.Cut(o.predicted, ",")
		a, errA := strconv.Atoi(strings.TrimSpace(lo))
		b, errB := strconv.Atoi(strings.TrimSpace(hi))
		if !ok || errA != nil || errB != nil {
			return nil, usageError("--predicted %q: want MAX_PASS,MIN_FAIL such as 8,12", o.predicted)
		}
		c.Predicted = map[string]config.Bracket{o.bench.name: {MaxPass: a, MinFail: b}}
	}
	if o.predictFrom != "" {
		if o.predicted != "" {
			return nil, usageError("--predict-from and --predicted both give a bracket to probe first: keep one")
		}
		c.PredictFrom = map[string]config.PredictFrom{o.bench.name: {Profile: o.predictFrom}}
	}
	c.ApplyDefaults(o.bench.slo.attainment)
	if probs := c.Check(); len(probs) > 0 {
		p := probs[0]
		flag, ok := capacityFlagKeys[p.Key]
		switch {
		case ok:
		case strings.HasPrefix(p.Key, "predict_from"):
			flag = "--predict-from"
		default:
			flag = "--predicted"
		}
		return nil, usageError("%s %s", flag, p.Msg)
	}
	return c, nil
}

// Run is capacity's run of the options the flags filled: the search and
// bench's common flags checked, the rehearsal made of them, its tokenizer
// and prompts resolved, then the one runner (rehearsal.Perform); argv is
// the command line as provenance records it (CommandLine).
func (o *Capacity) Run(ctx context.Context, argv []string) error {
	b := &o.bench
	if b.slo.expr == "" {
		return usageError("--slo is required: the objectives a probe is judged against, e.g. 'ttft<=500ms,tpot<=50ms'")
	}
	c, err := o.capacity()
	if err != nil {
		return err
	}
	// bench's checks of the common flags; its load flags are not capacity's.
	b.repeats, b.concurrencies, b.closedSet = 1, []int{1}, false
	if err := b.checkFlags(); err != nil {
		return err
	}
	cfg, notes, err := b.rehearsal(ctx)
	if err != nil {
		return err
	}
	cfg.Workload.Concurrencies = []int{}
	cfg.Capacity = c
	opened, err := openTokenizer(ctx, cfg)
	if err != nil {
		return err
	}
	prompts, err := b.prompts(cfg, opened)
	if err != nil {
		return err
	}
	dir := b.dir("capacity")
	pb := NewWaveBar(o.env.Stderr, b.progress, false)
	job := rehearsal.Job{
		Rehearsal: cfg, Dir: dir, Command: argv, Notes: notes, Prompts: &prompts, Tokenizer: &opened,
		WaveEvents: pb.Event, WavesDone: pb.Close, Progress: rehearsal.ProbeLines(o.env.Stderr, b.progress),
		Fail: func(err error) error {
			if de := (*rehearsal.DescriptorError)(nil); errors.As(err, &de) {
				return usageError("capacity: %v", err)
			}
			if pe := (*rehearsal.PredictError)(nil); errors.As(err, &pe) {
				return usageError("--predict-from %s: %v", pe.Profile, pe.Err)
			}
			return usageError("--tokenizer: %v", err)
		},
	}
	return rehearsal.Perform(ctx, job, rehearsal.Ending{Stdout: o.env.Stdout, Stderr: o.env.Stderr, Summary: rehearsal.PrintCapacity, Faults: true})
}
