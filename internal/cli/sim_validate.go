package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/spf13/cobra"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/rehearsal"
	"github.com/rehearse/rehearse/internal/sim/engine"
	"github.com/rehearse/rehearse/internal/sim/fit"
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
	if n := fit.InSimulatedTime(res, "the bundle", o.timeScale); n != "" {
		notes = append(notes, n)
	}
	hold := res
	if o.holdBundle != "" {
		if hold, err = bundle.ReadResults(o.holdBundle); err != nil {
			return usageError("sim validate: --hold-out-bundle: %v", err)
		}
		if n := fit.InSimulatedTime(hold, "the held-out bundle", o.timeScale); n != "" {
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
	default:
		fit.WriteTable(w, rows, o.markdown)
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
	cfg, err := fit.LiveConfig(res, vals, work, o.timeScale)
	if nl, ok := errors.AsType[*fit.NoLiveError](err); ok {
		return usageError("%s", nl)
	}
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
