package report

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
)

// What the aggregates keep apart from their own figures (ApplyApart): per
// model, where the prompts were assigned LoRA adapters, and the side
// probes sent beside the recorded waves.

// ModelsTable is a row per aggregate and model where an aggregate's
// requests asked for more than one model (LoRA adapters): the requests,
// failures, p50 and p95 TTFT and p95 E2E of each model's.
func ModelsTable(res *bundle.Results) Section {
	sec := Section{Columns: []Column{
		{Head: "Server", Short: "server"}, {Head: "Load", Short: "load"}, {Head: "Model (LoRA adapter)", Short: "model"},
		{Head: "Requests", Short: "requests"}, {Head: "Failures", Short: "failures"},
		{Head: "p50 TTFT", Short: "p50 TTFT"}, {Head: "p95 TTFT", Short: "p95 TTFT"}, {Head: "p95 E2E", Short: "p95 E2E"},
	}}
	for _, a := range res.Aggregates {
		if len(a.Models) < 2 {
			continue
		}
		for _, m := range a.Models {
			sec.Rows = append(sec.Rows, []string{a.Server, a.LoadLabel(), m.Model, strconv.Itoa(m.Requests),
				FailureCount(contract.Failures{Count: m.Failures, Total: m.Requests}), Seconds(m.TTFT.P50), Seconds(m.TTFT.P95), Seconds(m.E2E.P95)})
		}
	}
	return sec
}

// SideProbesTable is a row per aggregate with side probes beside its
// waves: the probes sent, the failed, and the median, p99 and largest E2E
// of the successful ones (vLLM's probe figures).
func SideProbesTable(res *bundle.Results) Section {
	sec := Section{Columns: []Column{
		{Head: "Server", Short: "server"}, {Head: "Load", Short: "load"},
		{Head: "Probes", Short: "probes"}, {Head: "Failures", Short: "failures"},
		{Head: "p50 E2E", Short: "p50 E2E"}, {Head: "p99 E2E", Short: "p99 E2E"}, {Head: "max E2E", Short: "max E2E"},
	}}
	for _, a := range res.Aggregates {
		sp := a.SideProbes
		if sp == nil {
			continue
		}
		sec.Rows = append(sec.Rows, []string{a.Server, a.LoadLabel(), strconv.Itoa(sp.Requests),
			FailureCount(contract.Failures{Count: sp.Failures, Total: sp.Requests}), Seconds(sp.E2E.P50), Seconds(sp.E2E.P99), Seconds(sp.MaxE2ES)})
	}
	return sec
}

// writeApart is the report's section on the figures kept apart: per
// model, and the side probes.
func writeApart(b *bytes.Buffer, res *bundle.Results) {
	models, probes := ModelsTable(res), SideProbesTable(res)
	if len(models.Rows) > 0 {
		b.WriteString("## LoRA adapters\n\n")
		b.WriteString("Each prompt's requests asked for one model (`workload.prompt_models`, assigned as `workload.models` says); each record keeps its own (`model`). Latencies are over each model's successful requests, pooled over the repeats.\n\n")
		b.Write(models.Markdown())
		b.WriteString("\n")
	}
	if len(probes.Rows) > 0 {
		sp := res.Workload.SideProbes
		b.WriteString("## Side probes\n\n")
		if sp != nil {
			fmt.Fprintf(b, "Beside each recorded wave, one probe at a time (prompt %q, max_tokens %d, to the server's model), the next %s s after the last ended, outside any concurrency cap, from the wave's release until its requests had ended: how the load stalls an unrelated request. ",
				sp.Prompt, sp.MaxTokens, Number(1/sp.RateRPS))
		}
		b.WriteString("Their records are waves of kind `side_probe`, never in the load's figures; E2E is over the successful probes.\n\n")
		b.Write(probes.Markdown())
		b.WriteString("\n")
	}
}
