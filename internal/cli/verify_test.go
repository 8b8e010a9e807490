package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle/bundletest"
)

// A record whose output_tokens is not its text's count verifies only if
// nothing re-counts it: the aggregates were recomputed with the wrong count.
func TestVerifyRecountsOutputTokens(t *testing.T) {
	res := bundletest.SeedLike()
	dir := seedBundle(t, res)
	code, out, errs := run(t, "verify", dir)
	if code != 0 || !strings.Contains(errs, "output_tokens of 278 records re-counted from their text with the tokenizer of sha256 aeb13307") {
		t.Fatalf("fresh bundle: code %d, out %q, err %q", code, out, errs)
	}
	res.Records[0].OutputTokens--
	res.Recompute()
	dir = seedBundle(t, res)
	code, out, _ = run(t, "verify", dir)
	want := "results.json: server naive, 1 client, wave 0: records[0].output_tokens: stored 107, its text re-counted with the tokenizer is 108\n"
	if code != 1 || out != want {
		t.Fatalf("miscounted record: code %d, out %q, want %q", code, out, want)
	}
}

// Where no tokenizer has the digest provenance names, verify says so in one
// line and checks the rest.
func TestVerifyWithoutTheTokenizer(t *testing.T) {
	t.Setenv("HF_HUB_CACHE", t.TempDir())
	res := bundletest.SeedLike()
	sha := strings.Repeat("f", 64)
	res.Provenance.Tokenizer.SHA256 = sha
	dir := seedBundle(t, res)
	notTokenizer := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := os.WriteFile(notTokenizer, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := run(t, "verify", "--tokenizer", notTokenizer, dir)
	if code != 0 || !strings.Contains(out, "ok:") {
		t.Fatalf("code %d, out %q, err %q", code, out, errs)
	}
	for _, want := range []string{"output_tokens not re-counted: no tokenizer with sha256 " + sha + " at hand", notTokenizer + ": ", "is not in the Hugging Face cache", "; pass --tokenizer PATH\n"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr %q does not say %q", errs, want)
		}
	}
	if strings.Count(errs, "\n") != 1 {
		t.Errorf("want one line on stderr, got %q", errs)
	}
}
