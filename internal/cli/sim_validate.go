package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/goccy/go-yaml"
	"github.com/spf13/cobra"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/rehearsal"
	"github.com/rehearse/rehearse/internal/sim/engine"
	"github.com/rehearse/rehearse/internal/sim/fit"
	"github.com/rehearse/rehearse/internal/tokenizer"
)

type simValidateOptions struct {
	bundleDir   string
	holdBundle  string
	fitOn       string
	holdOut     string
	servers     []string
	output      string
	liveBundle  string
	noLive      bool
	timeScale   float64
	maxModelLen int
	asJSON      bool
	markdown    bool
	fitJitter   bool
}

// simValidateServer is one --server: a bundle server and its engine.
type simValidateServer struct{ name, engine string }

func newSimValidateCmd(st *State) *cobra.Command {
	var o simValidateOptions
	cmd := &cobra.Command{
		Use:   "validate BUNDLE --fit-on LOADS --hold-out LOADS",
		Short: "Fit a simulator profile on some loads of a bundle and tabulate its error on the others, predicted and live",
		Long: `Fit a simulator profile (as rehearse sim fit does) to each server of a
results bundle on the loads --fit-on, then predict the loads --hold-out and
tabulate, for every held-out load, the error of each metric against the
bundle's records: goodput, request throughput, E2E, TPOT, ITL p50 and p95,
TTFT p50 and p95. Error = (predicted − measured) ÷ measured.

The table has two sources: the predictor (the engine stepped on a virtual
clock) and a live run: the held-out waves of the bundle's workload sent by
the one runner (as rehearse run does) to "rehearse sim" launched with the
fitted profile. Both count output tokens as the tokens generated (the
server's usage), on the bundle's side too: random-weight text re-tokenizes
to about 6 % more tokens than were generated, an artifact of the text that
the engine model does not reproduce.

TTFT under 50 ms is judged by its absolute error (request handling and host
noise); above it, where queueing dominates, by its relative error. The goal
metrics, goodput, E2E and TPOT, are marked against ±10 %.

LOADS are comma-separated concurrencies (1,64), open-loop rates (2rps),
open-loop shapes (ramp: every ramp-up wave; trace: every trace replay) or
whole modes (closed, sustained, open: every load of the mode). The fit
reads the --fit-on loads of BUNDLE, of any mode: closed waves by their
concurrency, sustained and open-loop loads by their measured decode
occupancy, prefill and context costs where the lowest load's prompt and
output lengths vary (rehearse sim fit's derivation says what each number
came from). A held-out load is predicted as the bundle ran it: a closed
wave wave by wave, a sustained load with the bundle's warm-up and measured
requests and duration, an open-loop wave at its own rate or ramp, arrival
process and seed, or its traced arrivals (no max_concurrency); every
prompt with its own prompt tokens and max_tokens; each aggregated by the
contract as the bundle's are, goodput over each mode's window. One
rehearsal runs its concurrencies either as closed waves or as sustained
loops, so fit and hold-out may come from two bundles of the same servers:
BUNDLE is the one fitted on, --hold-out-bundle DIR the one held out (one
of each; the fit does not pool bundles). The live run sends one kind of
open-loop load (rates, a ramp, or a trace replay, which it reads again from
the bundle's trace file); mixing them needs --no-live.

--fit-jitter also fits a seeded step jitter from the lowest fitted load's
inter-token spread (default: none, every step costs exactly its model).

--server NAME=ENGINE picks a server and its simulated engine (repeatable);
by default every server of the bundle, each with the engine its launch argv
names (--engine, as the demo's simulated servers have). The table is printed
(--json: one JSON row per held-out load, metric and source; --markdown) and
written as JSON to -o (default sim-validate.json). Nothing is written into
the bundle.`,
		Example: `  rehearse sim validate rehearsals/h200-qwen2.5-1.5b --fit-on 1,64 --hold-out 8,32 \
    --server naive=serial --server batching=batching
  rehearse sim validate /tmp/demo --fit-on 1,64 --hold-out 8,32 --time-scale 10 --json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError("sim validate: want one BUNDLE folder, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.bundleDir = args[0]
			return runSimValidate(cmd, st, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.fitOn, "fit-on", "", "loads the fit reads: concurrencies such as 1,64, rates such as 2rps, ramp, trace, or closed, sustained, open")
	f.StringVar(&o.holdOut, "hold-out", "", "loads predicted and judged: concurrencies such as 8,32, rates such as 2rps, ramp, trace, or closed, sustained, open")
	f.BoolVar(&o.fitJitter, "fit-jitter", false, "also fit a seeded step jitter from the inter-token spread")
	f.StringVar(&o.holdBundle, "hold-out-bundle", "", "read the held-out loads from this bundle of the same servers (default: BUNDLE)")
	f.StringArrayVar(&o.servers, "server", nil, "NAME=ENGINE (serial or batching), repeatable (default: every server, the engine from its launch argv)")
	f.StringVarP(&o.output, "output", "o", "sim-validate.json", "write the error table as JSON to this file (-: standard output, the table then on stderr)")
	f.StringVar(&o.liveBundle, "live-bundle", "", "keep the live run's bundle in this folder (default: a temporary one, removed)")
	f.BoolVar(&o.noLive, "no-live", false, "predict only: no live simulator run")
	f.Float64Var(&o.timeScale, "time-scale", 1, "the live simulator's time runs K times faster than the wall clock")
	f.IntVar(&o.maxModelLen, "max-model-len", 32768, "max_model_len of the fitted profiles")
	f.BoolVar(&o.asJSON, "json", false, "print the table as JSON rows")
	f.BoolVar(&o.markdown, "markdown", false, "print the table as markdown")
	return cmd
}

// simValidateFile is what -o stores.
type simValidateFile struct {
	Bundle     string             `json:"bundle"`
	HoldBundle string             `json:"hold_out_bundle,omitempty"`
	FitOn      string             `json:"fit_on"`
	HoldOut    string             `json:"hold_out"`
	TimeScale  float64            `json:"live_time_scale,omitempty"`
	Profiles   []*engine.Profile  `json:"profiles"`
	Rows       []fit.ErrorRow     `json:"rows"`
	Unexplain  []string           `json:"not_explained,omitempty"`
	Notes      []string           `json:"notes,omitempty"`
	CountRatio map[string]float64 `json:"bundle_counted_per_generated_token"`
}

// validate refuses flags that do not go together or are out of range, and
// an -o that is not nothing, a regular file or "-", before any work.
func (o simValidateOptions) validate() error {
	switch {
	case o.asJSON && o.markdown:
		return usageError("sim validate: --json and --markdown: pick one")
	case !(o.timeScale > 0) || o.timeScale > 1e6:
		return usageError("sim validate: --time-scale %g: want a number above 0 (and at most 1e6)", o.timeScale)
	case o.maxModelLen < 1:
		return usageError("sim validate: --max-model-len %d: want >= 1", o.maxModelLen)
	case o.output == "":
		return usageError("sim validate: -o is empty: name the JSON file to write")
	case o.asJSON && o.output == bundle.StdoutPath:
		return usageError("sim validate: --json and -o -: both write JSON to standard output; pick one")
	}
	return checkOutput("sim validate: -o", o.output)
}

func runSimValidate(cmd *cobra.Command, st *State, o simValidateOptions) error {
	fitOn, err := fit.ParseLoads(o.fitOn)
	if err != nil {
		return usageError("sim validate: --fit-on %q: %v", o.fitOn, err)
	}
	holdOut, err := fit.ParseLoads(o.holdOut)
	if err != nil {
		return usageError("sim validate: --hold-out %q: %v", o.holdOut, err)
	}
	if err := o.validate(); err != nil {
		return err
	}
	res, err := bundle.ReadResults(o.bundleDir)
	if err != nil {
		return usageError("sim validate: %v", err)
	}
	servers, err := validateServers(res, o.servers)
	if err != nil {
		return err
	}
	var notes []string
	if n := inSimulatedTime(res, "the bundle", o.timeScale); n != "" {
		notes = append(notes, n)
	}
	hold := res
	if o.holdBundle != "" {
		if hold, err = bundle.ReadResults(o.holdBundle); err != nil {
			return usageError("sim validate: --hold-out-bundle: %v", err)
		}
		if n := inSimulatedTime(hold, "the held-out bundle", o.timeScale); n != "" {
			notes = append(notes, n)
		}
		for _, s := range servers {
			if !slices.Contains(hold.ServerNames(), s.name) {
				return usageError("sim validate: --hold-out-bundle %s has no server %s (have: %s)", o.holdBundle, s.name, strings.Join(hold.ServerNames(), ", "))
			}
		}
	}
	var vals []*fit.Validation
	for _, s := range servers {
		v, err := fit.Validate(res, fit.ValidateOptions{Server: s.name, Engine: s.engine, FitOn: fitOn, HoldOut: holdOut, HeldOut: hold, Jitter: o.fitJitter, MaxModelLen: o.maxModelLen})
		if err != nil {
			return usageError("%v", err)
		}
		vals = append(vals, v)
	}
	if !o.noLive {
		if err := runValidateLive(cmd, st, o, hold, vals); err != nil {
			return err
		}
	}
	file := simValidateFile{Bundle: o.bundleDir, HoldBundle: o.holdBundle, FitOn: o.fitOn, HoldOut: o.holdOut, CountRatio: map[string]float64{}, Notes: notes}
	if !o.noLive {
		file.TimeScale = o.timeScale
	}
	var rows []fit.ErrorRow
	for _, v := range vals {
		file.Profiles = append(file.Profiles, v.Fit.Profile)
		file.CountRatio[v.Server] = v.Fit.CountedPerGeneratedToken
		for _, u := range v.Fit.Unexplained {
			file.Unexplain = append(file.Unexplain, v.Server+": "+u)
		}
		rows = append(rows, v.Rows...)
	}
	file.Rows = rows
	data, err := json.MarshalIndent(file, "", "  ")
	if err != nil {
		return err
	}
	if err := writeOutput(st, "sim validate: -o", o.output, append(data, '\n')); err != nil {
		return err
	}
	return printValidate(st, o, rows, notes, vals)
}

// printValidate prints the error table and the notes: on standard output,
// or on stderr where -o - made the file standard output's.
func printValidate(st *State, o simValidateOptions, rows []fit.ErrorRow, notes []string, vals []*fit.Validation) error {
	w := st.Stdout
	if o.output == bundle.StdoutPath {
		w = st.Stderr
	}
	switch {
	case o.asJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if rows == nil {
			rows = []fit.ErrorRow{}
		}
		return enc.Encode(rows)
	case o.markdown:
		writeValidateMarkdown(w, rows)
	default:
		writeValidateText(w, rows)
	}
	for _, n := range notes {
		fmt.Fprintf(w, "Note: %s.\n", n)
	}
	for _, v := range vals {
		for _, n := range v.Notes {
			fmt.Fprintf(w, "Note: %s: %s.\n", v.Server, n)
		}
	}
	if o.output != bundle.StdoutPath {
		fmt.Fprintf(w, "The table is written to %s.\n", o.output)
	}
	return nil
}

// inSimulatedTime reads a bundle of simulated servers at time scale k (the
// demo's) in simulated time, so the fit is the profiles' own: its waves and
// records (fit.SlowedDown), and its workload's client timeout, sustained
// duration, open-loop rates, ramp and duration, and traced arrivals. It returns a note saying so,
// or "" for a bundle at time scale 1.
func inSimulatedTime(res *bundle.Results, what string, liveScale float64) string {
	s := res.Provenance.Simulation
	if s == nil || !(s.TimeScale > 0) || s.TimeScale == 1 {
		return ""
	}
	k := s.TimeScale
	res.Waves, res.Records = fit.SlowedDown(res.Waves, res.Records, k)
	wl := &res.Workload
	wl.TimeoutS *= k
	if su := wl.Sustained; su != nil {
		c := *su
		c.DurationS *= k
		wl.Sustained = &c
	}
	if op := wl.Open; op != nil {
		c := *op
		c.DurationS *= k
		c.RequestRatesRPS = slices.Clone(op.RequestRatesRPS)
		for i := range c.RequestRatesRPS {
			c.RequestRatesRPS[i] /= k
		}
		if r := op.Ramp; r != nil {
			c.Ramp = &contract.Ramp{Strategy: r.Strategy, StartRPS: r.StartRPS / k, EndRPS: r.EndRPS / k}
		}
		wl.Open = &c
	}
	if len(wl.ArrivalsS) > 0 {
		a := slices.Clone(wl.ArrivalsS)
		for i := range a {
			a[i] *= k
		}
		wl.ArrivalsS = a
	}
	return fmt.Sprintf("%s's servers were simulated at time scale %g: its figures are read in simulated time (×%g), as the live run's (×%g) are", what, k, k, liveScale)
}

// validateServers reads --server NAME=ENGINE, or every server of the bundle
// with the engine its launch argv names.
func validateServers(res *bundle.Results, flags []string) ([]simValidateServer, error) {
	var out []simValidateServer
	if len(flags) == 0 {
		for _, s := range res.Servers {
			eng := argvValue(s.LaunchArgv, "--engine")
			if eng != engine.Serial && eng != engine.Batching {
				return nil, usageError("sim validate: server %s: its launch argv names no simulated engine; pass --server %s=serial or --server %s=batching", s.Name, s.Name, s.Name)
			}
			out = append(out, simValidateServer{s.Name, eng})
		}
		return out, nil
	}
	for _, f := range flags {
		name, eng, ok := strings.Cut(f, "=")
		if !ok || name == "" || (eng != engine.Serial && eng != engine.Batching) {
			return nil, usageError("sim validate: --server %q: want NAME=serial or NAME=batching", f)
		}
		if !slices.Contains(res.ServerNames(), name) {
			return nil, usageError("sim validate: --server %q: the bundle has no server %s (have: %s)", f, name, strings.Join(res.ServerNames(), ", "))
		}
		if slices.ContainsFunc(out, func(s simValidateServer) bool { return s.name == name }) {
			return nil, usageError("sim validate: --server %q: server %s is named twice", f, name)
		}
		out = append(out, simValidateServer{name, eng})
	}
	return out, nil
}

// argvValue reads "--flag V" or "--flag=V" from an argv ("" when absent).
func argvValue(argv []string, flag string) string {
	for i, a := range argv {
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
		if a == flag && i+1 < len(argv) {
			return argv[i+1]
		}
	}
	return ""
}

// runValidateLive sends the held-out waves of the bundle's workload to
// "rehearse sim" with each fitted profile, through the one runner, and adds
// the live rows to each validation.
func runValidateLive(cmd *cobra.Command, st *State, o simValidateOptions, res *bundle.Results, vals []*fit.Validation) error {
	work, err := os.MkdirTemp("", "rehearse-sim-validate-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	dir := o.liveBundle
	if dir == "" {
		dir = filepath.Join(work, "live")
	}
	cfg, err := validateLiveConfig(res, vals, work, o.timeScale)
	if err != nil {
		return err
	}
	cwd, err := os.Getwd()
	if err != nil {
		return err
	}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	rc, err := config.Parse(data, "the live run of sim validate", cwd)
	if err != nil {
		return fmt.Errorf("sim validate: the live run's rehearsal: %w", err)
	}
	if err := scaleSimulated(rc, o.timeScale); err != nil {
		return err
	}
	// scaleSimulated scales the client timeout; the sustained duration
	// and the open-loop rates and duration are scaled here.
	if su := rc.Workload.Sustained; su != nil {
		su.Duration = config.Duration(float64(su.Duration) / o.timeScale)
	}
	if op := rc.Workload.OpenLoop; op != nil {
		op.Duration = config.Duration(float64(op.Duration) / o.timeScale)
		for i := range op.RequestRatesRPS {
			op.RequestRatesRPS[i] *= o.timeScale
		}
		if r := op.Ramp; r != nil {
			r.StartRPS *= o.timeScale
			r.EndRPS *= o.timeScale
		}
	}
	job := rehearsalJob{cfg: rc, dir: dir, quiet: true,
		command:    append(validateCommand(o), serverFlags(vals)...),
		simulation: rehearsal.Simulation(rc),
		notes:      []string{"The live run of rehearse sim validate: the held-out waves of " + o.bundleDir + " against rehearse sim with profiles fitted on its waves at " + o.fitOn + "."},
	}
	job.fail = func(err error) error { return &ExitError{Code: 2, Err: fmt.Errorf("sim validate: live run: %w", err)} }
	fmt.Fprintf(st.Stderr, "rehearse sim validate: live run of the held-out waves at time scale %g, bundle %s\n", o.timeScale, dir)
	r, err := rehearse(cmd.Context(), job)
	if err != nil {
		return err
	}
	if err := r.exitError(dir); err != nil {
		return err
	}
	for _, v := range vals {
		if err := v.AddLive(r.out.Results.Waves, r.out.Results.Records, v.Server, o.timeScale); err != nil {
			return err
		}
	}
	return nil
}

// validateCommand is the command line a live bundle records.
func validateCommand(o simValidateOptions) []string {
	out := []string{"rehearse", "sim", "validate", o.bundleDir, "--fit-on", o.fitOn, "--hold-out", o.holdOut}
	if o.holdBundle != "" {
		out = append(out, "--hold-out-bundle", o.holdBundle)
	}
	if o.fitJitter {
		out = append(out, "--fit-jitter")
	}
	return append(out, "--time-scale", strconv.FormatFloat(o.timeScale, 'g', -1, 64))
}

func serverFlags(vals []*fit.Validation) []string {
	var out []string
	for _, v := range vals {
		out = append(out, "--server", v.Server+"="+v.Fit.Profile.Engine)
	}
	return out
}

// validateLiveConfig is the rehearsal file of the live run, at time scale
// 1 (scaleSimulated converts it): one simulated server per validation,
// launched with its fitted profile (written under work), and the bundle's
// workload at the held-out loads: its closed waves or its sustained loops
// at the held-out concurrencies (one rehearsal runs them one way), and its
// open loop at the held-out rates, or its ramp, or its trace replay (one
// of the three). Prompts with their own max_tokens are written under work
// as chat JSON Lines, one user message and its max_tokens a line; a trace
// replay reads the bundle's own trace again (its prompt_source), its time
// scale set so that the live run's simulated arrivals are the bundle's. It
// counts with the embedded tokenizer the simulators emit tokens of.
func validateLiveConfig(res *bundle.Results, vals []*fit.Validation, work string, liveScale float64) (map[string]any, error) {
	var servers []any
	var holdOut, sustained []int
	var rates []float64
	var ramps []contract.Ramp
	trace := false
	for _, v := range vals {
		p := v.Fit.Profile
		data, err := p.Encode()
		if err != nil {
			return nil, err
		}
		path := filepath.Join(work, v.Server+".json")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return nil, err
		}
		servers = append(servers, map[string]any{
			"name":      v.Server,
			"simulated": p.Name,
			"launch": []string{"{rehearse}", "sim", "--engine", p.Engine, "--profile", path, "--model", "{model}",
				"--port", "{port}", "--time-scale", "1", "--seed", "0", "--quiet"},
			"ready":      map[string]any{"timeout": "30s"},
			"stop_grace": "5s",
		})
		for _, c := range v.HoldOut {
			if !slices.Contains(holdOut, c) {
				holdOut = append(holdOut, c)
			}
		}
		for _, c := range v.HoldOutSustained {
			if !slices.Contains(sustained, c) {
				sustained = append(sustained, c)
			}
		}
		for _, r := range v.HoldOutRates {
			if !slices.Contains(rates, r) {
				rates = append(rates, r)
			}
		}
		for _, r := range v.HoldOutRamps {
			if !slices.Contains(ramps, r) {
				ramps = append(ramps, r)
			}
		}
		trace = trace || v.HoldOutTrace
	}
	shapes := 0
	for _, b := range []bool{len(rates) > 0, len(ramps) > 0, trace} {
		if b {
			shapes++
		}
	}
	if shapes > 1 || len(ramps) > 1 {
		return nil, usageError("sim validate: the held-out open-loop loads mix constant rates, ramps and trace replays, which one live rehearsal cannot run together (its open loop has one of them): hold out one kind, or pass --no-live")
	}
	if len(holdOut) > 0 && len(sustained) > 0 {
		return nil, usageError("sim validate: the held-out loads are closed waves and sustained loops, which one live rehearsal cannot run both (its concurrencies run one way): hold out one of them, or pass --no-live")
	}
	concurrencies := holdOut
	if len(sustained) > 0 {
		concurrencies = sustained
	}
	slices.Sort(concurrencies)
	slices.Sort(rates)
	wl := res.Workload
	workload := map[string]any{
		"concurrencies": concurrencies,
		"repeats":       wl.Repeats,
		"prompts":       wl.Prompts,
		"max_tokens":    wl.MaxTokens,
		"temperature":   wl.Temperature,
		"timeout":       strconv.FormatFloat(wl.TimeoutS, 'f', -1, 64) + "s",
		"warmup_waves":  wl.WarmupWaves,
	}
	if wl.WarmupConcurrency > 0 {
		workload["warmup_concurrency"] = wl.WarmupConcurrency
	}
	if wl.WarmupWavesPerLoad > 0 {
		workload["warmup_waves_per_load"] = wl.WarmupWavesPerLoad
	}
	if len(wl.ExtraBody) > 0 {
		workload["extra_body"] = wl.ExtraBody
	}
	if trace {
		src, err := liveTraceSource(res, liveScale)
		if err != nil {
			return nil, err
		}
		workload["prompts"] = src
	} else if len(wl.PromptMaxTokens) > 0 {
		path := filepath.Join(work, "prompts.jsonl")
		var b strings.Builder
		for i, text := range wl.Prompts {
			line := map[string]any{"messages": []map[string]string{{"role": "user", "content": text}}}
			if i < len(wl.PromptMaxTokens) && wl.PromptMaxTokens[i] > 0 {
				line["max_tokens"] = wl.PromptMaxTokens[i]
			}
			data, err := json.Marshal(line)
			if err != nil {
				return nil, err
			}
			b.Write(data)
			b.WriteByte('\n')
		}
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			return nil, err
		}
		workload["prompts"] = map[string]any{"source": "chat_jsonl", "path": path}
	}
	if len(sustained) > 0 {
		su := wl.Sustained
		workload["mode"] = "sustained"
		workload["sustained"] = map[string]any{"num_requests": su.NumRequests, "warmup_requests": su.WarmupRequests,
			"duration": strconv.FormatFloat(su.DurationS, 'f', -1, 64) + "s"}
	}
	if shapes > 0 {
		op := wl.Open
		ol := map[string]any{"arrival": op.Arrival, "seed": op.Seed, "num_requests": op.NumRequests,
			"duration": strconv.FormatFloat(op.DurationS, 'f', -1, 64) + "s"}
		switch {
		case len(rates) > 0:
			ol["request_rates_rps"] = rates
		case len(ramps) > 0:
			ol["ramp"] = map[string]any{"strategy": ramps[0].Strategy, "start_rps": ramps[0].StartRPS, "end_rps": ramps[0].EndRPS}
		default:
			ol["arrival"] = contract.ArrivalTrace
			delete(ol, "seed")
		}
		if op.Burstiness != 0 {
			ol["burstiness"] = op.Burstiness
		}
		workload["open_loop"] = ol
	}
	model := res.Provenance.Model
	m := map[string]any{"id": model.ID, "note": "served by the simulator with profiles fitted by rehearse sim validate; no weights were loaded"}
	if model.Revision != "" {
		m["revision"] = model.Revision
	}
	if model.Dtype != "" {
		m["dtype"] = model.Dtype
	}
	// The simulators emit tokens of the embedded Qwen file (rehearse sim's
	// tokenizer), so the live run counts with it: in the bundle's variant
	// where the bundle counted with the embedded file, else Qwen3's.
	variant := res.Provenance.Tokenizer.Variant
	if variant == "" {
		variant = tokenizer.VariantQwen3
	}
	return map[string]any{
		"model":           m,
		"tokenizer":       map[string]any{"variant": variant},
		"baseline":        vals[0].Server,
		"servers":         servers,
		"workload":        workload,
		"mechanism_check": map[string]any{"disabled": true},
	}, nil
}

// liveTraceSource is the prompts mapping that reads the bundle's trace
// again: its prompt_source's file and parameters, its time scale set so
// that, run at liveScale, the arrivals in simulated time are the bundle's.
func liveTraceSource(res *bundle.Results, liveScale float64) (map[string]any, error) {
	ps := res.Workload.PromptSource
	if ps == nil || ps.Name != "trace" {
		return nil, usageError("sim validate: the held-out trace replay's bundle names no trace prompt source to replay live; pass --no-live")
	}
	path, _ := ps.Params["path"].(string)
	if _, err := os.Stat(path); err != nil {
		return nil, usageError("sim validate: the held-out trace %q cannot be read for the live run (%v); run from the folder the bundle's rehearsal ran in, or pass --no-live", path, err)
	}
	m := map[string]any{"source": "trace", "path": path}
	for _, k := range []string{"format", "block_size", "count", "seed", "ignore_eos"} {
		if v, ok := ps.Params[k]; ok {
			m[k] = v
		}
	}
	ts := 1.0
	if v, ok := ps.Params["time_scale"].(float64); ok && v > 0 {
		ts = v
	}
	if sc := res.Provenance.Simulation; sc != nil && sc.TimeScale > 0 {
		ts *= sc.TimeScale
	}
	m["time_scale"] = ts / liveScale
	return m, nil
}

// validateValue formats a metric's value: goodput in tok/s, throughput in
// req/s, latencies in ms.
func validateValue(metric string, v *float64) string {
	if v == nil {
		return "—"
	}
	switch {
	case strings.HasSuffix(metric, "_tok_s"):
		return fmt.Sprintf("%.1f tok/s", *v)
	case strings.HasSuffix(metric, "_rps"):
		return fmt.Sprintf("%.3f req/s", *v)
	}
	return fmt.Sprintf("%.1f ms", 1000**v)
}

// validateError formats a row's error: relative, or absolute (with the
// relative beside it) for a small TTFT.
func validateError(r *fit.ErrorRow) string {
	if r == nil || r.Error == nil {
		return "—"
	}
	rel := fmt.Sprintf("%+.1f %%", 100**r.Error)
	if r.JudgedBy == "absolute" && r.AbsError != nil {
		return fmt.Sprintf("%+.1f ms (%s)", 1000**r.AbsError, rel)
	}
	if r.WithinGoal != nil && !*r.WithinGoal {
		return rel + " !"
	}
	return rel
}

// validatePair is the predictor's and the live run's row of one metric.
type validatePair struct {
	server, load, metric string
	pred, live           *fit.ErrorRow
}

func validatePairs(rows []fit.ErrorRow) []validatePair {
	var out []validatePair
	for i := range rows {
		r := &rows[i]
		j := slices.IndexFunc(out, func(p validatePair) bool { return p.server == r.Server && p.load == r.Load && p.metric == r.Metric })
		if j < 0 {
			out = append(out, validatePair{server: r.Server, load: r.Load, metric: r.Metric})
			j = len(out) - 1
		}
		if r.Source == fit.SourceLive {
			out[j].live = r
		} else {
			out[j].pred = r
		}
	}
	return out
}

func measuredOf(p validatePair) *float64 {
	if p.pred != nil {
		return p.pred.Measured
	}
	if p.live != nil {
		return p.live.Measured
	}
	return nil
}

func predictedOf(r *fit.ErrorRow) *float64 {
	if r == nil {
		return nil
	}
	return r.Predicted
}

func writeValidateText(w io.Writer, rows []fit.ErrorRow) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "server\tload\tmetric\tmeasured\tpredictor\terror\tlive\terror\n")
	for _, p := range validatePairs(rows) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.server, p.load, p.metric,
			validateValue(p.metric, measuredOf(p)), validateValue(p.metric, predictedOf(p.pred)), validateError(p.pred),
			validateValue(p.metric, predictedOf(p.live)), validateError(p.live))
	}
	tw.Flush()
	writeValidateLegend(w)
}

func writeValidateMarkdown(w io.Writer, rows []fit.ErrorRow) {
	fmt.Fprintf(w, "| server | load | metric | measured | predictor | error | live | error |\n")
	fmt.Fprintf(w, "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |\n")
	for _, p := range validatePairs(rows) {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", p.server, p.load, p.metric,
			validateValue(p.metric, measuredOf(p)), validateValue(p.metric, predictedOf(p.pred)), validateError(p.pred),
			validateValue(p.metric, predictedOf(p.live)), validateError(p.live))
	}
	fmt.Fprintln(w)
	writeValidateLegend(w)
}

func writeValidateLegend(w io.Writer) {
	fmt.Fprintf(w, "Error = (predicted − measured) ÷ measured; \"!\" marks a goal metric (goodput, E2E, TPOT) outside ±%.0f %%; a TTFT under %.0f ms is judged by its absolute error. Output tokens are counted as generated (usage) on every side.\n",
		100*fit.ValidateGoal, 1000*fit.SmallTTFTS)
}
