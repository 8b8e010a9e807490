package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
)

// bench against a simulator that thinks first (--reasoning-tokens): every
// record keeps its reasoning apart, reasoning_tokens is exactly the
// simulator's, output_tokens and goodput are content only, TTFT waits for
// the reasoning phase while first_token_s does not, and verify re-counts
// it all and catches a tampered reasoning_tokens or first_token_s.
func TestBenchReasoningAgainstTheSimulator(t *testing.T) {
	const reasoning = 32
	for _, field := range []string{"reasoning", "reasoning_content"} {
		t.Run(field, func(t *testing.T) {
			url, _, _ := startSim(t, "--engine", "batching", "--time-scale", "10", "--seed", "3",
				"--reasoning-tokens", "32", "--reasoning-field", field)
			dir := filepath.Join(t.TempDir(), "b")
			code, out, errs := runMain(context.Background(), "bench", "--base-url", url,
				"--request-rate", "inf", "--max-concurrency", "4", "--num-requests", "8", "--repeats", "1", "--max-tokens", "64", "-o", dir)
			if code != 0 {
				t.Fatalf("exit %d\n%s\n%s", code, out, errs)
			}
			if !strings.Contains(out, "Reasoning (goodput and TTFT are content only") || !strings.Contains(out, "ttft any p50/p95") {
				t.Errorf("the summary does not show the reasoning figures:\n%s", out)
			}
			res, err := bundle.ReadResults(dir)
			if err != nil {
				t.Fatal(err)
			}
			recorded, reasoningSum, outputSum := 0, 0, 0
			for i, r := range res.Records {
				if !r.OK {
					t.Fatalf("records[%d] failed: %s %s", i, r.ErrorKind, r.Error)
				}
				if r.ReasoningTokens == nil || *r.ReasoningTokens != reasoning || r.ReasoningText == "" {
					t.Fatalf("records[%d]: reasoning_tokens %v, text %q; want exactly %d", i, r.ReasoningTokens, r.ReasoningText, reasoning)
				}
				if r.UsageCompletionTokens == nil || *r.UsageCompletionTokens != reasoning+r.OutputTokens {
					t.Fatalf("records[%d]: usage %v, output %d: usage should count reasoning and content", i, r.UsageCompletionTokens, r.OutputTokens)
				}
				if r.FirstTokenS == nil || r.FirstContentS == nil || *r.FirstTokenS > *r.FirstContentS {
					t.Fatalf("records[%d]: first_token_s %v first_content_s %v", i, r.FirstTokenS, r.FirstContentS)
				}
				if r.Kind == contract.KindRecorded {
					recorded++
					reasoningSum += *r.ReasoningTokens
					outputSum += r.OutputTokens
				}
			}
			a := res.Aggregates[0]
			if a.ReasoningTokens == nil || *a.ReasoningTokens != reasoningSum || a.OutputTokens != outputSum || recorded != 8 {
				t.Fatalf("aggregate reasoning %v output %d; records %d, %d, %d", a.ReasoningTokens, a.OutputTokens, recorded, reasoningSum, outputSum)
			}
			// 32 simulated decode steps (about 0.5 s, 50 ms of wall time)
			// lie between a request's first reasoning and its first content.
			if a.TTFTAny.P50 == nil || a.TTFT.P50 == nil || !(*a.TTFTAny.P50 < *a.TTFT.P50) {
				t.Fatalf("ttft_any p50 %v, ttft p50 %v: TTFT should wait for the reasoning phase", a.TTFTAny.P50, a.TTFT.P50)
			}
			readme, _ := os.ReadFile(filepath.Join(dir, bundle.ReadmeFile))
			if !strings.Contains(string(readme), "## Reasoning and first tokens") || !strings.Contains(string(readme), "TTFT any") {
				t.Errorf("README.md does not show the reasoning figures")
			}
			if code, out, errs := runMain(context.Background(), "verify", dir); code != 0 || !strings.Contains(out+errs, "reasoning_tokens of") {
				t.Fatalf("verify: exit %d\n%s%s", code, out, errs)
			}

			for _, tc := range []struct {
				name   string
				tamper func(*bundle.Results)
				want   []string
			}{
				{"reasoning_tokens", func(r *bundle.Results) { *r.Records[len(r.Records)-1].ReasoningTokens++ },
					[]string{"reasoning_tokens: stored 33, its reasoning_text re-counted with the tokenizer is 32", "reasoning_tokens: stored"}},
				{"first_token_s", func(r *bundle.Results) {
					rec := &r.Records[len(r.Records)-1]
					*rec.FirstTokenS = *rec.FirstContentS
				}, []string{"ttft_any_s"}},
			} {
				tampered := filepath.Join(t.TempDir(), "t")
				if err := os.CopyFS(tampered, os.DirFS(dir)); err != nil {
					t.Fatal(err)
				}
				res, _ := bundle.ReadResults(tampered)
				tc.tamper(res)
				bundle.WriteResults(tampered, res)
				bundle.WriteSumsKnown(tampered, nil)
				code, out, errs := runMain(context.Background(), "verify", tampered)
				if code != 1 {
					t.Fatalf("%s tampered: verify exit %d\n%s%s", tc.name, code, out, errs)
				}
				for _, w := range tc.want {
					if !strings.Contains(out, w) {
						t.Errorf("%s tampered: verify does not say %q:\n%s", tc.name, w, out)
					}
				}
			}
		})
	}
}

// bench against a simulator whose every answer is a tool call: the
// arguments are kept in tool_call_text, not counted as content; the
// requests succeed without content, so TTFT has no sample and TTFT any
// has every one; the bundle verifies, with no usage disagreement warned.
func TestBenchToolCallsAgainstTheSimulator(t *testing.T) {
	url, _, _ := startSim(t, "--engine", "batching", "--time-scale", "100", "--seed", "4",
		"--reasoning-tokens", "8", "--tool-calls")
	dir := filepath.Join(t.TempDir(), "b")
	code, out, errs := runMain(context.Background(), "bench", "--base-url", url,
		"--request-rate", "inf", "--max-concurrency", "2", "--num-requests", "4", "--repeats", "1", "--max-tokens", "32", "-o", dir)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	res, err := bundle.ReadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res.Records {
		if !r.OK || r.Text != "" || r.OutputTokens != 0 || r.FirstContentS != nil || r.FirstTokenS == nil {
			t.Fatalf("records[%d]: ok %v text %q output %d first content %v first token %v", i, r.OK, r.Text, r.OutputTokens, r.FirstContentS, r.FirstTokenS)
		}
		if r.ToolCallText == "" || r.ReasoningTokens == nil || *r.ReasoningTokens != 8 {
			t.Fatalf("records[%d]: tool_call_text %q reasoning_tokens %v", i, r.ToolCallText, r.ReasoningTokens)
		}
		if r.FinishReason != "tool_calls" && r.FinishReason != "length" {
			t.Fatalf("records[%d]: finish_reason %q", i, r.FinishReason)
		}
	}
	a := res.Aggregates[0]
	if a.TTFT.N != 0 || a.TTFTAny.N != len(res.Records) {
		t.Fatalf("ttft n %d, ttft_any n %d, want 0 and %d", a.TTFT.N, a.TTFTAny.N, len(res.Records))
	}
	for _, w := range a.Warnings {
		if strings.Contains(w, "usage") {
			t.Errorf("tool-call records entered the usage comparison: %s", w)
		}
	}
	if code, out, errs := runMain(context.Background(), "verify", dir); code != 0 {
		t.Fatalf("verify: exit %d\n%s%s", code, out, errs)
	}
}
