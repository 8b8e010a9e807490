package bundle_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/tokenizer"
)

// The bundles committed under rehearsals/ are evidence: they must keep
// verifying (digests, schema, every record, every aggregate recomputed, every
// output_tokens re-counted with the tokenizer their provenance names) as the
// code moves.
func TestCommittedBundlesVerify(t *testing.T) {
	sums, err := filepath.Glob("../../rehearsals/*/SHA256SUMS")
	if err != nil {
		t.Fatal(err)
	}
	if len(sums) == 0 {
		t.Fatal("no committed bundle found under rehearsals/")
	}
	find := func(p bundle.Provenance) (bundle.Counter, error) {
		// The digest alone: no cache, no Hub, only the embedded file.
		tok, _, err := tokenizer.Resolve(context.Background(), tokenizer.Request{SHA256: p.Tokenizer.SHA256, Variant: p.Tokenizer.Variant})
		if err != nil {
			return nil, err
		}
		return tok, nil
	}
	for _, s := range sums {
		dir := filepath.Dir(s)
		rep, _ := bundle.VerifyWith(context.Background(), dir, bundle.Options{Tokenizer: find})
		for _, p := range rep.Problems {
			t.Errorf("%s: %s", dir, p)
		}
		// Besides the re-count, a note may only say that a capacity
		// search's stops predate the recorded stop rule (SPEC §8): those
		// are accepted on their verdicts, and the note says so.
		recounted, predate := 0, 0
		for _, n := range rep.Notes {
			switch {
			case strings.Contains(n, "re-counted from their text"):
				recounted++
			case strings.Contains(n, "predate the rule"):
				predate++
			default:
				t.Errorf("%s: unexpected note %q", dir, n)
			}
		}
		if recounted != 1 {
			t.Errorf("%s: output_tokens must be re-counted, notes say %q", dir, rep.Notes)
		}
		if filepath.Base(dir) == "h200-capacity" && predate == 0 {
			t.Errorf("%s: its probes record no ended_by, yet no note says their stops are not replayed: %q", dir, rep.Notes)
		}
	}
}
