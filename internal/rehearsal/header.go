package rehearsal

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/chattemplate"
	"github.com/rehearse/rehearse/internal/config"
	"github.com/rehearse/rehearse/internal/tokenizer"
	"github.com/rehearse/rehearse/internal/workload"
)

// header is the bundle's header before any server ran: provenance, the
// workload as recorded (wl), the servers as configured (secrets redacted),
// notes.
func header(o Options, driver WaveDriver, wl bundle.Workload, start time.Time) *bundle.Results {
	cfg := o.Rehearsal
	res := &bundle.Results{
		Schema:     bundle.Schema,
		Provenance: o.Provenance,
		Workload:   wl,
		Notes:      append([]string(nil), o.Notes...),
		SLO:        cfg.SLO.Results(),
	}
	p := &res.Provenance
	p.StartedAt = start.UTC().Format(time.RFC3339Nano)
	p.Model = bundle.Model{ID: cfg.Model.ID, Revision: cfg.Model.Revision, Dtype: cfg.Model.Dtype, RandomWeights: cfg.Model.RandomWeights, Note: cfg.Model.Note}
	p.OutputTokensSource = driver.OutputTokensSource()
	if p.OutputTokensSource == bundle.SourceUsage {
		res.Notes = append(res.Notes, "output_tokens are the server's own usage.completion_tokens, not re-tokenized text")
	}
	if cfg.Baseline != "" {
		b := cfg.Baseline
		res.Baseline = &b
	}
	for _, s := range cfg.Servers {
		srv := bundle.Server{
			Name: s.Name, BaseURL: config.RedactURL(s.BaseURL), Model: s.Model, LaunchArgv: []string{},
			Env: config.RedactEnv(s.Env, s.APIKeyEnv), MetricsPath: s.Metrics.Path, Simulated: s.Simulated,
		}
		if s.Launched() {
			srv.LaunchArgv = config.RedactArgv(s.Launch)
		}
		for _, argv := range s.Prepare {
			srv.Prepare = append(srv.Prepare, config.RedactArgv(argv))
		}
		srv.GPUs, srv.Balance = s.GPUs, s.Balance
		if s.Router != nil {
			srv.Router = &bundle.Router{BaseURL: config.RedactURL(s.Router.BaseURL), LaunchArgv: config.RedactArgv(s.Router.Launch)}
		}
		res.Servers = append(res.Servers, srv)
	}
	res.Notes = append(res.Notes, cfg.Notes...)
	return res
}

// TimeScaleArg is the --time-scale argument of a launch argv.
type TimeScaleArg struct {
	// Index is the element holding the value.
	Index int
	// Joined is true for the form --time-scale=X.
	Joined bool
	Value  float64
}

// FindTimeScale finds the --time-scale argument of a launch argv, written
// "--time-scale X" or "--time-scale=X"; the last one counts, as in flag
// parsing. A value that is not a positive number is an error.
func FindTimeScale(argv []string) (TimeScaleArg, bool, error) {
	var a TimeScaleArg
	found := false
	var raw string
	for i, arg := range argv {
		if v, ok := strings.CutPrefix(arg, "--time-scale="); ok {
			a, raw, found = TimeScaleArg{Index: i, Joined: true}, v, true
		} else if arg == "--time-scale" && i+1 < len(argv) {
			a, raw, found = TimeScaleArg{Index: i + 1}, argv[i+1], true
		}
	}
	if !found {
		return a, false, nil
	}
	v, err := strconv.ParseFloat(raw, 64)
	if err != nil || v <= 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return a, true, fmt.Errorf("--time-scale %q is not a positive number", raw)
	}
	a.Value = v
	return a, true, nil
}

// With returns a copy of argv with k as the time scale.
func (a TimeScaleArg) With(argv []string, k float64) []string {
	out := append([]string(nil), argv...)
	v := strconv.FormatFloat(k, 'g', -1, 64)
	if a.Joined {
		v = "--time-scale=" + v
	}
	out[a.Index] = v
	return out
}

// Simulation describes the simulated servers of a rehearsal (those with
// `simulated:` set) for provenance, or nil when none is. The time scale is
// read from their --time-scale argument; when they disagree, or one has
// none, it is 0 and the note says so.
func Simulation(cfg *config.Rehearsal) *bundle.Simulation {
	sim := &bundle.Simulation{Profiles: map[string]string{}}
	var scales []float64
	var real []string
	for _, s := range cfg.Servers {
		if s.Simulated == "" {
			real = append(real, s.Name)
			continue
		}
		sim.Profiles[s.Name] = s.Simulated
		scale := 1.0
		if a, found, err := FindTimeScale(s.Launch); err != nil {
			scale = 0 // unknown: the note says the scales differ
		} else if found {
			scale = a.Value
		}
		scales = append(scales, scale)
	}
	if len(scales) == 0 {
		return nil
	}
	sim.TimeScale = scales[0]
	for _, k := range scales[1:] {
		if k != scales[0] {
			sim.TimeScale = 0
		}
	}
	names := make([]string, 0, len(sim.Profiles))
	for n := range sim.Profiles {
		names = append(names, n)
	}
	sort.Strings(names)
	switch {
	case sim.TimeScale == 0:
		sim.Note = fmt.Sprintf("Simulated servers %s ran at different time scales; compare their figures only in simulated time.", strings.Join(names, ", "))
	default:
		sim.Note = fmt.Sprintf("Servers %s were `rehearse sim` child processes on loopback ports, launched, driven and stopped by rehearse exactly as real servers are.", strings.Join(names, ", "))
	}
	if len(real) > 0 {
		sim.Note += fmt.Sprintf(" Servers %s were real.", strings.Join(real, ", "))
	}
	return sim
}

// Prompts resolves the workload's prompt source once (workload.Resolve):
// its prompts file, its inline list, the eight built-in prompts, or a named
// source; synthetic prompts are built, and the datasets' lengths counted,
// with the rehearsal's tokenizer tok (OpenTokenizer's; nil for usage). Where servers give
// max_model_len, the smallest is checked before any request is sent: the
// dataset sources skip and count the entries over it (as with their own
// max_model_len), and a prompt of any source still over it is refused
// (*workload.TooLongError); a length a source reads or draws past it is
// refused before its prompt is built. The error is the source's, without a field path
// (callers name the file or the flag).
func Prompts(cfg *config.Rehearsal, tok *tokenizer.Tokenizer) (workload.Set, error) {
	spec := cfg.Workload.Prompts.Spec()
	limit, server := ModelLen(cfg)
	if d := spec.Dataset; d != nil && limit > 0 && (d.MaxModelLen == 0 || d.MaxModelLen > limit) {
		d := *d
		d.MaxModelLen = limit
		spec.Dataset = &d
	}
	spec.Sessions = cfg.Workload.SessionsSpec()
	env := workload.Env{MaxModelLen: limit}
	counts := limit > 0
	switch spec.Name() {
	case workload.SourceSynthetic, workload.SourcePrefixRepetition, workload.SourceShareGPT, workload.SourceChatJSONL, workload.SourceTrace:
		counts = true
	}
	if counts && tok != nil {
		env.Tokenizer = tok
	}
	set, err := workload.Resolve(spec, env)
	if err == nil && cfg.Workload.Prompts.ChatTemplate {
		err = renderChat(&set, tok, cfg.Workload.Prompts.ChatTemplateKwargs)
	}
	if err != nil || limit == 0 {
		return set, err
	}
	if env.Tokenizer == nil {
		return workload.Set{}, fmt.Errorf("max_model_len %d of server %s: checking prompts against it needs the pinned tokenizer to count their tokens (tokenizer variant %q counts none)", limit, server, VariantUsage)
	}
	if e := workload.CheckModelLen(set.Prompts, cfg.Workload.MaxTokens, limit, server, env.Tokenizer); e != nil {
		return workload.Set{}, e
	}
	return set, nil
}

// ModelLen is the smallest max_model_len the servers give and the server
// giving it; 0 when none gives one.
func ModelLen(cfg *config.Rehearsal) (int, string) {
	limit, server := 0, ""
	for _, s := range cfg.Servers {
		if s.MaxModelLen > 0 && (limit == 0 || s.MaxModelLen < limit) {
			limit, server = s.MaxModelLen, s.Name
		}
	}
	return limit, server
}

// renderChat renders every prompt's text through the chat template of the
// tokenizer_config.json beside tok's tokenizer.json, as vLLM's custom
// dataset does before it counts and sends a prompt; the error is a
// *chattemplate.Error naming the file.
func renderChat(set *workload.Set, tok *tokenizer.Tokenizer, kwargs map[string]any) error {
	if tok == nil {
		return &chattemplate.Error{File: "tokenizer variant " + VariantUsage, Err: errors.New("no tokenizer_config.json to read a chat template from")}
	}
	source := tok.Info().Source
	if source == "embedded" {
		return &chattemplate.Error{File: "the embedded " + tok.Info().Name + " tokenizer.json", Err: errors.New("no tokenizer_config.json beside it, so no chat template (pass --tokenizer with the model's folder)")}
	}
	tmpl, err := chattemplate.Load(source)
	if err != nil {
		return err
	}
	for i := range set.Prompts {
		if set.Prompts[i].Text, err = tmpl.RenderUser(set.Prompts[i].Text, kwargs); err != nil {
			return err
		}
	}
	return nil
}

// ScaleSimulated rewrites a simulated rehearsal for time scale k: every
// server's --time-scale argument, and the client timeout and polling period,
// which the file states at its own scale, are converted through simulated
// time; so are the SLO's objectives and a capacity probe's time cap
// (rehearse demo --time-scale).
func ScaleSimulated(cfg *config.Rehearsal, k float64) error {
	fileScale := 0.0
	for i := range cfg.Servers {
		s := &cfg.Servers[i]
		a, found, err := FindTimeScale(s.Launch)
		if err != nil {
			return fmt.Errorf("servers[%d].launch: %v", i, err)
		}
		if !found {
			return fmt.Errorf("servers[%d].launch: no --time-scale argument to scale", i)
		}
		if fileScale != 0 && a.Value != fileScale {
			return fmt.Errorf("servers[%d].launch: --time-scale %g differs from the other servers' %g", i, a.Value, fileScale)
		}
		fileScale = a.Value
		s.Launch = a.With(s.Launch, k)
	}
	ratio := fileScale / k
	cfg.Workload.Timeout = config.Duration(float64(cfg.Workload.Timeout) * ratio)
	if m := cfg.MechanismCheck; m != nil {
		m.Period = config.Duration(max(float64(m.Period)*ratio, float64(time.Millisecond)))
	}
	if s := cfg.SLO; s != nil {
		s.Objectives = s.Objectives.Scaled(ratio)
	}
	if c := cfg.Capacity; c != nil {
		c.MaxDuration = config.Duration(float64(c.MaxDuration) * ratio)
	}
	return nil
}
