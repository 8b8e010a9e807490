package config

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/rehearse/rehearse/internal/endpoint"
	"github.com/rehearse/rehearse/internal/workload"
)

// validatePrompts checks workload.prompts: its file, or its named source
// and the parameters that source takes (and no others).
func validatePrompts(w Prompts, p *Problems) {
	const at = "workload.prompts"
	validateChatTemplate(w, p)
	k := promptKeysOf(w, p)
	if k.trace && w.Source != workload.SourceTrace {
		p.add(at, "format, time_scale and block_size are the trace source's, not the %s source's", w.Name())
	}
	switch w.Source {
	case "":
		if w.File != "" {
			checkPromptsFile(w, p)
		}
	case workload.SourceFile:
		checkPromptsFile(w, p)
		if k.synthetic || k.dataset || k.prefix || w.Count != 0 {
			p.add(at, "the file source takes path alone")
		}
	case workload.SourceShareGPT, workload.SourceChatJSONL:
		validateDatasetPrompts(w, k, p)
	case workload.SourceSynthetic:
		validateSyntheticPrompts(w, k, p)
	case workload.SourceTrace:
		validateTracePrompts(w, k, p)
	case workload.SourcePrefixRepetition:
		validatePrefixPrompts(w, k, p)
	case workload.SourceBuiltin:
		if w.File != "" || k.synthetic || k.dataset || k.prefix || w.Count != 0 {
			p.add(at, "the builtin source takes no parameters")
		}
	default:
		p.add(at+".source", "%q: want one of %s (or a list of prompts, or a file name)", w.Source,
			strings.Join(slices.DeleteFunc(workload.Sources(), func(s string) bool { return s == workload.SourceInline }), ", "))
	}
}

// validateChatTemplate checks chat_template and chat_template_kwargs: a
// prompts file's prompts rendered on the client, as vLLM's custom dataset.
func validateChatTemplate(w Prompts, p *Problems) {
	const at = "workload.prompts"
	fileSource := w.Source == workload.SourceFile || (w.Source == "" && w.File != "")
	switch {
	case w.ChatTemplate && !fileSource:
		p.add(at+".chat_template", "renders the prompts of a prompts file (a path, or source: file), not the %s source's", w.Name())
	case !w.ChatTemplate && w.ChatTemplateKwargs != nil:
		p.add(at+".chat_template_kwargs", "given without chat_template: true (for the server's template, put chat_template_kwargs in workload.extra_body)")
	}
}

// promptKeys says which sources' keys workload.prompts gives.
type promptKeys struct {
	synthetic, dataset, trace, repetition, prefix bool
}

func promptKeysOf(w Prompts, p *Problems) promptKeys {
	k := promptKeys{
		synthetic: w.InputLen != nil || w.OutputLen != nil || w.Seed != 0 || w.IgnoreEOS,
		dataset:   w.UseOutputLen || w.MaxModelLen != 0,
		trace:     w.Format != "" || w.TimeScale != 0 || w.BlockSize != 0,
	}
	if w.Order != "" {
		validateOrder(w, p)
		// vLLM's order takes a seed and a fixed output length.
		k.synthetic = w.InputLen != nil || w.IgnoreEOS
	}
	k.repetition = w.NumPrefixes != 0 || w.SuffixLen != 0
	k.prefix = k.repetition || w.PrefixLen != 0
	return k
}

// checkPromptsFile checks the prompts file a source reads.
func checkPromptsFile(w Prompts, p *Problems) {
	at := "workload.prompts"
	if w.Source != "" {
		at += ".path"
	}
	f := w.File
	if f == "" {
		p.add(at, "empty (the %s source reads a file)", w.Source)
		return
	}
	if st, err := os.Stat(f); err != nil {
		p.add(at, "%s: no such file", f)
	} else if st.IsDir() {
		p.add(at, "%s: a folder, not a prompts file", f)
	}
}

// addChecks adds a source's own checks ("field: why") under at.
func addChecks(at string, msgs []string, p *Problems) {
	for _, msg := range msgs {
		field, why, _ := strings.Cut(msg, ": ")
		p.add(at+"."+field, "%s", why)
	}
}

// validateDatasetPrompts checks the sharegpt and chat_jsonl sources.
func validateDatasetPrompts(w Prompts, k promptKeys, p *Problems) {
	const at = "workload.prompts"
	checkPromptsFile(w, p)
	if w.Source == workload.SourceChatJSONL && w.UseOutputLen {
		p.add(at+".use_output_len", "the chat_jsonl source always takes a line's max_tokens or output_len")
	}
	if k.synthetic {
		p.add(at, "input_len, output_len, seed and ignore_eos are the synthetic source's, not the %s source's", w.Source)
	}
	if k.prefix {
		p.add(at, "num_prefixes, prefix_len and suffix_len are the prefix_repetition source's, not the %s source's", w.Source)
	}
	if w.Count < 0 {
		p.add(at+".count", "%d: must be 0 (all) or more", w.Count)
	}
	if w.MaxModelLen < 0 {
		p.add(at+".max_model_len", "%d: must be 0 (no limit) or more", w.MaxModelLen)
	}
}

// validateSyntheticPrompts checks the synthetic source.
func validateSyntheticPrompts(w Prompts, k promptKeys, p *Problems) {
	const at = "workload.prompts"
	if w.File != "" {
		p.add(at+".path", "the synthetic source reads no file")
	}
	if k.dataset {
		p.add(at, "use_output_len and max_model_len are the dataset sources', not the synthetic source's")
	}
	if k.repetition {
		p.add(at, "num_prefixes and suffix_len are the prefix_repetition source's, not the synthetic source's (which takes prefix_len alone)")
	}
	addChecks(at, w.Synthetic().Check(), p)
}

// validateTracePrompts checks the trace source.
func validateTracePrompts(w Prompts, k promptKeys, p *Problems) {
	const at = "workload.prompts"
	checkPromptsFile(w, p)
	if w.InputLen != nil || w.OutputLen != nil || k.dataset || k.prefix {
		p.add(at, "input_len, output_len, use_output_len, max_model_len and the prefix keys are not the trace source's (a trace gives each request's lengths)")
	}
	addChecks(at, w.Trace().Check(), p)
	if w.File != "" {
		if _, err := workload.TraceFormat(w.Format, w.File); err != nil {
			p.add(at+".format", "empty, and the path's extension names no trace format (mooncake for .jsonl, azure for .csv)")
		}
	}
}

// validatePrefixPrompts checks the prefix_repetition source.
func validatePrefixPrompts(w Prompts, k promptKeys, p *Problems) {
	const at = "workload.prompts"
	if w.File != "" {
		p.add(at+".path", "the prefix_repetition source reads no file")
	}
	if k.dataset {
		p.add(at, "use_output_len and max_model_len are the dataset sources', not the prefix_repetition source's")
	}
	if w.InputLen != nil {
		p.add(at+".input_len", "the synthetic source's: prefix_repetition prompts are prefix_len + suffix_len tokens")
	}
	addChecks(at, w.PrefixRepetition().Check(), p)
}

// validateSessions checks workload.sessions against the prompt source.
func validateSessions(w Workload, p *Problems) {
	s := w.Sessions
	if s == nil {
		return
	}
	const at = "workload.sessions"
	src := w.Prompts.Spec().Name()
	switch {
	case !slices.Contains(workload.SessionSources, src):
		p.add(at, "the %s prompt source has no conversations: multi-turn sessions come from workload.prompts of source %s", src, strings.Join(workload.SessionSources, ", "))
	case src == workload.SourceSynthetic && s.Turns < 1:
		p.add(at+".turns", "%d: the synthetic source needs the number of turns of every session (at least 1)", s.Turns)
	case s.Turns < 0:
		p.add(at+".turns", "%d: must be 0 (every turn) or more", s.Turns)
	}
	if err := s.ThinkTime.Think().Check(); err != nil {
		field := at + ".think_time"
		if s.ThinkTime.Distribution != "" && !slices.Contains(workload.ThinkDistributions, s.ThinkTime.Distribution) {
			field += ".distribution"
			err = fmt.Errorf("%q: want one of %s", s.ThinkTime.Distribution, strings.Join(workload.ThinkDistributions, ", "))
		}
		p.add(field, "%v", err)
	}
}

// validateSustained checks workload.mode and workload.sustained.
func validateSustained(w Workload, p *Problems) {
	switch w.Mode {
	case ModeClosed, ModeSustained:
	default:
		p.add("workload.mode", "%q: want closed or sustained", w.Mode)
		return
	}
	s := w.Sustained
	if s == nil {
		return
	}
	if w.Mode != ModeSustained {
		p.add("workload.sustained", "given, but workload.mode is %s (set mode: sustained)", w.Mode)
		return
	}
	if s.NumRequests < 0 {
		p.add("workload.sustained.num_requests", "%d: must be 0 or more", s.NumRequests)
	}
	if s.Duration < 0 {
		p.add("workload.sustained.duration", "%v: negative", s.Duration)
	}
	if s.WarmupRequests < 0 {
		p.add("workload.sustained.warmup_requests", "%d: must be 0 or more", s.WarmupRequests)
	}
}

// validateOpenLoop checks workload.open_loop: request rates, or a ramp, or
// trace arrivals (whose times come from workload.prompts' trace); an
// arrival process and its burstiness; bounds.
func validateOpenLoop(w Workload, p *Problems) {
	const at = "workload.open_loop"
	o := w.OpenLoop
	if o == nil {
		return
	}
	if o.Arrival == workload.ArrivalTrace {
		if w.Prompts.Source != workload.SourceTrace {
			p.add(at+".arrival", "trace: the arrival times come from a trace; set workload.prompts to {source: trace, path: ...}")
		}
		if len(o.RequestRatesRPS) > 0 {
			p.add(at+".request_rates_rps", "trace arrivals take their times from the trace, not from a rate (remove request_rates_rps, or scale the trace with workload.prompts.time_scale)")
		}
		if o.Ramp != nil {
			p.add(at+".ramp", "trace arrivals take their times from the trace, not from a ramp")
		}
		if o.Burstiness != 0 || o.Seed != 0 {
			p.add(at, "burstiness and seed apply to drawn arrivals, not to trace arrivals")
		}
	} else {
		switch {
		case o.Ramp != nil && len(o.RequestRatesRPS) > 0:
			p.add(at+".request_rates_rps", "given with ramp: a ramp's rates are its start_rps and end_rps (give one of them)")
		case o.Ramp != nil:
			if err := workload.CheckRamp(o.Ramp.Strategy, o.Ramp.StartRPS, o.Ramp.EndRPS); err != nil {
				p.add(at+".ramp", "%v", err)
			}
		case len(o.RequestRatesRPS) == 0:
			p.add(at+".request_rates_rps", "empty (or give ramp, or arrival: trace)")
		}
		for i, rate := range o.RequestRatesRPS {
			if rate <= 0 || math.IsInf(rate, 0) || math.IsNaN(rate) {
				p.add(fmt.Sprintf("%s.request_rates_rps[%d]", at, i), "%v: must be positive", rate)
			}
		}
		switch {
		case o.Arrival == "":
			p.add(at+".arrival", "empty (%s, or trace)", strings.Join(workload.Arrivals, ", "))
		case !slices.Contains(workload.Arrivals, o.Arrival):
			p.add(at+".arrival", "%q: want one of %s, or trace", o.Arrival, strings.Join(workload.Arrivals, ", "))
		default:
			if err := CheckArrival(o.Arrival, o.Burstiness); err != nil {
				p.add(at+".burstiness", "%v", err)
			}
		}
		if o.NumRequests == 0 && o.Duration == 0 {
			p.add(at, "needs num_requests or duration (an open-loop wave must be bounded)")
		}
	}
	if o.NumRequests < 0 {
		p.add(at+".num_requests", "%d: must be 0 or more", o.NumRequests)
	}
	if o.Duration < 0 {
		p.add(at+".duration", "%v: negative", o.Duration)
	}
	if o.MaxConcurrency < 0 {
		p.add(at+".max_concurrency", "%d: must be 0 (no cap) or more", o.MaxConcurrency)
	}
	validatePacing(o, p)
}

// validateOrder checks workload.prompts.order: vLLM's sampling of a
// sharegpt file, with its seed and a fixed output_len.
func validateOrder(w Prompts, p *Problems) {
	const at = "workload.prompts"
	switch {
	case w.Order != workload.OrderVLLM && w.Order != workload.OrderVLLMUnshuffled:
		p.add(at+".order", "%q: want %s or %s", w.Order, workload.OrderVLLM, workload.OrderVLLMUnshuffled)
	case w.Source != workload.SourceShareGPT:
		p.add(at+".order", "%s is the sharegpt source's", w.Order)
	case w.Seed < 0:
		p.add(at+".seed", "%d: vLLM's shuffle takes 0 or more", w.Seed)
	case w.OutputLen != nil && (w.OutputLen.Fixed < 1 || w.OutputLen.Mean != 0 || w.OutputLen.SD != 0 || w.OutputLen.RangeRatio != 0):
		p.add(at+".output_len", "with order %s, a fixed length of 1 or more ({fixed: N}, vLLM's --sharegpt-output-len)", w.Order)
	case w.OutputLen != nil && w.UseOutputLen:
		p.add(at+".output_len", "a fixed output length, or use_output_len: give one")
	}
}

// validateVLLMWorkload checks the workload keys of vllm bench serve's
// meanings: body_style, request_id_prefix and num_warmups.
func validateVLLMWorkload(w Workload, p *Problems) {
	switch w.BodyStyle {
	case endpoint.StyleRehearse:
	case endpoint.StyleVLLM:
		if w.Sessions != nil {
			p.add("workload.body_style", "%s: vLLM's body has no multi-turn sessions", w.BodyStyle)
		}
	default:
		p.add("workload.body_style", "%q: want %s, or none for rehearse's", w.BodyStyle, endpoint.StyleVLLM)
	}
	for _, c := range w.RequestIDPrefix {
		if c < ' ' || c == 0x7f {
			p.add("workload.request_id_prefix", "%q holds a control character, which a header cannot carry", w.RequestIDPrefix)
			break
		}
	}
	if w.NumWarmups < 0 {
		p.add("workload.num_warmups", "%d: must be 0 or more", w.NumWarmups)
	}
}

// validatePacing checks workload.open_loop.pacing: vLLM's pacing bounds a
// wave by num_requests alone and draws a ramp's first gap at its start
// rate, which must be positive.
func validatePacing(o *OpenLoop, p *Problems) {
	const at = "workload.open_loop.pacing"
	switch o.Pacing {
	case "":
		return
	case workload.PacingVLLM:
	default:
		p.add(at, "%q: want %s, or none for rehearse's schedules", o.Pacing, workload.PacingVLLM)
		return
	}
	switch {
	case o.Arrival == workload.ArrivalTrace:
		p.add(at, "%s: trace arrivals take their times from the trace", o.Pacing)
	case o.NumRequests < 1:
		p.add(at, "%s needs num_requests (vLLM's --num-prompts bounds the wave)", o.Pacing)
	case o.Duration != 0:
		p.add(at, "%s: a vLLM wave is bounded by num_requests alone, not by duration", o.Pacing)
	case o.Ramp != nil && !(o.Ramp.StartRPS > 0):
		p.add(at, "%s: the ramp's first request is drawn at start_rps, which must be above 0", o.Pacing)
	}
}

// ApplyDefaults gives the side probes vLLM's prompt and max_tokens where
// they are not set.
func (sp *SideProbes) ApplyDefaults() {
	if sp.Prompt == "" {
		sp.Prompt = VLLMProbePrompt
	}
	if sp.MaxTokens == 0 {
		sp.MaxTokens = VLLMProbeMaxTokens
	}
}

// CheckSideProbeRate says what makes rps unfit as the side probes' rate:
// anything but a finite rate above 0.
func CheckSideProbeRate(rps float64) error {
	if !(rps > 0) || math.IsInf(rps, 0) {
		return fmt.Errorf("%v: want a finite rate above 0 requests per second", rps)
	}
	return nil
}

// validateApart checks workload.models and workload.side_probes: model
// names a request can carry, assigned per prompt (so never to a session's
// turns, which would change model within a conversation), and side probes
// of a positive rate, a prompt and an output limit, in one process (a
// split plan's workers would each send them).
func (r *Rehearsal) validateApart(p *Problems) {
	w := r.Workload
	if m := w.Models; m != nil {
		if err := workload.CheckModels(m.Names, m.Assignment); err != nil {
			p.add("workload.models", "%v", err)
		}
		if w.Sessions != nil {
			p.add("workload.models", "each prompt has its own model, and a multi-turn session's turns are prompts: not with multi-turn sessions")
		}
	}
	sp := w.SideProbes
	if sp == nil {
		return
	}
	if err := CheckSideProbeRate(sp.RateRPS); err != nil {
		p.add("workload.side_probes.rate_rps", "%v", err)
	}
	if strings.TrimSpace(sp.Prompt) == "" {
		p.add("workload.side_probes.prompt", "empty prompt")
	}
	if sp.MaxTokens < 1 {
		p.add("workload.side_probes.max_tokens", "%d: must be at least 1", sp.MaxTokens)
	}
	if r.SegmentSpec != "" {
		p.add("workload.side_probes", "a split plan's workers would each send them: run side probes in one process (no segment)")
	}
}
