package config

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/rehearse/rehearse/internal/endpoint"
	"github.com/rehearse/rehearse/internal/workload"
)

// Problems is every problem found in a rehearsal, each with the field path
// it is about. Error() lists them one per line, each as "path: message".
type Problems struct {
	File  string
	Items []Problem
}

// Problem is one problem of a rehearsal: the field path it is about (empty
// for the whole file) and what is wrong there. A command that builds its
// rehearsal from flags renders Path as the flag that set it.
type Problem struct {
	Path string
	Msg  string
}

func (p Problem) String() string {
	if p.Path == "" {
		return p.Msg
	}
	return p.Path + ": " + p.Msg
}

func (p *Problems) Error() string {
	name := p.File
	if name == "" {
		name = "rehearsal"
	}
	if len(p.Items) == 1 {
		return name + ": " + p.Items[0].String()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d problems:", name, len(p.Items))
	for _, it := range p.Items {
		b.WriteString("\n  ")
		b.WriteString(it.String())
	}
	return b.String()
}

func (p *Problems) add(path, format string, a ...any) {
	p.Items = append(p.Items, Problem{Path: path, Msg: fmt.Sprintf(format, a...)})
}

// extraBodyReserved are the request fields rehearse sets itself, each with
// where the workload sets it; extra_body must not override them (the body is
// extra_body merged over rehearse's own, so "stream": false would silently
// turn streaming off).
var extraBodyReserved = map[string]string{
	"model":       "it comes from the server's model",
	"messages":    "they come from workload.prompts",
	"stream":      "rehearse always streams",
	"max_tokens":  "set workload.max_tokens (--max-tokens) instead",
	"temperature": "set workload.temperature (--temperature) instead",
}

// ExtraBodyError names a key of extra_body that rehearse sets itself.
type ExtraBodyError struct {
	Key string
	Why string
}

func (e *ExtraBodyError) Error() string {
	return fmt.Sprintf("%q is set by rehearse and cannot be overridden (%s)", e.Key, e.Why)
}

// CheckExtraBody returns the keys of an extra request body that rehearse
// sets itself, in key order. Both `run` (workload.extra_body) and `bench`
// (--extra-body) check with it.
func CheckExtraBody(body map[string]any) []*ExtraBodyError {
	var out []*ExtraBodyError
	keys := make([]string, 0, len(body))
	for k := range body {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if why, ok := extraBodyReserved[k]; ok {
			out = append(out, &ExtraBodyError{Key: k, Why: why})
		}
	}
	return out
}

// IndexProblem is what is wrong with one element of a list.
type IndexProblem struct {
	Index int
	Msg   string
}

// CheckConcurrencies lists what is wrong with a list of concurrencies (a
// value below 1, a value given twice), for workload.concurrencies and
// bench's --concurrency alike.
func CheckConcurrencies(cs []int) []IndexProblem {
	var out []IndexProblem
	seen := map[int]bool{}
	for i, c := range cs {
		if c < 1 {
			out = append(out, IndexProblem{i, fmt.Sprintf("%d: must be at least 1", c)})
		} else if seen[c] {
			out = append(out, IndexProblem{i, fmt.Sprintf("%d appears twice", c)})
		}
		seen[c] = true
	}
	return out
}

// CheckArrival checks an open-loop arrival process and its burstiness with
// the rule the schedule itself applies (workload.NewSchedule), for
// workload.open_loop and bench's --arrival/--burstiness alike.
func CheckArrival(arrival string, burstiness float64) error {
	_, err := workload.NewSchedule(arrival, 1, burstiness, 0)
	return err
}

// APIKey reads the API key from the environment variable env: an empty
// value is refused as an unset one is (an empty bearer token is a
// misconfiguration, not "no key"), for api_key_env and --api-key-env alike.
func APIKey(env string) (string, error) {
	v, ok := os.LookupEnv(env)
	switch {
	case !ok:
		return "", fmt.Errorf("the variable is not set")
	case v == "":
		return "", fmt.Errorf("the variable is empty")
	}
	return v, nil
}

// Load reads, defaults and validates the rehearsal file at path. Relative
// paths inside it (prompts file, tokenizer path, output dir) are resolved
// against the file's folder. A *Problems error lists every problem found.
func Load(path string) (*Rehearsal, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s: no such rehearsal file", path)
		}
		return nil, err
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	return Parse(data, path, dir)
}

// Parse reads a rehearsal from YAML bytes; name labels errors and dir
// resolves relative paths.
func Parse(data []byte, name, dir string) (*Rehearsal, error) {
	probs := &Problems{File: name}
	var generic any
	if err := yaml.Unmarshal(data, &generic); err != nil {
		probs.add("", "not valid YAML: %s", oneLine(err))
		return nil, probs
	}
	if generic == nil {
		probs.add("", "empty rehearsal file (it needs at least servers:)")
		return nil, probs
	}
	if !checkShape(reflect.TypeFor[Rehearsal](), generic, "", probs) {
		return nil, probs
	}
	if len(probs.Items) > 0 {
		// checkShape removed what it reported: decode the rest, so that the
		// meaning of the file is checked too and every problem comes at once.
		pruned, err := yaml.Marshal(generic)
		if err != nil {
			return nil, probs
		}
		data = pruned
	}
	var r Rehearsal
	if err := yaml.UnmarshalWithOptions(data, &r, yaml.DisallowUnknownField()); err != nil {
		probs.add("", "%s", oneLine(err))
		return nil, probs
	}
	r.Path, r.Dir = name, dir
	raw, _ := generic.(map[string]any)
	r.applyDefaults(raw)
	r.validate(probs)
	if len(probs.Items) > 0 {
		return nil, probs
	}
	return &r, nil
}

// Validate checks a rehearsal built by other means than Parse (a command's
// flags) with the rules a rehearsal file is held to, defaults applied: one
// validation for every config. A *Problems error lists every problem, each
// with its field path, for the caller to name as the user wrote it.
func (r *Rehearsal) Validate() error {
	probs := &Problems{File: r.Path}
	r.validate(probs)
	if len(probs.Items) > 0 {
		return probs
	}
	return nil
}

func oneLine(err error) string {
	s := strings.TrimSpace(err.Error())
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

var (
	durationType = reflect.TypeFor[Duration]()
	sloType      = reflect.TypeFor[SLO]()
	promptsType  = reflect.TypeFor[Prompts]()
	thinkType    = reflect.TypeFor[ThinkTime]()

	promptsMappingType = reflect.TypeFor[promptsMapping]()
)

// checkShape walks the generic YAML value against the Go type, reporting
// unknown keys and values of the wrong kind with their paths. It removes what
// it reports from the mappings it walks, so that the rest of the file can
// still be decoded and validated (every problem at once); it returns false
// when v itself is of the wrong kind and its parent should drop it.
func checkShape(t reflect.Type, v any, path string, probs *Problems) bool {
	if v == nil {
		return true
	}
	if ok, special := checkSpecial(t, v, path, probs); special {
		return ok
	}
	switch t.Kind() {
	case reflect.Pointer:
		return checkShape(t.Elem(), v, path, probs)
	case reflect.Struct:
		return checkStruct(t, v, path, probs)
	case reflect.Slice:
		s, ok := v.([]any)
		if !ok {
			probs.add(path, "want a list, got %s", describe(v))
			return false
		}
		for i, e := range s {
			if !checkShape(t.Elem(), e, fmt.Sprintf("%s[%d]", path, i), probs) {
				ok = false
			}
		}
		return ok
	case reflect.Map:
		return checkMap(t, v, path, probs)
	}
	return checkScalar(t.Kind(), v, path, probs)
}

// checkSpecial is checkShape for the types a YAML value of several forms
// decodes into (an SLO string or mapping, a duration, a think time, the
// prompts); special is false for any other type.
func checkSpecial(t reflect.Type, v any, path string, probs *Problems) (ok, special bool) {
	switch t {
	case sloType:
		if _, key, err := parseSLO(v); err != nil {
			if key != "" {
				path = join(path, key)
			}
			probs.add(path, "%v", err)
			return false, true
		}
		return true, true
	case durationType:
		if _, err := parseDuration(v); err != nil {
			probs.add(path, "%v", err)
			return false, true
		}
		return true, true
	case thinkType:
		if m, isMap := v.(map[string]any); isMap {
			return checkShape(reflect.TypeFor[thinkTimeMapping](), m, path, probs), true
		}
		return checkShape(durationType, v, path, probs), true
	case promptsType:
		return checkPrompts(v, path, probs), true
	}
	return false, false
}

// checkPrompts checks the prompts: a file name, a list of strings or a
// mapping.
func checkPrompts(v any, path string, probs *Problems) bool {
	switch x := v.(type) {
	case string:
	case []any:
		ok := true
		for i, e := range x {
			if _, isString := e.(string); !isString {
				probs.add(fmt.Sprintf("%s[%d]", path, i), "want a string, got %s", describe(e))
				ok = false
			}
		}
		return ok
	case map[string]any:
		return checkShape(promptsMappingType, x, path, probs)
	default:
		probs.add(path, "want a file name, a list of prompts or a mapping with source:, got %s", describe(v))
		return false
	}
	return true
}

// checkStruct checks a mapping against struct type t's yaml keys,
// dropping the unknown keys and the values of the wrong kind.
func checkStruct(t reflect.Type, v any, path string, probs *Problems) bool {
	m, ok := v.(map[string]any)
	if !ok {
		probs.add(path, "want a mapping, got %s", describe(v))
		return false
	}
	fields := map[string]reflect.Type{}
	var known []string
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if tag == "" || tag == "-" {
			continue
		}
		fields[tag] = f.Type
		known = append(known, tag)
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		ft, ok := fields[k]
		if !ok {
			probs.add(join(path, k), "unknown key (known: %s)", strings.Join(known, ", "))
			delete(m, k)
			continue
		}
		if !checkShape(ft, m[k], join(path, k), probs) {
			delete(m, k)
		}
	}
	return true
}

// checkMap checks a mapping against map type t: its values against t's
// element type, or, for plain values, that none is a mapping or a list.
func checkMap(t reflect.Type, v any, path string, probs *Problems) bool {
	m, ok := v.(map[string]any)
	if !ok {
		probs.add(path, "want a mapping, got %s", describe(v))
		return false
	}
	switch t.Elem().Kind() {
	case reflect.Interface:
		return true
	case reflect.Struct:
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if !checkShape(t.Elem(), m[k], join(path, k), probs) {
				delete(m, k)
			}
		}
		return true
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		switch m[k].(type) {
		case map[string]any, []any:
			probs.add(join(path, k), "want a plain value, got %s", describe(m[k]))
			delete(m, k)
		}
	}
	return true
}

// checkScalar checks a plain value against kind.
func checkScalar(kind reflect.Kind, v any, path string, probs *Problems) bool {
	switch kind {
	case reflect.String:
		switch v.(type) {
		case map[string]any, []any:
			probs.add(path, "want a string, got %s", describe(v))
			return false
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			probs.add(path, "want true or false, got %s", describe(v))
			return false
		}
	case reflect.Int, reflect.Int64:
		switch x := v.(type) {
		case uint64, int64:
		case float64:
			if x != math.Trunc(x) {
				probs.add(path, "want a whole number, got %v", x)
				return false
			}
		default:
			probs.add(path, "want a whole number, got %s", describe(v))
			return false
		}
	case reflect.Float64:
		switch v.(type) {
		case uint64, int64, float64:
		default:
			probs.add(path, "want a number, got %s", describe(v))
			return false
		}
	}
	return true
}

func describe(v any) string {
	switch x := v.(type) {
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case string:
		return fmt.Sprintf("%q", x)
	case nil:
		return "nothing"
	}
	return fmt.Sprintf("%v", v)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func (r *Rehearsal) applyDefaults(raw map[string]any) {
	for i := range r.Servers {
		r.Servers[i].applyDefaults(r.Model.ID)
	}
	if r.Baseline == "" && len(r.Servers) >= 2 {
		r.Baseline = r.Servers[0].Name
	}
	if r.Cost != nil {
		r.Cost.applyDefaults()
	}
	r.applyWorkloadDefaults()
	w := &r.Workload
	if w.Prompts.File != "" && !filepath.IsAbs(w.Prompts.File) {
		w.Prompts.File = filepath.Join(r.Dir, w.Prompts.File)
	}
	if r.Tokenizer.Path != "" && !filepath.IsAbs(r.Tokenizer.Path) {
		r.Tokenizer.Path = filepath.Join(r.Dir, r.Tokenizer.Path)
	}
	if r.Output.Dir != "" && !filepath.IsAbs(r.Output.Dir) {
		r.Output.Dir = filepath.Join(r.Dir, r.Output.Dir)
	}
	if r.OnServerFailure == "" {
		r.OnServerFailure = OnFailureContinue
	}
	r.applyMechanismDefaults(raw)
}

// applyDefaults fills server s's readiness, metrics, model (modelID where
// it names none), stop grace and replicas.
func (s *Server) applyDefaults(modelID string) {
	if s.Ready.Path == "" {
		s.Ready.Path = DefaultReadyPath
	}
	if s.Ready.Mode == "" {
		s.Ready.Mode = ReadyFull
	}
	if s.Ready.Timeout == 0 {
		s.Ready.Timeout = Duration(DefaultReadyTimeout)
		if !s.Launched() {
			s.Ready.Timeout = Duration(DefaultRunningReadyTimeout)
		}
	}
	if s.Metrics.Path == "" {
		s.Metrics.Path = DefaultMetricsPath
	}
	if s.Metrics.Metric == "" {
		s.Metrics.Metric = DefaultMetric
	}
	if s.Model == "" {
		s.Model = modelID
	}
	if s.StopGrace == 0 {
		s.StopGrace = Duration(DefaultStopGrace)
	}
	s.BaseURL = strings.TrimRight(s.BaseURL, "/")
	s.applyReplicaDefaults()
}

// applyWorkloadDefaults fills workload: (and the capacity search's
// defaults, which decide whether fixed concurrencies run).
func (r *Rehearsal) applyWorkloadDefaults() {
	w := &r.Workload
	if r.Capacity != nil {
		alpha := 0.0
		if r.SLO != nil {
			alpha = r.SLO.Attainment
		}
		r.Capacity.ApplyDefaults(alpha)
		if w.Concurrencies == nil {
			// A capacity rehearsal probes loads of its own; waves at
			// fixed concurrencies run only when asked for.
			w.Concurrencies = []int{}
		}
	}
	if w.Concurrencies == nil {
		w.Concurrencies = append([]int(nil), DefaultConcurrencies...)
	}
	if w.Repeats == 0 {
		w.Repeats = DefaultRepeats
	}
	if w.MaxTokens == 0 {
		w.MaxTokens = DefaultMaxTokens
	}
	if w.Temperature == nil {
		zero := 0.0
		w.Temperature = &zero
	}
	if w.Timeout == 0 {
		w.Timeout = Duration(DefaultTimeout)
	}
	if w.Endpoint == "" {
		w.Endpoint = DefaultEndpoint
	}
	if w.IncludeUsage == nil {
		yes := true
		w.IncludeUsage = &yes
	}
	if w.Mode == "" {
		w.Mode = DefaultMode
	}
	if m := w.Models; m != nil && m.Assignment == "" {
		m.Assignment = VLLMDefaultLoRAAssignment
	}
	if sp := w.SideProbes; sp != nil {
		sp.ApplyDefaults()
	}
	if w.Mode == ModeSustained {
		if w.Sustained == nil {
			w.Sustained = &Sustained{WarmupRequests: DefaultSustainedWarmupRequests}
		}
		if w.Sustained.NumRequests == 0 && w.Sustained.Duration == 0 {
			w.Sustained.NumRequests = DefaultSustainedNumRequests
		}
	}
}

// applyMechanismDefaults fills mechanism_check: (its server, evidence,
// metric, clients and period), or removes it where it is turned off or has
// no server to check.
func (r *Rehearsal) applyMechanismDefaults(raw map[string]any) {
	w := &r.Workload
	if _, given := raw["mechanism_check"]; !given || r.MechanismCheck == nil {
		r.MechanismCheck = &MechanismCheck{}
		if given {
			// mechanism_check: ~ turns it off.
			r.MechanismCheck.Disabled = true
		}
	}
	m := r.MechanismCheck
	if m.Server == "" {
		for _, s := range r.Servers {
			if s.Name != r.Baseline {
				m.Server = s.Name
				break
			}
		}
		if m.Server == "" && len(r.Servers) > 0 {
			m.Server = r.Servers[0].Name
		}
	}
	if m.Evidence == "" {
		m.Evidence = EvidenceMetric
	}
	if m.Metric == "" && m.Evidence == EvidenceMetric {
		for _, s := range r.Servers {
			if s.Name == m.Server {
				m.Metric = s.Metrics.Metric
			}
		}
	}
	if m.Concurrency == 0 {
		for _, c := range w.Concurrencies {
			m.Concurrency = max(m.Concurrency, c)
		}
		if m.Concurrency == 0 {
			// An open-loop-only rehearsal: the seed's largest wave.
			m.Concurrency = 64
		}
	}
	if m.Period == 0 {
		m.Period = Duration(DefaultMechanismEvery)
	}
	if m.Disabled || m.Server == "" {
		r.MechanismCheck = nil
	}
}

func (r *Rehearsal) validate(p *Problems) {
	if len(r.Servers) == 0 {
		p.add("servers", "none given (a rehearsal needs at least one server)")
	}
	names := map[string]int{}
	for i, s := range r.Servers {
		at := fmt.Sprintf("servers[%d]", i)
		switch {
		case s.Name == "":
			p.add(at+".name", "empty")
		case !serverNameRE.MatchString(s.Name):
			p.add(at+".name", "%q: use letters, digits, '.', '_' or '-' (it names the log file)", s.Name)
		default:
			if j, dup := names[s.Name]; dup {
				p.add(at+".name", "%q already names servers[%d]", s.Name, j)
			} else {
				names[s.Name] = i
			}
		}
		validateServer(at, s, p)
	}
	checkLogNames(r.Servers, p)
	if r.Baseline != "" {
		if _, ok := names[r.Baseline]; !ok && len(names) > 0 {
			p.add("baseline", "%q names no server (servers: %s)", r.Baseline, strings.Join(sortedKeys(names), ", "))
		}
	}
	r.validateWorkload(names, p)
	r.validateMechanismCheck(names, p)
	r.Tokenizer.validate(p)
	switch r.OnServerFailure {
	case OnFailureContinue, OnFailureStop:
	default:
		p.add("on_server_failure", "%q: want continue or stop", r.OnServerFailure)
	}
}

// validateServer checks servers[i] (at) beyond its name.
func validateServer(at string, s Server, p *Problems) {
	if s.Launch != nil && len(s.Launch) == 0 {
		p.add(at+".launch", "empty")
	}
	for j, a := range s.Launch {
		if j == 0 && strings.TrimSpace(a) == "" {
			p.add(fmt.Sprintf("%s.launch[%d]", at, j), "empty program name")
		}
	}
	if s.Launch == nil && s.BaseURL == "" {
		p.add(at, "needs launch (an argv to start it) or base_url (a server already running)")
	}
	if s.BaseURL != "" && len(s.BaseURLs) == 0 {
		u, err := url.Parse(s.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			p.add(at+".base_url", "%q is not an http(s) URL", s.BaseURL)
		}
	}
	if s.Port < 0 || s.Port > 65535 {
		p.add(at+".port", "%d is not a port (0 picks a free one)", s.Port)
	}
	if !s.Launched() && s.Port != 0 {
		p.add(at+".port", "only meaningful for a launched server (put the port in base_url)")
	}
	if s.Launched() && s.Port == 0 {
		hasPlaceholder := strings.Contains(strings.Join(s.Launch, " "), "{port}") ||
			slices.ContainsFunc(slices.Collect(maps.Values(s.Env)), func(v string) bool { return strings.Contains(v, "{port}") })
		switch {
		case s.BaseURL != "":
			p.add(at+".port", "0, but base_url is given: a launched server with a base_url needs its port set")
		case !hasPlaceholder:
			p.add(at+".launch", "no {port} placeholder (in launch or env) and no port: rehearse cannot know where the server listens")
		}
	}
	keys := make([]string, 0, len(s.Env))
	for k := range s.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !envNameRE.MatchString(k) {
			p.add(at+".env", "%q is not an environment variable name", k)
		}
	}
	if s.APIKeyEnv != "" && !envNameRE.MatchString(s.APIKeyEnv) {
		p.add(at+".api_key_env", "%q is not an environment variable name", s.APIKeyEnv)
	}
	if !strings.HasPrefix(s.Ready.Path, "/") {
		p.add(at+".ready.path", "%q must start with /", s.Ready.Path)
	}
	switch s.Ready.Mode {
	case ReadyFull, ReadyModels, ReadyAnswer:
	default:
		p.add(at+".ready.mode", "%q: want full, models or answer", s.Ready.Mode)
	}
	if s.Ready.Timeout < 0 {
		p.add(at+".ready.timeout", "%v is negative", s.Ready.Timeout)
	}
	if !strings.HasPrefix(s.Metrics.Path, "/") {
		p.add(at+".metrics.path", "%q must start with /", s.Metrics.Path)
	}
	if s.StopGrace < 0 {
		p.add(at+".stop_grace", "%v is negative", s.StopGrace)
	}
	if s.Model == "" {
		p.add(at+".model", "empty, and model.id is not set either (the model name to request)")
	}
	if s.MaxModelLen < 0 {
		p.add(at+".max_model_len", "%d: must be 0 (unknown) or more", s.MaxModelLen)
	}
	validateReplicas(at, s, p)
	validatePrepare(at, s, p)
}

// validateWorkload checks workload: and the sections that shape what is
// sent (capacity, cost, segment, open loop).
func (r *Rehearsal) validateWorkload(names map[string]int, p *Problems) {
	w := r.Workload
	if len(w.Concurrencies) == 0 && w.OpenLoop == nil && r.Capacity == nil {
		p.add("workload.concurrencies", "empty (and no open_loop or capacity: nothing to send)")
	}
	for _, e := range CheckConcurrencies(w.Concurrencies) {
		p.add(fmt.Sprintf("workload.concurrencies[%d]", e.Index), "%s", e.Msg)
	}
	if w.Repeats < 1 {
		p.add("workload.repeats", "%d: must be at least 1", w.Repeats)
	}
	if w.MaxTokens < 1 {
		p.add("workload.max_tokens", "%d: must be at least 1", w.MaxTokens)
	}
	if t := *w.Temperature; t < 0 || math.IsNaN(t) {
		p.add("workload.temperature", "%v: must be 0 or more", t)
	}
	if w.Timeout <= 0 {
		p.add("workload.timeout", "%v: must be positive", w.Timeout)
	}
	if w.WarmupWaves < 0 {
		p.add("workload.warmup_waves", "%d: must be 0 or more", w.WarmupWaves)
	}
	if w.WarmupWavesPerLoad < 0 {
		p.add("workload.warmup_waves_per_load", "%d: must be 0 or more", w.WarmupWavesPerLoad)
	}
	if w.WarmupConcurrency < 0 {
		p.add("workload.warmup_concurrency", "%d: must be 1 or more (0: the first concurrency)", w.WarmupConcurrency)
	}
	if !strings.HasPrefix(w.Endpoint, "/") {
		p.add("workload.endpoint", "%q must start with /", w.Endpoint)
	}
	if endpoint.IsCompletions(w.Endpoint) {
		// The completions API takes one prompt: no history, no messages.
		if w.Sessions != nil {
			p.add("workload.sessions", "multi-turn sessions need the chat API, and the endpoint %q is the completions API (use %s)", w.Endpoint, DefaultEndpoint)
		}
		if w.Prompts.Source == workload.SourceChatJSONL {
			p.add("workload.prompts.source", "%s prompts are chat messages, and the endpoint %q is the completions API (use %s)", w.Prompts.Source, w.Endpoint, DefaultEndpoint)
		}
	}
	for _, e := range CheckExtraBody(w.ExtraBody) {
		if e.Key == "temperature" && w.BodyStyle == endpoint.StyleVLLM {
			continue // vLLM's body has no temperature of its own: its sampling flags set it here
		}
		p.add("workload.extra_body."+e.Key, "%s", e.Error())
	}
	validateVLLMWorkload(w, p)
	r.validateApart(p)
	if w.Prompts.Inline != nil && len(w.Prompts.Inline) == 0 {
		p.add("workload.prompts", "empty list")
	}
	for i, s := range w.Prompts.Inline {
		if strings.TrimSpace(s) == "" {
			p.add(fmt.Sprintf("workload.prompts[%d]", i), "empty prompt")
		}
	}
	validatePrompts(w.Prompts, p)
	validateSustained(w, p)
	validateSessions(w, p)
	r.validateCapacity(names, p)
	r.validateCost(p)
	r.validateSegment(p)
	validateOpenLoop(w, p)
}

// validateMechanismCheck checks mechanism_check:, when given.
func (r *Rehearsal) validateMechanismCheck(names map[string]int, p *Problems) {
	m := r.MechanismCheck
	if m == nil {
		return
	}
	if _, ok := names[m.Server]; !ok && len(names) > 0 {
		p.add("mechanism_check.server", "%q names no server (servers: %s)", m.Server, strings.Join(sortedKeys(names), ", "))
	}
	if m.Concurrency < 1 {
		p.add("mechanism_check.concurrency", "%d: must be at least 1", m.Concurrency)
	}
	if m.Period <= 0 || m.Period.D() < time.Millisecond {
		p.add("mechanism_check.period", "%v: must be at least 1ms", m.Period)
	}
	switch {
	case m.Evidence != EvidenceMetric && m.Evidence != EvidenceClient:
		p.add("mechanism_check.evidence", "%q: must be %s (the server's metric, polled) or %s (the client's records of the wave, no metric read)", m.Evidence, EvidenceMetric, EvidenceClient)
	case m.Evidence == EvidenceMetric && m.Metric == "":
		p.add("mechanism_check.metric", "empty")
	case m.Evidence == EvidenceClient && m.Metric != "":
		p.add("mechanism_check.metric", "%q: no metric is read with evidence %s (the client's records of the wave); leave it out", m.Metric, EvidenceClient)
	}
}

// validate checks tokenizer: (path, model and revision, or variant).
func (t Tokenizer) validate(p *Problems) {
	if t.Path != "" {
		if t.Model != "" || t.Variant != "" {
			p.add("tokenizer", "give path, or model (and revision), or variant; not several")
		}
		if _, err := os.Stat(t.Path); err != nil {
			p.add("tokenizer.path", "%s: no such file", t.Path)
		}
	} else if t.Model != "" && t.Variant != "" {
		p.add("tokenizer", "give model (and revision) or variant, not both")
	}
	if t.Revision != "" && t.Model == "" {
		p.add("tokenizer.revision", "given without tokenizer.model")
	}
}

// Synthetic is the synthetic source's parameters; absent lengths are the
// zero Length, which its Check refuses.
func (p Prompts) Synthetic() workload.Synthetic {
	s := workload.Synthetic{Count: p.Count, Seed: p.Seed, IgnoreEOS: p.IgnoreEOS, PrefixLen: p.PrefixLen}
	if l := p.InputLen; l != nil {
		s.InputLen = workload.Length{Fixed: l.Fixed, Mean: l.Mean, RangeRatio: l.RangeRatio, SD: l.SD}
	}
	if l := p.OutputLen; l != nil {
		s.OutputLen = workload.Length{Fixed: l.Fixed, Mean: l.Mean, RangeRatio: l.RangeRatio, SD: l.SD}
	}
	return s
}

// Trace is the trace source's parameters.
func (p Prompts) Trace() workload.Trace {
	return workload.Trace{Format: p.Format, TimeScale: p.TimeScale, BlockSize: p.BlockSize, Count: p.Count, Seed: p.Seed, IgnoreEOS: p.IgnoreEOS}
}

// Name is the source the prompts resolve with (workload.Spec.Name).
func (p Prompts) Name() string {
	return workload.Spec{Source: p.Source, Inline: p.Inline, Path: p.File}.Name()
}

// PrefixRepetition is the prefix_repetition source's parameters; an
// absent output_len is the zero Length, which its Check refuses.
func (p Prompts) PrefixRepetition() workload.PrefixRepetition {
	r := workload.PrefixRepetition{NumPrefixes: p.NumPrefixes, PrefixLen: p.PrefixLen, SuffixLen: p.SuffixLen,
		Count: p.Count, Seed: p.Seed, IgnoreEOS: p.IgnoreEOS}
	if l := p.OutputLen; l != nil {
		r.OutputLen = workload.Length{Fixed: l.Fixed, Mean: l.Mean, RangeRatio: l.RangeRatio, SD: l.SD}
	}
	return r
}

// Spec is the prompt source as workload.Resolve takes it.
func (p Prompts) Spec() workload.Spec {
	spec := workload.Spec{Source: p.Source, Inline: p.Inline, Path: p.File}
	switch p.Source {
	case workload.SourceSynthetic:
		s := p.Synthetic()
		spec.Synthetic = &s
	case workload.SourcePrefixRepetition:
		p := p.PrefixRepetition()
		spec.Prefix = &p
	case workload.SourceShareGPT, workload.SourceChatJSONL:
		spec.Dataset = &workload.Dataset{UseOutputLen: p.UseOutputLen, MaxModelLen: p.MaxModelLen, Count: p.Count, Order: p.Order, Seed: p.Seed}
		if p.OutputLen != nil {
			spec.Dataset.OutputLen = p.OutputLen.Fixed
		}
	case workload.SourceTrace:
		tr := p.Trace()
		spec.Trace = &tr
	}
	return spec
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Server returns the server named name.
func (r *Rehearsal) Server(name string) (Server, bool) {
	for _, s := range r.Servers {
		if s.Name == name {
			return s, true
		}
	}
	return Server{}, false
}
