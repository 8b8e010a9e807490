package sim

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
)

// qwenSystemPrompt is the system message Qwen2.5's chat template inserts when
// a conversation has none. A fit keeps it when the server's reported prompt
// token counts show it was rendered.
const qwenSystemPrompt = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."

// Figures a bundle cannot tell, used by every fitted profile.
const (
	// fitKVTokenBudget never binds for the workloads rehearse sends.
	fitKVTokenBudget = 4_000_000
	// fitMaxNumSeqs is assumed when the server's launch argv does not say
	// --max-num-seqs.
	fitMaxNumSeqs = 256
)

// FitOptions says what to fit from a bundle.
type FitOptions struct {
	// Server is the name of the bundle's server to fit.
	Server string
	// Engine is the simulated engine the profile is for: serial or batching.
	Engine string
	// FitConcurrencies are the recorded closed-loop waves the fit may read
	// (their concurrencies); the others are held out.
	FitConcurrencies []int
	// Name and Description of the profile; empty means ones derived from the
	// bundle.
	Name, Description string
	// MaxModelLen of the profile (a bundle does not record it); 0 means 32768.
	MaxModelLen int
	// Tokenizer renders and counts prompts to decide the default system
	// prompt; nil means the pinned default tokenizer.
	Tokenizer Counter
}

// Fit is a profile fitted from a bundle's raw records, with how each number
// was obtained.
type Fit struct {
	Profile *Profile
	// CountedPerGeneratedToken is output_tokens (the returned text
	// re-tokenized) over the tokens the server reported generating
	// (usage_completion_tokens), summed over the fitted successful records:
	// 1 for text that round-trips; above 1 for random-weight text. It is
	// reported, not modelled: predictions and the live simulator count
	// generated tokens, and comparisons count the bundle's records the
	// same way (GeneratedCounts).
	CountedPerGeneratedToken float64
	// Derivation says, one line per fitted number, which records it came
	// from and how.
	Derivation []string
	// Unexplained lists what the measured records show and the fitted model
	// cannot reproduce.
	Unexplained []string
}

// fitPoint is what the fit reads from one fitted concurrency's successful
// records.
type fitPoint struct {
	concurrency int
	ok          int     // successful requests
	tpotS       float64 // median of (end − first content) ÷ (generated − 1)
	ttftS       float64 // median TTFT
	ttftLessTPO float64 // median of TTFT − that request's TPOT
	firstTTFTS  float64 // median over waves of the wave's smallest TTFT
}

// FitProfile fits a profile of the given engine to one server of a bundle,
// reading only the recorded closed-loop waves at the fit concurrencies:
//
//   - decode step: the median per-request generated TPOT ((end_s −
//     first_content_s) ÷ (generated − 1), generated = usage_completion_tokens
//     where the server reported it, else output_tokens) of each fitted
//     concurrency; serial: one step cost, the mean over the fitted
//     concurrencies; batching: one point per batch size seen (the
//     concurrency, capped at max_num_seqs), linear in between;
//   - request overhead: the median of TTFT − TPOT at the lowest fitted
//     concurrency L, less the frontend time (a first token costs one step);
//   - frontend (batching): the growth of the median TTFT from the lowest to
//     the highest fitted concurrency, read as a queue every request passes
//     one after another: f = 2·(median TTFT(N) − median TTFT(L)) ÷ (N − L);
//   - prefill: 0 (the lowest waves send one prompt length, so a prefill cost
//     cannot be told from the overhead; a closed-loop wave's client 0 always
//     sends prompt 0, so at one client the prompt never varies);
//   - prefix caching: off (not fitted, for the same reason);
//   - output lengths: max_tokens when the workload sets ignore_eos, else the
//     median generated length of each prompt's requests that stopped.
//
// It is a pure function of the bundle and the options.
func FitProfile(res *bundle.Results, o FitOptions) (*Fit, error) {
	if o.Engine != EngineSerial && o.Engine != EngineBatching {
		return nil, fmt.Errorf("sim: fit: engine %q: want %q or %q", o.Engine, EngineSerial, EngineBatching)
	}
	var server *bundle.Server
	for i := range res.Servers {
		if res.Servers[i].Name == o.Server {
			server = &res.Servers[i]
		}
	}
	if server == nil {
		return nil, fmt.Errorf("sim: fit: the bundle has no server %q (have: %s)", o.Server, strings.Join(res.ServerNames(), ", "))
	}
	wl, _, err := WorkloadOf(res)
	if err != nil {
		return nil, err
	}
	if len(o.FitConcurrencies) == 0 {
		return nil, fmt.Errorf("sim: fit: no fit concurrencies")
	}
	fitAt := slices.Clone(o.FitConcurrencies)
	slices.Sort(fitAt)
	fitAt = slices.Compact(fitAt)
	recs := fitRecords(res, o.Server, fitAt)

	f := &Fit{}
	note := func(format string, a ...any) { f.Derivation = append(f.Derivation, fmt.Sprintf(format, a...)) }
	unexplained := func(format string, a ...any) { f.Unexplained = append(f.Unexplained, fmt.Sprintf(format, a...)) }

	points := make([]fitPoint, 0, len(fitAt))
	for _, c := range fitAt {
		pt, err := readPoint(c, recs[c])
		if err != nil {
			return nil, fmt.Errorf("sim: fit: server %s: %w", o.Server, err)
		}
		points = append(points, pt)
	}

	// Counted per generated token, from every fitted successful record that
	// carries the server's usage.
	counted, generated := 0, 0
	for _, c := range fitAt {
		for _, r := range recs[c] {
			if r.OK && r.UsageCompletionTokens != nil {
				counted += r.OutputTokens
				generated += *r.UsageCompletionTokens
			}
		}
	}
	f.CountedPerGeneratedToken = 1
	if generated > 0 {
		f.CountedPerGeneratedToken = float64(counted) / float64(generated)
		note("counted per generated token: %.4f = %d output_tokens (text re-tokenized) ÷ %d usage_completion_tokens over the fitted successful records", f.CountedPerGeneratedToken, counted, generated)
	} else {
		note("counted per generated token: 1 (the server reported no usage)")
	}

	p := &Profile{
		Engine:           o.Engine,
		Model:            res.Provenance.Model.ID,
		MaxModelLen:      o.MaxModelLen,
		ChatTemplate:     "chatml",
		KVTokenBudget:    fitKVTokenBudget,
		MaxNumSeqs:       1,
		PrefillBaseS:     0,
		PrefillPerTokenS: 0,
	}
	if server.Model != "" {
		p.Model = server.Model
	}
	if p.Model == "" {
		p.Model = "unknown"
	}
	if p.MaxModelLen == 0 {
		p.MaxModelLen = 32768
	}
	low, high := points[0], points[len(points)-1]

	switch o.Engine {
	case EngineSerial:
		sum := 0.0
		var parts []string
		for _, pt := range points {
			sum += pt.tpotS
			parts = append(parts, fmt.Sprintf("%.4f s at %s (%d requests)", pt.tpotS, clients(pt.concurrency), pt.ok))
		}
		step := sum / float64(len(points))
		p.DecodeStepS = [][2]float64{{1, round6(step)}}
		note("decode step (batch 1): %.4f s = the mean over the fitted concurrencies of the median generated TPOT: %s", p.DecodeStepS[0][1], strings.Join(parts, ", "))
		if len(points) > 1 {
			lo, hi := points[0].tpotS, points[0].tpotS
			for _, pt := range points {
				lo, hi = min(lo, pt.tpotS), max(hi, pt.tpotS)
			}
			if hi > 1.1*lo {
				unexplained("the per-token cost differs by %.0f %% between the fitted concurrencies (%s); a serial engine has one step cost, so the mean is used and each side is off by about half the difference", 100*(hi/lo-1), strings.Join(parts, ", "))
			}
		}
		p.RequestOverheadS = round6(max(0, low.ttftLessTPO))
		note("request overhead: %.4f s = median of TTFT − TPOT over the %d successful requests at %s (the first token costs one step)", p.RequestOverheadS, low.ok, clients(low.concurrency))
		note("frontend: 0 s per request; prefill: 0 (one prompt length at %s: a prefill cost cannot be told apart from the overhead)", clients(low.concurrency))
		if len(points) > 1 {
			predicted := p.RequestOverheadS + step
			if high.firstTTFTS > 2*predicted {
				unexplained("at %s the first request served waited %.3f s for its first token (median over the waves of the smallest TTFT) against %.3f s at %s: the server seems to take in the whole wave before it streams to the first (one event loop); the model's serial engine starts it after %.3f s", clients(high.concurrency), high.firstTTFTS, low.ttftS, clients(low.concurrency), predicted)
			}
		}
	case EngineBatching:
		p.MaxNumSeqs = fitMaxNumSeqs
		if n, ok := argvInt(server.LaunchArgv, "--max-num-seqs"); ok && n > 0 {
			p.MaxNumSeqs = n
			note("max_num_seqs: %d, from the server's launch argv", n)
		} else {
			note("max_num_seqs: %d assumed (the launch argv does not say --max-num-seqs)", fitMaxNumSeqs)
		}
		var pts [][2]float64
		for _, pt := range points {
			batch := float64(min(pt.concurrency, p.MaxNumSeqs))
			if len(pts) > 0 && pts[len(pts)-1][0] == batch {
				unexplained("%d clients run at the same batch size (%g) as a lower fitted concurrency; its TPOT %.4f s is not used", pt.concurrency, batch, pt.tpotS)
				continue
			}
			pts = append(pts, [2]float64{batch, round6(pt.tpotS)})
			note("decode step at batch %g: %.4f s = median generated TPOT of the %d successful requests at %s", batch, pts[len(pts)-1][1], pt.ok, clients(pt.concurrency))
		}
		p.DecodeStepS = pts
		if len(pts) > 1 {
			note("decode step between the points: linear; beyond batch %g: along the last segment (not measured)", pts[len(pts)-1][0])
		} else {
			note("decode step: the same at every batch size (one fitted concurrency)")
		}
		if high.concurrency > low.concurrency {
			fs := 2 * (high.ttftS - low.ttftS) / float64(high.concurrency-low.concurrency)
			p.FrontendSPerRequest = round6(max(0, fs))
			note("frontend: %.4f s per request = 2 · (median TTFT %.4f s at %s − %.4f s at %d) ÷ (%d − %d): a queue every request passes one after another, whose median wait matches", p.FrontendSPerRequest, high.ttftS, clients(high.concurrency), low.ttftS, low.concurrency, high.concurrency, low.concurrency)
		} else {
			note("frontend: 0 s per request (one fitted concurrency)")
		}
		p.RequestOverheadS = round6(max(0, low.ttftLessTPO-p.FrontendSPerRequest))
		note("request overhead: %.4f s = median of TTFT − TPOT over the %d successful requests at %s, less the frontend's %.4f s", p.RequestOverheadS, low.ok, clients(low.concurrency), p.FrontendSPerRequest)
		note("prefill: 0 and no per-step token budget (one prompt length at %s: a prefill cost cannot be told apart from the overhead)", clients(low.concurrency))
	}

	if p.Engine == EngineBatching && p.FrontendSPerRequest > 0 && low.ttftLessTPO < p.FrontendSPerRequest {
		unexplained("at %s the first token comes %.4f s after one step's time, less than the %.4f s frontend slot the %d-client TTFT growth implies: the server does not make every request wait its turn; it admits arrivals in groups, which the model's one-at-a-time frontend spreads evenly", clients(low.concurrency), low.ttftLessTPO, p.FrontendSPerRequest, high.concurrency)
	}
	for _, pt := range points {
		if d := coldWaves(res, o.Server, pt, recs[pt.concurrency]); d != "" {
			unexplained("%s", d)
		}
	}

	note("prefix caching: off (not fitted: the lowest waves repeat one prompt, so a cache's saving cannot be told from a cheap prefill; rehearse sim --prefix-caching on turns it on)")

	// Prompt rendering: keep Qwen's default system prompt when the server's
	// reported prompt tokens show it was rendered.
	sys, how := fitSystemPrompt(res, o.Server, fitAt, recs, o.Tokenizer, p)
	p.DefaultSystemPrompt = sys
	note("%s", how)

	// Output lengths.
	if wl.IgnoreEOS {
		p.OutputTokens = []int{wl.MaxTokens}
		note("output lengths: %d (max_tokens): the workload sets ignore_eos, so every request runs to max_tokens; where the model would stop on its own is not measured", wl.MaxTokens)
	} else {
		byPrompt, fallback := naturalLengths(wl, fitAt, recs)
		p.OutputTokensByPrompt = byPrompt
		p.OutputTokens = []int{fallback}
		note("output lengths: per prompt, the median generated tokens of its fitted requests that stopped on their own (%d prompts); a prompt that always reached max_tokens gets max_model_len; any other prompt %d", len(byPrompt), fallback)
	}

	p.Name = o.Name
	if p.Name == "" {
		p.Name = o.Server + "-" + o.Engine + "-fit"
	}
	p.Description = o.Description
	if p.Description == "" {
		p.Description = fmt.Sprintf("Fitted by rehearse sim fit to server %s of a bundle (%s, %s) on its waves at %s clients.",
			o.Server, p.Model, gpuName(res), joinInts(fitAt))
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("sim: fit: the fitted profile is not valid: %w", err)
	}
	f.Profile = p
	return f, nil
}

// fitRecords returns the records of the server's recorded closed-loop waves
// at each of the concurrencies.
func fitRecords(res *bundle.Results, server string, at []int) map[int][]contract.Record {
	waves := map[int]bool{}
	for _, w := range res.Waves {
		k := contract.KeyOf(w)
		if w.Kind == contract.KindRecorded && w.Server == server && k.Mode == contract.ModeClosed && slices.Contains(at, w.Concurrency) {
			waves[w.ID] = true
		}
	}
	out := map[int][]contract.Record{}
	for _, r := range res.Records {
		if r.Kind == contract.KindRecorded && waves[r.Wave] {
			out[r.Concurrency] = append(out[r.Concurrency], r)
		}
	}
	return out
}

// coldWaves describes the cold waves (the first after a launch) among the
// fitted ones at concurrency c: the model has no warm-up term.
func coldWaves(res *bundle.Results, server string, pt fitPoint, recs []contract.Record) string {
	c := pt.concurrency
	var parts []string
	for _, w := range res.Waves {
		if !w.Cold || w.Kind != contract.KindRecorded || w.Server != server || w.Concurrency != c {
			continue
		}
		var ttft, tpot []float64
		for _, r := range recs {
			if r.Wave != w.ID || !r.OK || r.FirstContentS == nil {
				continue
			}
			ttft = append(ttft, *r.FirstContentS-r.StartS)
			if g := generated(r); g > 1 {
				tpot = append(tpot, (r.EndS-*r.FirstContentS)/float64(g-1))
			}
		}
		if len(ttft) == 0 || len(tpot) == 0 {
			parts = append(parts, fmt.Sprintf("repeat %d", w.Repeat))
			continue
		}
		mt, mp := *contract.Median(ttft), *contract.Median(tpot)
		if math.Abs(mt-pt.ttftS) <= 0.1*pt.ttftS && math.Abs(mp-pt.tpotS) <= 0.1*pt.tpotS {
			continue // it ran like the warm ones
		}
		parts = append(parts, fmt.Sprintf("repeat %d (median TTFT %.3f s, TPOT %.4f s against %.3f s and %.4f s over all the waves)", w.Repeat, mt, mp, pt.ttftS, pt.tpotS))
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("the fitted waves at %s include a cold wave, the first after the server's launch: %s; the model has no warm-up cost, the medians keep it out of the fit, but a tail percentile over few requests is its value", clients(c), strings.Join(parts, ", "))
}

// generated is the number of tokens the server generated for a record.
func generated(r contract.Record) int {
	if r.UsageCompletionTokens != nil {
		return *r.UsageCompletionTokens
	}
	return r.OutputTokens
}

func readPoint(c int, recs []contract.Record) (fitPoint, error) {
	pt := fitPoint{concurrency: c}
	if len(recs) == 0 {
		return pt, fmt.Errorf("no recorded closed-loop wave at %s to fit", clients(c))
	}
	var tpot, ttft, diff []float64
	firstByWave := map[int]float64{}
	for _, r := range recs {
		if !r.OK || r.FirstContentS == nil {
			continue
		}
		pt.ok++
		t := *r.FirstContentS - r.StartS
		ttft = append(ttft, t)
		if v, ok := firstByWave[r.Wave]; !ok || t < v {
			firstByWave[r.Wave] = t
		}
		if g := generated(r); g > 1 {
			v := (r.EndS - *r.FirstContentS) / float64(g-1)
			tpot = append(tpot, v)
			diff = append(diff, t-v)
		}
	}
	if len(tpot) == 0 {
		return pt, fmt.Errorf("no successful request with more than one token at %s to fit a decode step from", clients(c))
	}
	var firsts []float64
	for _, v := range firstByWave {
		firsts = append(firsts, v)
	}
	pt.tpotS = *contract.Median(tpot)
	pt.ttftS = *contract.Median(ttft)
	pt.ttftLessTPO = *contract.Median(diff)
	pt.firstTTFTS = *contract.Median(firsts)
	return pt, nil
}

// fitSystemPrompt decides whether prompts were rendered with Qwen's default
// system prompt, by counting each fitted prompt both ways against the
// server's usage_prompt_tokens.
func fitSystemPrompt(res *bundle.Results, server string, at []int, recs map[int][]contract.Record, counter Counter, p *Profile) (string, string) {
	reported := map[int]int{}
	for _, c := range at {
		for _, r := range recs[c] {
			if r.UsagePromptTokens != nil && r.Prompt >= 0 && r.Prompt < len(res.Workload.Prompts) {
				reported[r.Prompt] = *r.UsagePromptTokens
			}
		}
	}
	if len(reported) == 0 {
		return "", "default system prompt: none (the server reported no prompt tokens to check one against)"
	}
	if counter == nil {
		c, err := defaultCounter()
		if err != nil {
			return "", fmt.Sprintf("default system prompt: none (no tokenizer to check one: %v)", err)
		}
		counter = c
	}
	for _, sys := range []string{qwenSystemPrompt, ""} {
		q := *p
		q.DefaultSystemPrompt = sys
		match := true
		for i, n := range reported {
			if counter.Count(renderChat(&q, []chatMessage{{Role: "user", Content: res.Workload.Prompts[i]}})) != n {
				match = false
				break
			}
		}
		if match {
			if sys == "" {
				return "", fmt.Sprintf("default system prompt: none; the chatml rendering without one counts the server's usage_prompt_tokens of all %d prompts sent", len(reported))
			}
			return sys, fmt.Sprintf("default system prompt: Qwen2.5's; the chatml rendering with it counts the server's usage_prompt_tokens of all %d prompts sent", len(reported))
		}
	}
	return "", "default system prompt: none; neither rendering counts the server's usage_prompt_tokens (prompt lengths only bound the KV budget here)"
}

// naturalLengths fits output lengths from requests that stopped on their
// own.
func naturalLengths(wl ClosedWorkload, at []int, recs map[int][]contract.Record) ([]PromptLength, int) {
	stopped := map[int][]float64{}
	reachedMax := map[int]bool{}
	for _, c := range at {
		for _, r := range recs[c] {
			if !r.OK || r.Prompt < 0 || r.Prompt >= len(wl.Prompts) {
				continue
			}
			if g := generated(r); g < wl.MaxTokens {
				stopped[r.Prompt] = append(stopped[r.Prompt], float64(g))
			} else {
				reachedMax[r.Prompt] = true
			}
		}
	}
	var out []PromptLength
	var all []float64
	for i, text := range wl.Prompts {
		n := 0
		switch {
		case len(stopped[i]) > 0:
			n = max(1, int(math.Round(*contract.Median(stopped[i]))))
		case reachedMax[i]:
			n = 1 << 20 // never stopped within max_tokens
		default:
			continue
		}
		all = append(all, float64(n))
		begin := text
		if len(begin) > 40 {
			begin = begin[:40]
		}
		out = append(out, PromptLength{PromptSHA256: sha256Hex(text), Prompt: begin, Tokens: n})
	}
	fallback := wl.MaxTokens
	if len(all) > 0 {
		fallback = max(1, int(math.Round(*contract.Median(all))))
	}
	return out, fallback
}

// argvInt reads "--flag N" or "--flag=N" from an argv.
func argvInt(argv []string, flag string) (int, bool) {
	for i, a := range argv {
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			n, err := strconv.Atoi(v)
			return n, err == nil
		}
		if a == flag && i+1 < len(argv) {
			n, err := strconv.Atoi(argv[i+1])
			return n, err == nil
		}
	}
	return 0, false
}

func gpuName(res *bundle.Results) string {
	if len(res.Provenance.GPUs) == 0 {
		return "no GPU recorded"
	}
	return res.Provenance.GPUs[0].Name
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}

// round6 rounds a latency to the microsecond, so profiles read cleanly.
func round6(x float64) float64 { return math.Round(x*1e6) / 1e6 }

// Comparison sets a fitted profile's predictions beside the measured
// aggregates of the server it was fitted to, for every concurrency of the
// bundle.
type Comparison struct {
	Server string
	Rows   []ComparisonRow
	// Notes are what the prediction did not model (request fields).
	Notes []string
}

// ComparisonRow is one concurrency: fitted or held out, measured against
// predicted by the same contract.
type ComparisonRow struct {
	Concurrency         int
	Fitted              bool
	Measured, Predicted contract.Aggregate
}

// RelErr is (predicted − measured) ÷ measured, or nil when either is
// missing or the measured value is 0.
func RelErr(predicted, measured *float64) *float64 {
	if predicted == nil || measured == nil || *measured == 0 {
		return nil
	}
	v := (*predicted - *measured) / *measured
	return &v
}

// Compare predicts the bundle's closed-loop workload with the fit's profile
// and pairs each concurrency's aggregate with the measured one, recomputed
// from the bundle's records counted in generated tokens (GeneratedCounts),
// as the prediction counts them.
func Compare(res *bundle.Results, f *Fit, server string, fitAt []int, tk Counter) (*Comparison, error) {
	wl, notes, err := WorkloadOf(res)
	if err != nil {
		return nil, err
	}
	pr, err := Predict(f.Profile, wl, PredictOptions{Server: server, Tokenizer: tk})
	if err != nil {
		return nil, err
	}
	measured := map[int]contract.Aggregate{}
	for _, a := range contract.Aggregates(res.Waves, GeneratedCounts(res.Records), res.ServerNames(), "") {
		if a.Server == server && a.Mode == contract.ModeClosed {
			measured[a.Concurrency] = a
		}
	}
	cmp := &Comparison{Server: server, Notes: notes}
	for _, a := range pr.Aggregates {
		m, ok := measured[a.Concurrency]
		if !ok {
			continue
		}
		cmp.Rows = append(cmp.Rows, ComparisonRow{Concurrency: a.Concurrency, Fitted: slices.Contains(fitAt, a.Concurrency), Measured: m, Predicted: a})
	}
	if len(cmp.Rows) == 0 {
		return nil, fmt.Errorf("sim: the bundle has no recorded closed-loop wave of server %s", server)
	}
	return cmp, nil
}

// GeneratedCounts returns a copy of records whose output_tokens are the
// tokens the server reported generating (usage_completion_tokens) where a
// record carries them and has no reasoning or tool-call channel: the count
// the engine model (predictor and live simulator alike) speaks. A bundle of
// random-weight text re-tokenizes to about 6 % more tokens than were
// generated; counted this way, its goodput and TPOT are the engine's.
func GeneratedCounts(records []contract.Record) []contract.Record {
	out := slices.Clone(records)
	for i := range out {
		r := &out[i]
		if r.UsageCompletionTokens != nil && r.ReasoningTokens == nil && r.ToolCallText == "" {
			r.OutputTokens = *r.UsageCompletionTokens
		}
	}
	return out
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// clients says "1 client" or "N clients".
// clients labels a closed-loop load as every output does ("64 clients").
func clients(n int) string {
	return contract.Key{Mode: contract.ModeClosed, Concurrency: n}.LoadLabel()
}
