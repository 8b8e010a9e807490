package bundle_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
)

// redact replaces rec's text and reasoning as rehearse does once a secret
// was found in them: its counts stay those of the text as it came.
func redact(rec *contract.Record) {
	n := rec.OutputTokens + 20
	rec.Text, rec.ReasoningText, rec.ReasoningTokens = " the [redacted]", "[redacted]", &n
	rec.OutputTokens += 20
	rec.Redacted = true
}

// TestRedactedRecordsAreNotRecounted: a record whose text had a secret
// scrubbed after its tokens were counted verifies — its counts are kept
// and used by the aggregates, not re-counted, nor bounded by its text's
// bytes — and verify says how many it skipped; so does a session turn
// whose history holds the redacted reply, whose input_tokens are not
// re-counted either. Both the streaming verify and the whole one (a
// bundle with sessions) take this path.
func TestRedactedRecordsAreNotRecounted(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(t *testing.T, r *bundle.Results)
	}{
		{"records", func(t *testing.T, r *bundle.Results) {
			redact(&r.Records[firstRecord(t, r, isOK)])
		}},
		{"a session", func(t *testing.T, r *bundle.Results) {
			first, second := asSession(t, r)
			words := func(s string) int { return len(strings.Fields(s)) }
			in := words(r.Workload.Prompts[0]) + words(r.Records[first].Text) + words(r.Workload.Prompts[1])
			r.Records[second].InputTokens = &in
			redact(&r.Records[first])
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			total := 0
			dir := writeRow(t, func(t *testing.T, r *bundle.Results) { c.edit(t, r); total = len(r.Records) }, nil, false)
			rep, err := bundle.VerifyWith(context.Background(), dir, bundle.Options{Tokenizer: func(bundle.Provenance) (bundle.Counter, error) { return wordCounter{}, nil }})
			if err != nil || len(rep.Problems) != 0 {
				t.Fatalf("verify: %v %q", err, rep.Problems)
			}
			notes := strings.Join(rep.Notes, "\n")
			if !strings.Contains(notes, fmt.Sprintf("output_tokens of %d records re-counted", total-1)) || !strings.Contains(notes, "1 redacted records not re-counted") {
				t.Errorf("notes do not say one redacted record was skipped: %q", notes)
			}
		})
	}
}
