package fit

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
	"github.com/rehearse/rehearse/internal/tokenizer"
)

// InSimulatedTime reads a bundle of simulated servers at time scale k (the
// demo's) in simulated time, so the fit is the profiles' own: its waves and
// records (SlowedDown), and its workload's client timeout, sustained
// duration, open-loop rates, ramp and duration, and traced arrivals. It returns a note saying so,
// or "" for a bundle at time scale 1.
func InSimulatedTime(res *bundle.Results, what string, liveScale float64) string {
	s := res.Provenance.Simulation
	if s == nil || !(s.TimeScale > 0) || s.TimeScale == 1 {
		return ""
	}
	k := s.TimeScale
	res.Waves, res.Records = SlowedDown(res.Waves, res.Records, k)
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

// LiveConfig is the rehearsal file of the live run, at time scale
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
func LiveConfig(res *bundle.Results, vals []*Validation, work string, liveScale float64) (map[string]any, error) {
	servers, err := liveServers(vals, work)
	if err != nil {
		return nil, err
	}
	h := heldOutOf(vals)
	if err := h.check(); err != nil {
		return nil, err
	}
	workload, err := liveWorkload(res, h, work, liveScale)
	if err != nil {
		return nil, err
	}
	// The simulators emit tokens of the embedded Qwen file (rehearse sim's
	// tokenizer), so the live run counts with it: in the bundle's variant
	// where the bundle counted with the embedded file, else Qwen3's.
	variant := res.Provenance.Tokenizer.Variant
	if variant == "" {
		variant = tokenizer.VariantQwen3
	}
	return map[string]any{
		"model":           liveModel(res),
		"tokenizer":       map[string]any{"variant": variant},
		"baseline":        vals[0].Server,
		"servers":         servers,
		"workload":        workload,
		"mechanism_check": map[string]any{"disabled": true},
	}, nil
}

// liveServers are the live run's servers: one simulator per validation,
// launched with its fitted profile, written under work.
func liveServers(vals []*Validation, work string) ([]any, error) {
	var servers []any
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
	}
	return servers, nil
}

// heldOut is every validation's held-out loads together.
type heldOut struct {
	closed, sustained []int
	rates             []float64
	ramps             []contract.Ramp
	trace             bool
}

func heldOutOf(vals []*Validation) heldOut {
	var h heldOut
	for _, v := range vals {
		for _, c := range v.HoldOut {
			if !slices.Contains(h.closed, c) {
				h.closed = append(h.closed, c)
			}
		}
		for _, c := range v.HoldOutSustained {
			if !slices.Contains(h.sustained, c) {
				h.sustained = append(h.sustained, c)
			}
		}
		for _, r := range v.HoldOutRates {
			if !slices.Contains(h.rates, r) {
				h.rates = append(h.rates, r)
			}
		}
		for _, r := range v.HoldOutRamps {
			if !slices.Contains(h.ramps, r) {
				h.ramps = append(h.ramps, r)
			}
		}
		h.trace = h.trace || v.HoldOutTrace
	}
	slices.Sort(h.closed)
	slices.Sort(h.sustained)
	slices.Sort(h.rates)
	return h
}

// openShapes counts the kinds of open loop held out (constant rates, a
// ramp, a trace replay).
func (h heldOut) openShapes() int {
	n := 0
	for _, b := range []bool{len(h.rates) > 0, len(h.ramps) > 0, h.trace} {
		if b {
			n++
		}
	}
	return n
}

// check refuses held-out loads one live rehearsal cannot run together.
func (h heldOut) check() error {
	if h.openShapes() > 1 || len(h.ramps) > 1 {
		return noLive("sim validate: the held-out open-loop loads mix constant rates, ramps and trace replays, which one live rehearsal cannot run together (its open loop has one of them): hold out one kind, or pass --no-live")
	}
	if len(h.closed) > 0 && len(h.sustained) > 0 {
		return noLive("sim validate: the held-out loads are closed waves and sustained loops, which one live rehearsal cannot run both (its concurrencies run one way): hold out one of them, or pass --no-live")
	}
	return nil
}

// liveWorkload is the bundle's workload at the held-out loads h.
func liveWorkload(res *bundle.Results, h heldOut, work string, liveScale float64) (map[string]any, error) {
	concurrencies := h.closed
	if len(h.sustained) > 0 {
		concurrencies = h.sustained
	}
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
	prompts, err := livePrompts(res, h.trace, work, liveScale)
	if err != nil {
		return nil, err
	}
	if prompts != nil {
		workload["prompts"] = prompts
	}
	if len(h.sustained) > 0 {
		su := wl.Sustained
		workload["mode"] = "sustained"
		workload["sustained"] = map[string]any{"num_requests": su.NumRequests, "warmup_requests": su.WarmupRequests,
			"duration": strconv.FormatFloat(su.DurationS, 'f', -1, 64) + "s"}
	}
	if h.openShapes() > 0 {
		workload["open_loop"] = liveOpenLoop(wl.Open, h)
	}
	return workload, nil
}

// livePrompts is the live run's prompts where the bundle's list will not
// do (nil where it will): its trace read again, or its prompts with their
// own max_tokens as chat JSON Lines written under work.
func livePrompts(res *bundle.Results, trace bool, work string, liveScale float64) (any, error) {
	wl := res.Workload
	if trace {
		return liveTraceSource(res, liveScale)
	}
	if len(wl.PromptMaxTokens) == 0 {
		return nil, nil
	}
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
	return map[string]any{"source": "chat_jsonl", "path": path}, nil
}

// liveOpenLoop is the bundle's open loop op at the held-out rates, or its
// ramp, or its trace replay.
func liveOpenLoop(op *bundle.OpenLoop, h heldOut) map[string]any {
	ol := map[string]any{"arrival": op.Arrival, "seed": op.Seed, "num_requests": op.NumRequests,
		"duration": strconv.FormatFloat(op.DurationS, 'f', -1, 64) + "s"}
	switch {
	case len(h.rates) > 0:
		ol["request_rates_rps"] = h.rates
	case len(h.ramps) > 0:
		r := h.ramps[0]
		ol["ramp"] = map[string]any{"strategy": r.Strategy, "start_rps": r.StartRPS, "end_rps": r.EndRPS}
	default:
		ol["arrival"] = contract.ArrivalTrace
		delete(ol, "seed")
	}
	if op.Burstiness != 0 {
		ol["burstiness"] = op.Burstiness
	}
	return ol
}

// liveModel is the live run's model: the bundle's, served by simulators.
func liveModel(res *bundle.Results) map[string]any {
	model := res.Provenance.Model
	m := map[string]any{"id": model.ID, "note": "served by the simulator with profiles fitted by rehearse sim validate; no weights were loaded"}
	if model.Revision != "" {
		m["revision"] = model.Revision
	}
	if model.Dtype != "" {
		m["dtype"] = model.Dtype
	}
	return m
}

// liveTraceSource is the prompts mapping that reads the bundle's trace
// again: its prompt_source's file and parameters, its time scale set so
// that, run at liveScale, the arrivals in simulated time are the bundle's.
func liveTraceSource(res *bundle.Results, liveScale float64) (map[string]any, error) {
	ps := res.Workload.PromptSource
	if ps == nil || ps.Name != "trace" {
		return nil, noLive("sim validate: the held-out trace replay's bundle names no trace prompt source to replay live; pass --no-live")
	}
	path, _ := ps.Params["path"].(string)
	if _, err := os.Stat(path); err != nil {
		return nil, noLive("sim validate: the held-out trace %q cannot be read for the live run (%v); run from the folder the bundle's rehearsal ran in, or pass --no-live", path, err)
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

// NoLiveError says why the live run of sim validate cannot be made from
// the bundle and the held-out loads given: bad input, before any request.
type NoLiveError struct{ msg string }

func (e *NoLiveError) Error() string { return e.msg }

func noLive(format string, a ...any) error { return &NoLiveError{fmt.Sprintf(format, a...)} }
