package cli

import (
	"strconv"

	"github.com/spf13/pflag"

	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/contract"
)

// sloOptions are --slo and --attainment, shared by bench and run.
type sloOptions struct {
	expr       string
	attainment float64
	// attainmentSet is whether --attainment was given.
	attainmentSet bool
}

func sloFlags(f *pflag.FlagSet, o *sloOptions, overrides bool) {
	what := ""
	if overrides {
		what = " (replaces the file's slo:)"
	}
	f.StringVar(&o.expr, "slo", "", "per-request objectives, e.g. 'ttft<=500ms,tpot<=50ms' (ttft, tpot, itl, e2el; units ms or s): adds SLO attainment and request goodput per load"+what)
	target := "attainment target α of --slo, between 0 and 1 (exclusive)"
	if overrides {
		target += ", replacing the file's slo.attainment"
	}
	f.Float64Var(&o.attainment, "attainment", contract.DefaultAttainment, target)
}

// noteChanged records which flags were given.
func (o *sloOptions) noteChanged(f *pflag.FlagSet) { o.attainmentSet = f.Changed("attainment") }

// args are the flags given, as provenance records the command.
func (o *sloOptions) args() []string {
	var out []string
	if o.expr != "" {
		out = append(out, "--slo="+o.expr)
	}
	if o.attainmentSet {
		out = append(out, "--attainment="+strconv.FormatFloat(o.attainment, 'g', -1, 64))
	}
	return out
}

// apply checks the flags and sets cfg.SLO from them: --slo replaces the
// file's objectives, --attainment its target (or the default's).
func (o *sloOptions) apply(cfg *config.Rehearsal) error {
	if o.attainmentSet {
		if err := contract.CheckAttainmentTarget(o.attainment); err != nil {
			return usageError("--attainment: %v", err)
		}
	}
	if o.expr == "" {
		if !o.attainmentSet {
			return nil
		}
		if cfg.SLO == nil {
			return usageError("--attainment %v needs objectives: add --slo 'ttft<=500ms,tpot<=50ms'", o.attainment)
		}
		cfg.SLO.Attainment = o.attainment
		return nil
	}
	objs, err := contract.ParseObjectives(o.expr)
	if err != nil {
		return usageError("--slo %q: %v", o.expr, err)
	}
	alpha := contract.DefaultAttainment
	if cfg.SLO != nil {
		alpha = cfg.SLO.Attainment
	}
	if o.attainmentSet {
		alpha = o.attainment
	}
	cfg.SLO = &config.SLO{Objectives: objs, Attainment: alpha}
	return nil
}
