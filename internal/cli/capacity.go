package cli

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/rehearsal"
)

type capacityOptions struct {
	bench benchOptions

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
}

// capacityFlagKeys maps a capacity: key to the flag that sets it.
var capacityFlagKeys = map[string]string{
	"start": "--start", "max_concurrency": "--max-concurrency", "min_requests": "--min-requests",
	"max_requests": "--max-requests", "max_duration": "--max-duration", "warmup_requests": "--warmup-requests",
	"repeats": "--repeats",
}

func newCapacityCmd(st *State) *cobra.Command {
	var o capacityOptions
	cmd := &cobra.Command{
		Use:   "capacity --base-url URL --slo OBJECTIVES [flags]",
		Short: "Search how much load an endpoint carries under an SLO and write a bundle",
		Long: `Search the capacity of one OpenAI-compatible endpoint that is already
running: the largest number C of clients of the sustained closed loop (each
sending its next request as its last one ends) at which at least
--attainment of requests meet every --slo objective (SPEC §8).

Each probe at C sends --warmup-requests requests (default two rounds, 2·C,
before the first probe and one round, C, before each later one) kept out of
the figures, then measures, C requests always in flight, until the 95 %
Wilson interval of attainment over its first k requests sent lies wholly on
one side of the target (pass or fail): it looks at k =
max(min-requests, 4·C)·2^j (four rounds of the loop at least) once the
first k sent have all ended, and those k are its verdict's population,
whichever ended first; the requests still in flight land, recorded outside
it (after_verdict). --min-requests defaults to the fewest requests whose
interval can pass --attainment (73 at 0.95). At --max-requests (or
--max-duration) it is unresolved: it ends the bracket above and never
counts as a pass. The search doubles C until a probe fails, screening each
load below --max-concurrency with one round of at least 16 requests (a
screen can fail a load, never pass it), from the first load where that is
at most two rounds (8 from --start 1; --no-screen: full probes from
--start). After the first fail it probes where the line through the
margins of the bracket's ends crosses 1 (a probe's margin: the
attainment-quantile of each request's value over its limit), then bisects
until min_fail − max_pass ≤ max(1, 5 % of max_pass), probing a screened end
in full once the bracket has converged on it; then it re-runs the final
pass and fail points --repeats times and flags a non-monotonic answer. --predicted MAX_PASS,MIN_FAIL probes a
predicted bracket first; --predict-from PROFILE predicts that bracket from
a simulator profile (a built-in name, or a JSON file "rehearse sim fit"
wrote from a bundle of this server) before any request: the same search
over the profile's engine on a virtual clock, each probe's predicted
attainment taken as a point estimate.

Every probe is an ordinary sustained wave of ordinary records in the
journal, so a search stopped midway is bundled with every finished probe,
and "rehearse verify" replays the search from the records: each verdict,
interval, stop and the bracket. The command exits 1 when the server failed
during a probe or answered every request of one with an error, 130 when
interrupted. Prompts, the request and readiness take bench's
flags.`,
		Example: `  rehearse capacity --base-url http://127.0.0.1:8000 --slo 'ttft<=500ms,tpot<=50ms'
  rehearse capacity --base-url http://127.0.0.1:8000 --slo 'ttft<=2s' --attainment 0.9 --min-requests 200 --max-concurrency 256 -o cap
  rehearse capacity --base-url http://127.0.0.1:8000 --slo 'e2el<=10s' --dataset-name random --random-input-len 1024 --random-output-len 128`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.bench.dataset.markChanged(cmd.Flags())
			o.bench.slo.noteChanged(cmd.Flags())
			o.bench.cost.noteChanged(cmd.Flags())
			if !cmd.Flags().Changed("warmup-requests") {
				o.warmupRequests = -1
			}
			return runCapacity(cmd.Context(), st, &o, commandLine(cmd))
		},
	}
	f := cmd.Flags()
	endpointFlags(f, &o.bench, "capacity")
	datasetFlags(f, &o.bench.dataset)
	sloFlags(f, &o.bench.slo, false)
	capacityFlags(f, &o)
	return cmd
}

func capacityFlags(f *pflag.FlagSet, o *capacityOptions) {
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
func (o *capacityOptions) capacity() (*config.Capacity, error) {
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

func runCapacity(ctx context.Context, st *State, o *capacityOptions, argv []string) error {
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
	opened, err := rehearsal.OpenTokenizer(ctx, cfg)
	if stop := rehearsal.TokenizerStop(err, ""); stop != nil {
		return stop
	} else if err != nil {
		return usageError("--tokenizer: %v", err)
	}
	prompts, err := rehearsal.Prompts(cfg, opened.Tokenizer)
	if err != nil {
		flag := "--prompts"
		if b.dataset.name != "" {
			flag = "--dataset-name " + b.dataset.name
		}
		return usageError("%s: %v", flag, err)
	}
	dir := b.out
	if dir == "" {
		dir = "rehearse-capacity-" + time.Now().UTC().Format("20060102T150405Z")
	}
	pb := newWaveBar(st.Stderr, b.progress, false)
	job := rehearsal.Job{
		Rehearsal: cfg, Dir: dir, Command: argv, Notes: notes, Prompts: &prompts, Tokenizer: &opened,
		WaveEvents: pb.event, WavesDone: pb.close, Progress: rehearsal.ProbeLines(st.Stderr, b.progress),
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
	return rehearsal.Perform(ctx, job, rehearsal.Ending{Stdout: st.Stdout, Stderr: st.Stderr, Summary: rehearsal.PrintCapacity, Faults: true})
}
