package bundle_test

import (
	"path/filepath"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
)

// The bundles committed under rehearsals/ are evidence: they must keep
// verifying (digests, schema, every aggregate recomputed) as the code moves.
func TestCommittedBundlesVerify(t *testing.T) {
	sums, err := filepath.Glob("../../rehearsals/*/SHA256SUMS")
	if err != nil {
		t.Fatal(err)
	}
	if len(sums) == 0 {
		t.Fatal("no committed bundle found under rehearsals/")
	}
	for _, s := range sums {
		dir := filepath.Dir(s)
		for _, p := range bundle.Verify(dir) {
			t.Errorf("%s: %s", dir, p)
		}
	}
}
