package provenance

import (
	"runtime"
	"runtime/debug"

	"github.com/rehearse/rehearse/internal/bundle"
)

// CommitUnknown is the tool record's note when the binary carries no VCS
// stamp: it says so and how to get the commit recorded.
const CommitUnknown = "commit unknown: this rehearse binary carries no VCS stamp " +
	"(it was built by go run, with -buildvcs=false, or outside a git clone); " +
	"to record the commit, build it in a git clone with go build -buildvcs=true ./cmd/rehearse " +
	"(a git worktree is not stamped)"

// Tool describes this rehearse build from its build info: the main
// module's version, the VCS revision and whether the tree had uncommitted
// changes, and the Go version. What the build info lacks is said in Note,
// never filled in: no commit is a literal, and an unstamped build records
// an empty commit and CommitUnknown.
func Tool() bundle.Tool {
	bi, ok := debug.ReadBuildInfo()
	return toolFrom(bi, ok)
}

func toolFrom(bi *debug.BuildInfo, ok bool) bundle.Tool {
	t := bundle.Tool{Name: "rehearse", GoVersion: runtime.Version()}
	if !ok || bi == nil {
		t.Note = CommitUnknown
		return t
	}
	t.Version = bi.Main.Version
	if bi.GoVersion != "" {
		t.GoVersion = bi.GoVersion
	}
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			t.Commit = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	switch {
	case t.Commit == "":
		t.Note = CommitUnknown
	case modified:
		t.Note = "built from a tree with uncommitted changes: the code is commit " + t.Commit + " plus changes that no commit holds"
	}
	return t
}
