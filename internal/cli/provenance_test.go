package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/bundle/bundletest"
	"github.com/rehearse/rehearse/internal/provenance"
)

// TestUnknownCommitIsSaidPlainly: a bundle written by a binary without a
// VCS stamp (go run, -buildvcs=false) keeps an empty commit and the tool
// record's note, and its README says "commit unknown" and how to get it
// recorded; --version says the same.
func TestUnknownCommitIsSaidPlainly(t *testing.T) {
	res := bundletest.SeedLike()
	res.Provenance.Tool = bundle.Tool{Name: "rehearse", Version: "(devel)", GoVersion: "go1.26.8", Note: provenance.CommitUnknown}
	dir := seedBundle(t, res)
	if code, _, errs := run(t, "report", dir); code != 0 {
		t.Fatalf("report: %d %s", code, errs)
	}
	readme, err := os.ReadFile(filepath.Join(dir, bundle.ReadmeFile))
	if err != nil {
		t.Fatal(err)
	}
	line := "- Tool: rehearse (devel), go1.26.8; " + provenance.CommitUnknown + ".\n"
	if !strings.Contains(string(readme), line) {
		t.Errorf("README.md lacks %q", line)
	}
	data, err := os.ReadFile(filepath.Join(dir, bundle.ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Provenance struct {
			Tool map[string]any `json:"tool"`
		} `json:"provenance"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if tool := doc.Provenance.Tool; tool["commit"] != "" || tool["note"] != provenance.CommitUnknown {
		t.Errorf("results.json provenance.tool = %v, want an empty commit and the note", tool)
	}

	// The test binary itself carries no VCS stamp.
	if provenance.Tool().Commit == "" {
		code, out, _ := run(t, "--version")
		if code != 0 || !strings.Contains(out, "commit unknown") || !strings.Contains(out, "go build -buildvcs=true") {
			t.Errorf("--version: exit %d, %q", code, out)
		}
	}
}
