package report

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
)

// FigureRef is a figure file of the bundle as README.md links it.
type FigureRef struct {
	File, Title, Caption string
}

// Markdown renders README.md. digests are the bundle's files other than
// README.md and SHA256SUMS; figs the figure files to show.
func Markdown(res *bundle.Results, figs []FigureRef, digests []bundle.Digest) []byte {
	var b bytes.Buffer
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p := res.Provenance

	title := "Rehearsal"
	if p.Model.ID != "" {
		title += ": " + p.Model.ID
	}
	w("# %s\n\n", title)
	if sim := p.Simulation; sim != nil {
		w("> **Simulated servers.** No figure below is a GPU measurement: the servers were `rehearse sim` engines")
		w(" with the profiles %s, run %s× faster than simulated time (time scale %s). ", simProfiles(sim), Number(sim.TimeScale), Number(sim.TimeScale))
		w("Times and rates are as measured on the wall clock; divide goodput by %s and multiply latencies by %s to read them in simulated time.", Number(sim.TimeScale), Number(sim.TimeScale))
		if sim.Note != "" {
			w(" %s", sim.Note)
		}
		w("\n\n")
	}
	if p.Model.RandomWeights {
		w("> **Random weights.** The model was built from its architecture config with random weights: the same compute per token as the real model, meaningless text.\n\n")
	}
	w("Rehearsed with rehearse %s from %s to %s.\n\n", orDash(p.Tool.Version), orDash(p.StartedAt), orDash(p.FinishedAt))

	figs, capFigs := splitCapacityFigures(figs)
	writeCapacity(&b, res, capFigs)
	writeEnvironment(&b, res)
	writeServers(&b, res)
	writeWorkload(&b, res)
	writeResults(&b, res)
	writeReplicas(&b, res)
	writeApart(&b, res)
	writeSLO(&b, res)
	writeReasoning(&b, res)
	writeCost(&b, res)
	writeFigures(&b, figs)
	writeLatency(&b, res)
	writeSteady(&b, res)
	writeTraffic(&b, res)
	writeOpenLoop(&b, res)
	writeLoadGenerator(&b, res)
	writeWorkers(&b, res)
	writeMechanism(&b, res)
	writeOperatorNotes(&b, res)
	writeWarnings(&b, res)
	writeIntegrity(&b, digests)
	return b.Bytes()
}

func simProfiles(s *bundle.Simulation) string {
	names := make([]string, 0, len(s.Profiles))
	for srv, prof := range s.Profiles {
		names = append(names, fmt.Sprintf("`%s` (%s)", prof, srv))
	}
	sort.Strings(names)
	if len(names) == 0 {
		return "(unnamed)"
	}
	return strings.Join(names, ", ")
}

func orDash(s string) string {
	if s == "" {
		return dash
	}
	return s
}

// writeEnvironment writes where the rehearsal ran: the tool, the load
// generator's host, the GPUs and runtimes, the model, and how output
// tokens were counted.
func writeEnvironment(b *bytes.Buffer, res *bundle.Results) {
	p := res.Provenance
	fmt.Fprintf(b, "## Environment\n\n")
	fmt.Fprintf(b, "- Tool: %s.\n", toolText(p.Tool))
	fmt.Fprintf(b, "- Load generator host: %s.\n", hostText(p.Host))
	if len(p.GPUs) == 0 {
		fmt.Fprintf(b, "- GPU: none seen by nvidia-smi.\n")
	}
	for _, g := range p.GPUs {
		line := fmt.Sprintf("- GPU: %s, %s MiB; driver %s", g.Name, fmt.Sprint(g.MemoryMiB), orDash(g.Driver))
		if g.CUDA != "" {
			line += "; CUDA reported by the driver: " + g.CUDA
		}
		fmt.Fprintf(b, "%s.\n", line)
	}
	for _, r := range p.Runtimes {
		if r.Server != "" {
			fmt.Fprintf(b, "- Runtime (%s): %s %s.\n", r.Server, r.Name, r.Version)
		} else {
			fmt.Fprintf(b, "- Runtime: %s %s.\n", r.Name, r.Version)
		}
	}
	if p.Model.ID != "" {
		fmt.Fprintf(b, "- Model: %s.\n", modelText(p.Model))
	}
	switch p.OutputTokensSource {
	case "usage":
		fmt.Fprintf(b, "- Output tokens: the servers' own `usage.completion_tokens` (no tokenizer was given).\n")
	default:
		fmt.Fprintf(b, "- Output tokens: returned text re-tokenized with %s.\n", tokenizerText(p.Tokenizer))
		b.WriteString(usageSummary(res))
	}
	b.WriteString("\n")
}

// toolText names the rehearse that ran: its version, commit and Go, and
// its note or that its commit is unknown.
func toolText(t bundle.Tool) string {
	tool := "rehearse " + orDash(t.Version)
	if t.Commit != "" {
		tool += ", commit `" + t.Commit + "`"
	}
	if t.GoVersion != "" {
		tool += ", " + t.GoVersion
	}
	switch {
	case t.Note != "":
		tool += "; " + t.Note
	case t.Commit == "":
		tool += "; commit unknown"
	}
	return tool
}

// hostText describes the load generator's host: its name, platform, CPUs
// and memory.
func hostText(h bundle.Host) string {
	host := fmt.Sprintf("%s (%s/%s, %d CPUs", orDash(h.Hostname), h.OS, h.Arch, h.CPUs)
	if h.CPU != "" {
		host += ", " + h.CPU
	}
	if h.MemoryBytes > 0 {
		host += fmt.Sprintf(", %.1f GiB memory", float64(h.MemoryBytes)/(1<<30))
	}
	return host + ")"
}

// modelText names the model: its id, revision, dtype, whether its weights
// were random, and its note.
func modelText(m bundle.Model) string {
	line := "`" + m.ID + "`"
	if m.Revision != "" {
		line += " at revision `" + m.Revision + "`"
	}
	if m.Dtype != "" {
		line += ", " + m.Dtype
	}
	if m.RandomWeights {
		line += ", **random weights**"
	}
	if m.Note != "" {
		line += " (" + strings.TrimSuffix(m.Note, ".") + ")"
	}
	return line
}

// tokenizerText names the tokenizer that counted output tokens: its name,
// variant, where it came from and its digest.
func tokenizerText(t bundle.Tokenizer) string {
	line := orDash(t.Name)
	if t.Variant != "" && t.Variant != t.Name {
		line += " (" + t.Variant + ")"
	}
	switch t.Source {
	case "":
	case "embedded":
		line += ", the copy embedded in rehearse"
	default:
		line += " from " + t.Source
	}
	if t.SHA256 != "" {
		line += ", SHA-256 `" + t.SHA256 + "`"
	}
	return line
}

func writeServers(b *bytes.Buffer, res *bundle.Results) {
	fmt.Fprintf(b, "## Servers and launch\n\n")
	if len(res.Servers) == 0 {
		fmt.Fprintf(b, "No servers recorded.\n\n")
		return
	}
	for _, s := range res.Servers {
		role := ""
		if res.BaselineName() == s.Name {
			role = " (baseline)"
		}
		if len(s.LaunchArgv) == 0 {
			fmt.Fprintf(b, "- `%s`%s: already running at %s; not launched by rehearse.", s.Name, role, s.BaseURL)
		} else {
			fmt.Fprintf(b, "- `%s`%s at %s:\n  `%s`", s.Name, role, s.BaseURL, Argv(s.LaunchArgv))
			if len(s.Env) > 0 {
				var env []string
				for _, k := range slices.Sorted(maps.Keys(s.Env)) {
					env = append(env, k+"="+s.Env[k])
				}
				fmt.Fprintf(b, "\n  with environment `%s`", strings.Join(env, " "))
			}
			for _, argv := range s.Prepare {
				fmt.Fprintf(b, "\n  prepared, once it answered, by `%s`", Argv(argv))
			}
		}
		if s.Simulated != "" {
			fmt.Fprintf(b, " Simulated: %s.", s.Simulated)
		}
		if s.Log != "" {
			fmt.Fprintf(b, " Log: [`%s`](%s).", s.Log, s.Log)
		}
		if s.Exit != "" {
			fmt.Fprintf(b, " Exit: %s.", s.Exit)
		}
		writeServerReplicas(b, s)
		b.WriteString("\n")
	}
	b.WriteString("\n")
}

// writeWorkload writes what was sent and how it is measured: the loads,
// the prompts and request fields, and the metrics' semantics.
func writeWorkload(b *bytes.Buffer, res *bundle.Results) {
	wl := res.Workload
	fmt.Fprintf(b, "## Workload and metric semantics\n\n")
	switch s := wl.Sustained; {
	case len(wl.Concurrencies) > 0 && s != nil:
		line := fmt.Sprintf("- Sustained closed loop at %s clients, each sending its next request as soon as its last one ended", Ints(wl.Concurrencies))
		if s.NumRequests > 0 {
			line += fmt.Sprintf(", %d measured requests", s.NumRequests)
		}
		if s.DurationS > 0 {
			line += fmt.Sprintf(", at most %s s of them", Number(s.DurationS))
		}
		fmt.Fprintf(b, "%s, after %d warm-up requests (a warm-up wave of their own, never counted); %d recorded repeats per server and concurrency; %s. Goodput and request throughput are over the measured window: from the first measured send to the last measured end.\n",
			line, s.WarmupRequests, wl.Repeats, warmupText(wl))
	case len(wl.Concurrencies) > 0:
		fmt.Fprintf(b, "- Closed-loop waves of %s simultaneous clients; %d recorded repeats per server and concurrency; %s.\n",
			Ints(wl.Concurrencies), wl.Repeats, warmupText(wl))
	}
	if o := wl.Open; o != nil {
		fmt.Fprintf(b, "- %s.\n", openLoopText(wl, o))
	}
	switch {
	case len(wl.Sessions) > 0:
		writeSessions(b, wl)
	case len(wl.ArrivalsS) > 0 && len(wl.Concurrencies) == 0:
		fmt.Fprintf(b, "- %d fixed prompts, each sent once by each replay, in order", len(wl.Prompts))
	default:
		fmt.Fprintf(b, "- %d fixed prompts assigned to clients round-robin", len(wl.Prompts))
	}
	fmt.Fprintf(b, "; `max_tokens` %d; temperature %s; client timeout %s s per request",
		wl.MaxTokens, Number(wl.Temperature), Number(wl.TimeoutS))
	if wl.Endpoint != "" {
		fmt.Fprintf(b, "; endpoint `%s`", wl.Endpoint)
	}
	if len(wl.ExtraBody) > 0 {
		keys := slices.Sorted(maps.Keys(wl.ExtraBody))
		fmt.Fprintf(b, "; extra request fields %s", "`"+strings.Join(keys, "`, `")+"`")
	}
	b.WriteString(".\n")
	b.WriteString("- Goodput is successful-output goodput: output tokens of successful requests divided by the complete wave wall time (release to the end of its last request). Tokens of requests that later fail are excluded. It is reported as the median of the repeats with [min–max].\n")
	b.WriteString("- TTFT, TPOT, ITL and E2E percentiles are pooled over the successful requests of all repeats; a failure never enters a latency population. Failed requests that had received content are counted separately. Failures are totals over all repeats.\n")
	method := wl.PercentileMethod
	if method == "" {
		method = contract.PercentileMethod
	}
	fmt.Fprintf(b, "- Percentiles: %s; an empty population is shown as %s.\n\n", method, dash)
}

// openLoopText describes wl's open-loop arrivals o: a trace replay, a ramp
// or constant rates, with their schedule and bounds.
func openLoopText(wl bundle.Workload, o *bundle.OpenLoop) string {
	var line string
	switch {
	case o.Arrival == contract.ArrivalTrace:
		line = fmt.Sprintf("Open-loop trace replay: request i sends prompt i at its traced arrival (%d requests over %s s, time scale applied", len(wl.ArrivalsS), Number(lastArrival(wl.ArrivalsS)))
		if s := wl.PromptSource; s != nil {
			line += fmt.Sprintf("; %v format, time scale %v, hash blocks of %v tokens", s.Params["format"], s.Params["time_scale"], s.Params["block_size"])
		}
		line += ")"
	case o.Ramp != nil:
		line = fmt.Sprintf("Open-loop arrivals whose rate ramps %s from %s to %s requests/s over the wave, %s schedule", o.Ramp.Strategy,
			Number(o.Ramp.StartRPS), Number(o.Ramp.EndRPS), o.Arrival)
	default:
		rates := make([]string, len(o.RequestRatesRPS))
		for i, r := range o.RequestRatesRPS {
			rates[i] = Number(r)
		}
		line = fmt.Sprintf("Open-loop arrivals at %s requests/s, %s schedule", strings.Join(rates, ", "), o.Arrival)
	}
	if o.Arrival == "gamma" {
		line += fmt.Sprintf(" (burstiness %s)", Number(o.Burstiness))
	}
	if o.Arrival != contract.ArrivalTrace {
		line += fmt.Sprintf(", seed %d", o.Seed)
	}
	if o.NumRequests > 0 {
		line += fmt.Sprintf(", %d requests", o.NumRequests)
	}
	if o.DurationS > 0 {
		line += fmt.Sprintf(", at most %s s", Number(o.DurationS))
	}
	if o.MaxConcurrency > 0 {
		line += fmt.Sprintf(", at most %d in flight", o.MaxConcurrency)
	}
	return line
}

// writeSessions says what the multi-turn sessions were, without the line's
// end: how many, their turns, the think time, and how they were driven.
func writeSessions(b *bytes.Buffer, wl bundle.Workload) {
	most, turns := 0, 0
	for _, s := range wl.Sessions {
		most = max(most, len(s.Turns))
		turns += len(s.Turns)
	}
	fmt.Fprintf(b, "- %d multi-turn sessions of up to %d turns (%d user turns in all), assigned to clients round-robin: a closed-loop client runs one whole session, a sustained one sessions back to back, an open-loop arrival starts one. Each turn is a request (a row of every table counts turns) sent after the reply to the turn before it ended", len(wl.Sessions), most, turns)
	if t := wl.ThinkTime; t != nil {
		fmt.Fprintf(b, " and a think time (%s, mean %s s)", t.Distribution, Number(t.MeanS))
	}
	b.WriteString(", carrying the whole history with the server's actual replies; its input tokens count that history; a failed turn ends its session")
}

// closedTable returns the servers with closed-loop aggregates, in order,
// the concurrencies, and the aggregates indexed by server and concurrency.
func closedTable(res *bundle.Results) ([]string, []int, map[string]map[int]contract.Aggregate) {
	idx := map[string]map[int]contract.Aggregate{}
	var servers []string
	concSet := map[int]bool{}
	for _, a := range res.Aggregates {
		if a.Mode != contract.ModeClosed {
			continue
		}
		if idx[a.Server] == nil {
			idx[a.Server] = map[int]contract.Aggregate{}
			servers = append(servers, a.Server)
		}
		idx[a.Server][a.Concurrency] = a
		concSet[a.Concurrency] = true
	}
	concs := make([]int, 0, len(concSet))
	for c := range concSet {
		concs = append(concs, c)
	}
	sort.Ints(concs)
	return servers, concs, idx
}

func writeResults(b *bytes.Buffer, res *bundle.Results) {
	fmt.Fprintf(b, "## Results\n\n")
	t := ResultsTable(res)
	if t.Empty() {
		fmt.Fprintf(b, "No recorded waves.\n\n")
		return
	}
	if len(t.Closed.Rows) > 0 {
		b.Write(t.Closed.Markdown())
		b.WriteString("\n")
	}
	if len(t.Speedup) > 0 {
		fmt.Fprintf(b, "Speed-up is the ratio of median goodputs, %s over `%s`, at equal concurrency.\n\n", strings.Join(quoteAll(t.Speedup), ", "), t.Baseline)
	}
	if len(t.Sustained.Rows) > 0 {
		b.WriteString("Sustained closed loop, a row per concurrency (C clients, each sending its next request as its last ends; goodput over the measured window, from the first measured send to the last measured end, warm-up requests excluded):\n\n")
		b.Write(t.Sustained.Markdown())
		b.WriteString("\n")
	}
	if len(t.Open.Rows) > 0 {
		b.WriteString("Open-loop arrivals, a row per request rate (their lateness and more latencies are under Open-loop arrivals below):\n\n")
		b.Write(t.Open.Markdown())
		b.WriteString("\n")
	}
	writeFailureKinds(b, res)
}

// writeFailureKinds lists each load's failures by kind, its rate-limited
// requests (HTTP 429, or 503 with a Retry-After) apart from the other HTTP
// errors.
func writeFailureKinds(b *bytes.Buffer, res *bundle.Results) {
	servers, concs, idx := closedTable(res)
	limited := rateLimits(res)
	var kinds []string
	rateLimited := false
	add := func(a contract.Aggregate) {
		rl := limited[a.Key()]
		rateLimited = rateLimited || rl != nil
		kinds = append(kinds, fmt.Sprintf("`%s` at %s: %s", a.Server, a.LoadLabel(), failureKinds(a.Failures.ByKind, rl)))
	}
	for _, s := range servers {
		for _, c := range concs {
			if a, ok := idx[s][c]; ok && a.Failures.Count > 0 {
				add(a)
			}
		}
	}
	for _, a := range res.Aggregates {
		if a.Mode != contract.ModeClosed && a.Failures.Count > 0 {
			add(a)
		}
	}
	if len(kinds) == 0 {
		return
	}
	b.WriteString("Failures by kind:\n\n")
	for _, k := range kinds {
		fmt.Fprintf(b, "- %s.\n", k)
	}
	b.WriteString("\n")
	if rateLimited {
		b.WriteString("Rate-limited requests (`http_status` 429, or 503 with a `Retry-After`) are the server turning load away and asking the client to come back later, counted apart from its other HTTP errors; `retry_after_s` in results.json is each one's wait.\n\n")
	}
}

func quoteAll(xs []string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = "`" + x + "`"
	}
	return out
}

func byKind(m map[string]int) string {
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d %s", m[k], k)
	}
	return strings.Join(parts, ", ")
}

func writeRow(b *bytes.Buffer, cells []string) {
	b.WriteString("|")
	for _, c := range cells {
		b.WriteString(" " + cell(c) + " |")
	}
	b.WriteString("\n")
}

func writeFigures(b *bytes.Buffer, figs []FigureRef) {
	if len(figs) == 0 {
		return
	}
	b.WriteString("## Figures\n\n")
	for _, f := range figs {
		fmt.Fprintf(b, "![%s](%s)\n\n", escapeAlt(f.Title), f.File)
		if f.Caption != "" {
			fmt.Fprintf(b, "%s\n\n", f.Caption)
		}
	}
}

// escapeAlt backslash-escapes what would end an image's alt text early:
// titles carry server names, and a "]" in one would break the link.
func escapeAlt(s string) string {
	return strings.NewReplacer(`\`, `\\`, "[", `\[`, "]", `\]`).Replace(s)
}

func writeLatency(b *bytes.Buffer, res *bundle.Results) {
	servers, concs, idx := closedTable(res)
	if len(servers) == 0 {
		return
	}
	b.WriteString("## Latency detail\n\n")
	b.WriteString("Successful requests only, pooled over repeats; n is the number of samples behind each percentile.")
	writeBoundNote(b)
	for _, s := range servers {
		fmt.Fprintf(b, "### %s\n\n", s)
		writeRow(b, []string{"Clients", "TTFT p50", "TTFT p95", "TTFT p99", "TPOT p50", "TPOT p95", "ITL p50", "ITL p99", "E2E p50", "E2E p95", "Requests/s, median", "n"})
		writeRow(b, []string{"---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:"})
		for _, c := range concs {
			a, ok := idx[s][c]
			if !ok {
				continue
			}
			rps := dash
			if a.RequestThroughput.Median != nil {
				rps = fmt.Sprintf("%.2f", *a.RequestThroughput.Median)
			}
			writeRow(b, []string{fmt.Sprint(c),
				Seconds(a.TTFT.P50), Bounded(Seconds, a.TTFT.P95, a.TTFT.P95UB), Bounded(Seconds, a.TTFT.P99, a.TTFT.P99UB),
				Millis(a.TPOT.P50), Bounded(Millis, a.TPOT.P95, a.TPOT.P95UB), Millis(a.ITL.P50), Bounded(Millis, a.ITL.P99, a.ITL.P99UB),
				Seconds(a.E2E.P50), Bounded(Seconds, a.E2E.P95, a.E2E.P95UB), rps, fmt.Sprint(a.TTFT.N)})
		}
		b.WriteString("\n")
	}
}

// writeBoundNote ends a paragraph above a table of tail percentiles with
// what their bounds in parentheses are.
func writeBoundNote(b *bytes.Buffer) {
	fmt.Fprintf(b, " A p95 or p99 shown as \"x (≤ u)\" carries u, its %.0f %% upper confidence bound from order statistics (distribution-free, the binomial bound of MLPerf LoadGen's early stopping): a p95 needs %d samples for one, a p99 %d.\n\n",
		100*contract.TailConfidence, contract.MinBoundN(0.95, contract.TailConfidence), contract.MinBoundN(0.99, contract.TailConfidence))
}

func writeOpenLoop(b *bytes.Buffer, res *bundle.Results) {
	var open []contract.Aggregate
	for _, a := range res.Aggregates {
		if a.Mode == contract.ModeOpen {
			open = append(open, a)
		}
	}
	if len(open) == 0 {
		return
	}
	b.WriteString("## Open-loop arrivals\n\n")
	writeRow(b, []string{"Server", "Rate, req/s", "Goodput, median [min–max] tok/s", "Requests/s done", "p95 TTFT", "p99 TTFT", "p95 E2E", "Lateness p50", "Lateness p99", "Failures"})
	writeRow(b, []string{"---", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:"})
	for _, a := range open {
		rps := dash
		if a.RequestThroughput.Median != nil {
			rps = fmt.Sprintf("%.2f", *a.RequestThroughput.Median)
		}
		var l50, l99 *float64
		if a.Lateness != nil {
			l50, l99 = a.Lateness.P50, a.Lateness.P99
		}
		writeRow(b, []string{a.Server, openLoad(a), Goodput(a.Goodput), rps,
			Bounded(Seconds, a.TTFT.P95, a.TTFT.P95UB), Bounded(Seconds, a.TTFT.P99, a.TTFT.P99UB), Bounded(Seconds, a.E2E.P95, a.E2E.P95UB),
			Millis(l50), Millis(l99), FailureCount(a.Failures)})
	}
	b.WriteString("\nLateness is each request's actual send time minus its intended time on the schedule: the load generator's own delay, visible instead of hidden (coordinated omission).")
	writeBoundNote(b)
}

func writeMechanism(b *bytes.Buffer, res *bundle.Results) {
	m := res.MechanismCheck
	if m == nil {
		return
	}
	b.WriteString("## Mechanism check\n\n")
	if m.RestsOnClient() {
		writeClientMechanism(b, res, m)
		return
	}
	max := dash
	if m.Max != nil {
		max = Number(*m.Max)
	}
	fmt.Fprintf(b, "A separate, unrecorded %d-client wave polled `%s`'s Prometheus metric `%s` every %s s (%d samples",
		m.Concurrency, m.Server, m.Metric, Number(m.PeriodS), len(m.Series))
	if m.Errors > 0 {
		fmt.Fprintf(b, ", %d failed scrapes", m.Errors)
	}
	if m.NonFinite > 0 {
		fmt.Fprintf(b, ", %d non-finite values (NaN or ±Inf) left out", m.NonFinite)
	}
	fmt.Fprintf(b, "); the observed maximum was **%s**. This wave is not part of the results table.\n\n", max)
	mechanismReplicas(b, m)
	if c := m.Client; c != nil {
		fmt.Fprintf(b, "The client's own records of the same wave, read without the metric: at most %d requests were streaming at once (each from its first content to its end), of at most %d in flight (sent, not ended).\n\n", c.StreamingMax, c.InFlightMax)
	}
}

// writeClientMechanism is the mechanism check where no server metric was
// read: what it rests on instead, the client's records of its wave.
func writeClientMechanism(b *bytes.Buffer, res *bundle.Results, m *bundle.MechanismCheck) {
	if m.Metric == "" {
		b.WriteString("No server metric was read: the rehearsal asked for none (`mechanism_check.evidence: client`, for a server with no metrics endpoint). ")
	} else {
		fmt.Fprintf(b, "No server metric was read: not one of %d scrapes of `%s`'s `%s` answered a sample (the notes give the first error). ", m.Errors, m.Server, m.Metric)
	}
	fmt.Fprintf(b, "This check rests on the client's own records of a separate, unrecorded %d-client wave (not part of the results table) instead", m.Concurrency)
	c := m.Client
	if c == nil {
		b.WriteString(", and this bundle does not hold them.\n\n")
		return
	}
	fmt.Fprintf(b, ": `%s` had at most **%d** requests streaming at once (each from its first content to its end), of at most %d in flight (sent, not ended). "+
		"A server that generates for one request at a time streams one at a time whatever the clients; more than one at once means it generated for several together.", m.Server, c.StreamingMax, c.InFlightMax)
	if base, waves := baselineStreaming(res, m); waves > 0 {
		what := "recorded closed-loop wave"
		if waves > 1 {
			what = fmt.Sprintf("%d recorded closed-loop waves", waves)
		}
		fmt.Fprintf(b, " Read the same way, the baseline `%s`'s %s at %d clients had at most **%d** streaming at once.", res.BaselineName(), what, m.Concurrency, base)
	}
	b.WriteString("\n\n")
	if len(c.ByStreaming) == 0 {
		return
	}
	fmt.Fprintf(b, "Output tokens against the requests streaming (each successful record's tokens spread evenly over its content chunks; a rate only where the count held for %s s or more):\n\n", Number(minRateS))
	writeRow(b, []string{"Streaming at once", "Time", "Output tokens", "tok/s"})
	writeRow(b, []string{"---:", "---:", "---:", "---:"})
	for _, l := range c.ByStreaming {
		rate := dash
		if l.TokS != nil && l.DurationS >= minRateS {
			rate = fmt.Sprintf("%.1f", *l.TokS)
		}
		writeRow(b, []string{fmt.Sprint(l.Streaming), Seconds(&l.DurationS), fmt.Sprintf("%.0f", l.OutputTokens), rate})
	}
	b.WriteString("\n")
}

// minRateS is the shortest time at one streaming count whose token rate the
// report gives: a count held for a few milliseconds (every client's first
// token arriving together) has a token or two and no meaningful rate.
const minRateS = 0.1

// baselineStreaming is the most requests streaming at once in the
// baseline's recorded closed-loop waves at the mechanism check's
// concurrency, read from their records as the check reads its own, and how
// many such waves there were (0: none, or the check is on the baseline).
func baselineStreaming(res *bundle.Results, m *bundle.MechanismCheck) (streaming, waves int) {
	base := res.BaselineName()
	if base == "" || base == m.Server {
		return 0, 0
	}
	byWave := map[int][]contract.Record{}
	for _, w := range res.Waves {
		if w.Server == base && w.Kind == contract.KindRecorded && contract.IsClosed(w.Mode) && w.Concurrency == m.Concurrency {
			byWave[w.ID] = []contract.Record{}
		}
	}
	for _, r := range res.Records {
		if recs, ok := byWave[r.Wave]; ok {
			byWave[r.Wave] = append(recs, r)
		}
	}
	for _, recs := range byWave {
		streaming = max(streaming, contract.ClientConcurrencyOf(recs).StreamingMax)
	}
	return streaming, len(byWave)
}

func writeWarnings(b *bytes.Buffer, res *bundle.Results) {
	var lines []string
	for _, a := range res.Aggregates {
		where := fmt.Sprintf("`%s` at %s", a.Server, a.LoadLabel())
		for _, w := range append(slices.Clip(a.Warnings), steadyWarnings(a)...) {
			lines = append(lines, where+": "+w)
		}
	}
	for _, w := range UsageWarnings(res) {
		server, text, _ := strings.Cut(w, ": ")
		lines = append(lines, "`"+server+"`: "+text)
	}
	if len(lines) == 0 && len(res.Notes) == 0 {
		return
	}
	b.WriteString("## Warnings and notes\n\n")
	for _, l := range lines {
		fmt.Fprintf(b, "- %s.\n", strings.TrimSuffix(l, "."))
	}
	for _, n := range res.Notes {
		fmt.Fprintf(b, "- %s\n", n)
	}
	b.WriteString("\n")
}

func writeIntegrity(b *bytes.Buffer, digests []bundle.Digest) {
	b.WriteString("## Files and integrity\n\n")
	writeRow(b, []string{"File", "Purpose", "SHA-256"})
	writeRow(b, []string{"---", "---", "---"})
	for _, d := range digests {
		writeRow(b, []string{"`" + d.File + "`", purpose(d.File), "`" + d.SHA256 + "`"})
	}
	b.WriteString("\n`SHA256SUMS` holds the same digests and one for this README; `rehearse verify .` checks them, the schema, and recomputes every aggregate from the raw records.\n")
}

func purpose(file string) string {
	switch {
	case file == bundle.ResultsFile:
		return "provenance, workload, every raw request record, and the aggregates"
	case file == bundle.JournalFile:
		return "the journal: every record as it was written when its request ended"
	case file == "report.html":
		return "this report as one self-contained web page"
	case replicaLogRE.MatchString(file):
		m := replicaLogRE.FindStringSubmatch(file)
		return "complete log of replica " + m[2] + " of server `" + m[1] + "`"
	case strings.HasSuffix(file, ".router.log"):
		return "complete log of the router of server `" + strings.TrimSuffix(file, ".router.log") + "`"
	case strings.HasSuffix(file, ".log"):
		return "complete log of server `" + strings.TrimSuffix(file, ".log") + "`"
	case strings.HasSuffix(file, ".svg"):
		return "figure"
	}
	return ""
}

func writeOperatorNotes(b *bytes.Buffer, res *bundle.Results) {
	notes := strings.TrimSpace(res.OperatorNotes)
	if notes == "" {
		return
	}
	b.WriteString("## Operator notes\n\n")
	b.WriteString(notes)
	b.WriteString("\n\n")
}

// lastArrival is the last traced arrival, in seconds (0 for none).
func lastArrival(a []float64) float64 {
	if len(a) == 0 {
		return 0
	}
	return a[len(a)-1]
}

// writeTraffic shows the traffic's shape beside its latencies: the input
// and output token lengths of each load (contract.Lengths). A bundle whose
// aggregates carry no lengths (written before they were) shows none.
func writeTraffic(b *bytes.Buffer, res *bundle.Results) {
	some := false
	for _, a := range res.Aggregates {
		if a.InputLength.N > 0 || a.OutputLength.N > 0 {
			some = true
			break
		}
	}
	if !some {
		return
	}
	b.WriteString("## Traffic shape\n\n")
	b.WriteString("Tokens per request, pooled over repeats: input is the prompt's message content as the client counted it with the pinned tokenizer, over every attempt that has a count (the server's chat template adds its own); output is `output_tokens` of the successful requests. n is the number of requests behind each.\n\n")
	writeRow(b, []string{"Server", "Load", "Input n", "Input mean", "Input p50 / p90 / p99", "Output n", "Output mean", "Output p50 / p90 / p99"})
	writeRow(b, []string{"---", "---", "---:", "---:", "---:", "---:", "---:", "---:"})
	for _, a := range res.Aggregates {
		writeRow(b, []string{a.Server, a.LoadLabel(),
			fmt.Sprint(a.InputLength.N), Tokens(a.InputLength.Mean), LengthSpread(a.InputLength),
			fmt.Sprint(a.OutputLength.N), Tokens(a.OutputLength.Mean), LengthSpread(a.OutputLength)})
	}
	b.WriteString("\n")
}

// warmupText says the warm-up waves of wl: "2 warm-up waves before them",
// and, with warm-up waves per load, "and 1 at each concurrency just before
// its repeats".
func warmupText(wl bundle.Workload) string {
	t := fmt.Sprintf("%d warm-up waves before them", wl.WarmupWaves)
	if n := wl.WarmupWavesPerLoad; n > 0 {
		t += fmt.Sprintf(", and %d at each concurrency just before its repeats", n)
	}
	return t
}
