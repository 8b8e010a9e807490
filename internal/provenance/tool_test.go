package provenance

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestToolSaysWhenTheCommitIsUnknown(t *testing.T) {
	const rev = "92b306b0d53e3a9085bc878a162dd2a0cd2b7299"
	stamped := func(modified string) *debug.BuildInfo {
		return &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261201160959-92b306b0d53e"},
			Settings: []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}}
	}
	// go run, or -buildvcs=false: no vcs.* settings, version (devel).
	unstamped := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"},
		Settings: []debug.BuildSetting{{Key: "-buildmode", Value: "exe"}}}

	got := toolFrom(stamped("false"), true)
	if got.Name != "rehearse" || got.Version != "v0.0.0-20261201160959-92b306b0d53e" || got.Commit != rev || got.GoVersion != "go1.26.8" || got.Note != "" {
		t.Errorf("stamped build: %+v", got)
	}
	if got := toolFrom(stamped("true"), true); got.Commit != rev || !strings.Contains(got.Note, "uncommitted changes") || !strings.Contains(got.Note, rev) {
		t.Errorf("stamped build of a modified tree: %+v", got)
	}
	for name, got := range map[string]struct {
		bi *debug.BuildInfo
		ok bool
	}{"unstamped": {unstamped, true}, "no build info": {nil, false}} {
		tool := toolFrom(got.bi, got.ok)
		if tool.Commit != "" || tool.Note != CommitUnknown {
			t.Errorf("%s: %+v, want no commit and the note %q", name, tool, CommitUnknown)
		}
	}
	for _, want := range []string{"commit unknown", "go build -buildvcs=true", "git clone"} {
		if !strings.Contains(CommitUnknown, want) {
			t.Errorf("the note lacks %q: %s", want, CommitUnknown)
		}
	}
}
