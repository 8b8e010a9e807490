package report

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
)

// HasReasoning reports whether the servers of res streamed generated text
// beside content: a reasoning channel or tool-call arguments, in any
// record.
func HasReasoning(res *bundle.Results) bool {
	for _, a := range res.Aggregates {
		if a.ReasoningTokens != nil {
			return true
		}
	}
	return res.HasGeneratedText()
}

// ReasoningTable is, for a bundle whose servers streamed reasoning (or tool
// calls), a row per aggregate with the content goodput beside the
// reasoning tokens, and TTFT (first content) beside TTFT to the first
// token of any channel. It has no rows for a bundle without reasoning.
func ReasoningTable(res *bundle.Results) Section {
	if !HasReasoning(res) {
		return Section{}
	}
	sec := Section{Columns: []Column{
		{Head: "Server", Short: "server"}, {Head: "Load", Short: "load"},
		{Head: "Goodput (content), median [min–max] tok/s", Short: "goodput tok/s"},
		{Head: "Reasoning, median [min–max] tok/s", Short: "reasoning tok/s"},
		{Head: "Reasoning tokens", Short: "reasoning tok"},
		{Head: "TTFT p50 / p95 (first content)", Short: "ttft p50/p95"},
		{Head: "TTFT any p50 / p95 (first token)", Short: "ttft any p50/p95"},
	}}
	for _, a := range res.Aggregates {
		rate, total := dash, dash
		if a.ReasoningRate != nil {
			rate = Goodput(*a.ReasoningRate)
		}
		if a.ReasoningTokens != nil {
			total = strconv.Itoa(*a.ReasoningTokens)
		}
		sec.Rows = append(sec.Rows, []string{a.Server, a.LoadLabel(), Goodput(a.Goodput), rate, total,
			pair(a.TTFT), pair(a.TTFTAny)})
	}
	return sec
}

func pair(p contract.Percentiles) string {
	return Seconds(p.P50) + " / " + Seconds(p.P95)
}

func writeReasoning(b *bytes.Buffer, res *bundle.Results) {
	sec := ReasoningTable(res)
	if len(sec.Rows) == 0 {
		return
	}
	b.WriteString("## Reasoning and first tokens\n\n")
	b.WriteString("The servers streamed generated text beside content: a reasoning channel (`delta.reasoning` or `delta.reasoning_content`) or tool-call arguments. ")
	b.WriteString("Goodput and TTFT stay content only, as everywhere in this report: TTFT waits for the first content, after the whole reasoning phase. ")
	b.WriteString("TTFT any is the time to the first chunk of any generated text (`first_token_s`); reasoning tokens are each record's `reasoning_text` re-tokenized with the pinned tokenizer, summed over the successful requests, and per repeat ÷ the goodput window. ")
	b.WriteString("Tool-call arguments are kept in `tool_call_text` and not counted.")
	if res.Provenance.OutputTokensSource == bundle.SourceUsage {
		b.WriteString(" Output tokens were taken from the server's usage, which counts reasoning too, so goodput here includes the reasoning tokens.")
	}
	fmt.Fprintf(b, "\n\n")
	b.Write(sec.Markdown())
	b.WriteString("\n")
}
