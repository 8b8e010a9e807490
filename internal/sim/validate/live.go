package validate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/goccy/go-yaml"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/exitcode"
	"github.com/rehearse/rehearse/internal/rehearsal"
	"github.com/rehearse/rehearse/internal/sim/fit"
)

// live sends the held-out loads of the bundle's workload to rehearse sim
// with each fitted profile, through the one runner, and adds the live rows
// to each validation.
func (o Options) live(ctx context.Context, res *bundle.Results, vals []*fit.Validation) error {
	work, err := os.MkdirTemp("", "rehearse-sim-validate-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	dir := o.LiveBundle
	if dir == "" {
		dir = filepath.Join(work, "live")
	}
	rc, err := o.liveConfig(res, vals, work)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Stderr, "rehearse sim validate: live run of the held-out waves at time scale %g, bundle %s\n", o.TimeScale, dir)
	out, err := runLive(ctx, rehearsal.Job{Rehearsal: rc, Dir: dir,
		Command: append(o.command(), serverFlags(vals)...),
		Notes:   []string{"The live run of rehearse sim validate: the held-out waves of " + o.Bundle + " against rehearse sim with profiles fitted on its waves at " + o.FitOn + "."},
	})
	if err != nil {
		return err
	}
	for _, v := range vals {
		if err := v.AddLive(out.Results.Waves, out.Results.Records, v.Server, o.TimeScale); err != nil {
			return err
		}
	}
	return nil
}

// runLive runs the live rehearsal through the one runner, as rehearse run
// does (its prompts and tokenizer, the runner, the report, verify): a
// refusal before any work exits 2, a finished rehearsal's failure is
// rehearse run's.
func runLive(ctx context.Context, job rehearsal.Job) (*rehearsal.Outcome, error) {
	job.Fail = func(err error) error {
		return &exitcode.Error{Code: 2, Err: fmt.Errorf("sim validate: live run: %w", err)}
	}
	r, err := rehearsal.Rehearse(ctx, job)
	if err != nil {
		return nil, err
	}
	if err := r.Err(job.Dir); err != nil {
		return nil, err
	}
	return r.Outcome, nil
}

// liveConfig is the live run's rehearsal (fit.LiveConfig), parsed as a
// rehearsal file is and converted to the time scale.
func (o Options) liveConfig(res *bundle.Results, vals []*fit.Validation, work string) (*config.Rehearsal, error) {
	cfg, err := fit.LiveConfig(res, vals, work, o.TimeScale)
	if nl, ok := errors.AsType[*fit.NoLiveError](err); ok {
		return nil, usage("%s", nl)
	}
	if err != nil {
		return nil, err
	}
	cwd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	rc, err := config.Parse(data, "the live run of sim validate", cwd)
	if err != nil {
		return nil, fmt.Errorf("sim validate: the live run's rehearsal: %w", err)
	}
	if err := rehearsal.ScaleSimulated(rc, o.TimeScale); err != nil {
		return nil, err
	}
	// Scale converts the client timeout; the sustained duration and the
	// open-loop rates and duration are converted here.
	k := o.TimeScale
	if su := rc.Workload.Sustained; su != nil {
		su.Duration = config.Duration(float64(su.Duration) / k)
	}
	if op := rc.Workload.OpenLoop; op != nil {
		op.Duration = config.Duration(float64(op.Duration) / k)
		for i := range op.RequestRatesRPS {
			op.RequestRatesRPS[i] *= k
		}
		if r := op.Ramp; r != nil {
			r.StartRPS *= k
			r.EndRPS *= k
		}
	}
	return rc, nil
}

// command is the command line a live bundle records.
func (o Options) command() []string {
	out := []string{"rehearse", "sim", "validate", o.Bundle, "--fit-on", o.FitOn, "--hold-out", o.HoldOut}
	if o.HoldBundle != "" {
		out = append(out, "--hold-out-bundle", o.HoldBundle)
	}
	if o.Jitter {
		out = append(out, "--fit-jitter")
	}
	return append(out, "--time-scale", strconv.FormatFloat(o.TimeScale, 'g', -1, 64))
}

// serverFlags are the --server flags of the validations, for the command
// line.
func serverFlags(vals []*fit.Validation) []string {
	var out []string
	for _, v := range vals {
		out = append(out, "--server", v.Server+"="+v.Fit.Profile.Engine)
	}
	return out
}
