package benchcmd

import (
	"strconv"

	"github.com/spf13/pflag"

	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/contract"
)

// SLO is --slo and --attainment, shared by bench and run.
type SLO struct {
	expr       string
	attainment float64
	// attainmentSet is whether --attainment was given.
	attainmentSet bool
}

// Flags binds --slo and --attainment to o; overrides says they replace
// a rehearsal file's slo: (run).
func (o *SLO) Flags(f *pflag.FlagSet, overrides bool) {
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

// NoteChanged records which flags were given.
func (o *SLO) NoteChanged(f *pflag.FlagSet) { o.attainmentSet = f.Changed("attainment") }

// Args are the flags given, as provenance records the command.
func (o *SLO) Args() []string {
	var out []string
	if o.expr != "" {
		out = append(out, "--slo="+o.expr)
	}
	if o.attainmentSet {
		out = append(out, "--attainment="+strconv.FormatFloat(o.attainment, 'g', -1, 64))
	}
	return out
}

// Apply checks the flags and sets cfg.SLO from them: --slo replaces the
// file's objectives, --attainment its target (or the default's).
func (o *SLO) Apply(cfg *config.Rehearsal) error {
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
